package listener

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Own identifies sockets this process itself holds, by SocketID: those a
// reload or an upgrade closes once the new listeners serve. A listener
// moved from "127.0.0.1:P" to "0.0.0.0:P" (or back, or between "[::1]:P"
// and "[::]:P") is bound while its old sockets still listen, so that no
// moment goes without a socket on the port; the pre-bind check's plain
// bind collides with them, and BindOwn and BindUDPOwn then look the
// port's holders up and refuse only one that is not in own. The new
// SO_REUSEPORT sockets may sit beside the old ones: the kernel gives a
// connection to the socket with the most specific address, so the old
// ones serve their address until they close.
type Own map[uint64]struct{}

// Add adds the sockets behind fds (a slot set to -1 is skipped; so is an
// fd fstat fails on, which leaves a collision with it refused).
func (o Own) Add(fds []int) {
	for _, fd := range fds {
		if fd < 0 {
			continue
		}
		if id, err := SocketID(fd); err == nil {
			o[id] = struct{}{}
		}
	}
}

// Own identifies the sockets still in the set: the ones no listener took,
// which the process closes once it serves.
func (s *InheritedSet) Own() Own {
	if s == nil {
		return nil
	}
	o := Own{}
	for _, in := range s.socks {
		o.Add([]int{in.FD})
	}
	return o
}

// bindError says so when a socket's own bind found the address taken
// (the pre-bind check let it through: the holder looked like one of this
// process's sockets, or came meanwhile). Port 0 taken means no free port.
func bindError(ap netip.AddrPort, err error) error {
	if ap.Port() != 0 && errors.Is(err, unix.EADDRINUSE) {
		return inUse(err)
	}
	return err
}

// foreignHolder reports whether a socket not in own holds ap's port for
// proto on an address that overlaps ap: the same address, or either the
// wildcard, of one family. An IPv6 wildcard socket counts beside IPv4
// addresses too, since /proc does not say whether it is IPv6-only (l4lb's
// are; a dual-stack one takes IPv4 as well). A holder is a socket
// connected to nothing (a listening TCP socket, a bound UDP one): the
// connections a listener accepted share its port but hold no bind of
// their own. The sockets come from /proc/thread-self/net, the network
// namespace of the thread that binds.
func foreignHolder(proto string, ap netip.AddrPort, own Own) (bool, error) {
	want := netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
	tables := []string{proto + "6"}
	if want.Addr().Is4() {
		tables = append(tables, proto)
	}
	for _, table := range tables {
		foreign, err := foreignIn("/proc/thread-self/net/"+table, want, own)
		if err != nil || foreign {
			return foreign, err
		}
	}
	return false, nil
}

func foreignIn(path string, want netip.AddrPort, own Own) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 {
			continue
		}
		local, err := procAddrPort(fields[1])
		if err != nil || local.Port() != want.Port() {
			continue
		}
		remote, err := procAddrPort(fields[2])
		if err != nil || remote.Port() != 0 || !remote.Addr().IsUnspecified() {
			continue
		}
		inode, err := strconv.ParseUint(fields[9], 10, 64)
		if err != nil || inode == 0 {
			continue
		}
		if _, ours := own[inode]; ours || !overlaps(local.Addr(), want.Addr()) {
			continue
		}
		return true, nil
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("%s: %w", path, err)
	}
	return false, nil
}

// overlaps reports whether a socket bound to held (as /proc lists it)
// collides with a bind to want (an IPv4 address unmapped) on their port.
func overlaps(held, want netip.Addr) bool {
	if held.Is6() && held.IsUnspecified() && want.Is4() {
		return true // maybe dual-stack
	}
	held = held.Unmap()
	if held.Is4() != want.Is4() {
		return false
	}
	return held == want.WithZone("") || held.IsUnspecified() || want.IsUnspecified()
}

// procAddrPort decodes an address of /proc/net/tcp and its kin,
// "0100007F:1F90": the address as 32-bit words in host byte order, then
// the port, in hex.
func procAddrPort(s string) (netip.AddrPort, error) {
	host, port, ok := strings.Cut(s, ":")
	if !ok || (len(host) != 8 && len(host) != 32) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	var raw [16]byte
	for i := 0; i < len(host); i += 8 {
		w, err := strconv.ParseUint(host[i:i+8], 16, 32)
		if err != nil {
			return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
		}
		binary.NativeEndian.PutUint32(raw[i/2:], uint32(w))
	}
	a, _ := netip.AddrFromSlice(raw[:len(host)/2])
	return netip.AddrPortFrom(a, uint16(p)), nil
}
