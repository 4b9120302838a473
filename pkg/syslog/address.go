package syslog

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultAddress is the local syslog socket.
const DefaultAddress = "/dev/log"

// Networks of an Address.
const (
	NetworkUnixgram = "unixgram"
	NetworkUDP      = "udp"
)

// Address is where messages go: a unixgram socket's path, or a UDP
// collector's IP and port.
type Address struct {
	Network  string         // NetworkUnixgram or NetworkUDP
	Path     string         // unixgram: the socket's absolute path
	AddrPort netip.AddrPort // udp
}

// String is the address as ParseAddress reads it.
func (a Address) String() string {
	if a.Network == NetworkUDP {
		return "udp:" + a.AddrPort.String()
	}
	return "unixgram:" + a.Path
}

// ParseAddress reads an address: an absolute path or "unixgram:/path"
// (a unixgram socket), or "udp:IP:PORT" ("udp:[::1]:514" for IPv6). The
// UDP host is an IP literal: a name would need a DNS lookup, which can
// block, at every reconnect.
func ParseAddress(s string) (Address, error) {
	switch {
	case strings.HasPrefix(s, "/"):
		return unixgram(s, s)
	case strings.HasPrefix(s, "unixgram:"):
		return unixgram(s, strings.TrimPrefix(s, "unixgram:"))
	case strings.HasPrefix(s, "udp:"):
		ap, err := netip.ParseAddrPort(strings.TrimPrefix(s, "udp:"))
		if err != nil {
			return Address{}, fmt.Errorf("%q: udp:IP:PORT takes an IP address and a port (udp:127.0.0.1:514, udp:[::1]:514): %v", s, err)
		}
		if ap.Port() == 0 {
			return Address{}, fmt.Errorf("%q: port 0: name the collector's port (514 is syslog's)", s)
		}
		if ap.Addr().Zone() != "" {
			return Address{}, fmt.Errorf("%q: an IPv6 zone is not supported", s)
		}
		return Address{Network: NetworkUDP, AddrPort: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}, nil
	}
	return Address{}, fmt.Errorf("%q: use a socket path (/dev/log), unixgram:/path or udp:IP:PORT", s)
}

// maxPath is what a sockaddr_un's sun_path holds, its NUL aside.
const maxPath = 107

func unixgram(s, path string) (Address, error) {
	switch {
	case !filepath.IsAbs(path):
		return Address{}, fmt.Errorf("%q: the socket path must be absolute", s)
	case len(path) > maxPath:
		return Address{}, fmt.Errorf("%q: a socket path is at most %d bytes", s, maxPath)
	case strings.IndexByte(path, 0) >= 0:
		return Address{}, fmt.Errorf("%q: NUL in the socket path", s)
	}
	return Address{Network: NetworkUnixgram, Path: path}, nil
}

// Header formats (see the package doc).
const (
	FormatRFC5424 = "rfc5424"
	FormatLocal   = "local"
)

// Formats lists the header formats.
func Formats() []string { return []string{FormatRFC5424, FormatLocal} }

// Facility is a syslog facility (RFC 5424 §6.2.1), the high bits of PRI.
type Facility uint8

// DefaultFacility is daemon: what journald gives a service's standard
// error, so moving the process log to syslog keeps its facility.
const DefaultFacility Facility = 3

// facilities are the names RFC 5424's table and syslog(3) give codes
// 0..23, in order; HAProxy and nginx take the same.
var facilities = []string{
	"kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news",
	"uucp", "cron", "authpriv", "ftp", "ntp", "audit", "alert", "clock",
	"local0", "local1", "local2", "local3", "local4", "local5", "local6", "local7",
}

// FacilityNames lists the facilities' names, in code order.
func FacilityNames() []string { return slices.Clone(facilities) }

// ParseFacility reads a facility's name.
func ParseFacility(name string) (Facility, error) {
	if i := slices.Index(facilities, name); i >= 0 {
		return Facility(i), nil
	}
	return 0, fmt.Errorf("facility %q: use one of %s", name, strings.Join(facilities, ", "))
}

// String is the facility's name.
func (f Facility) String() string {
	if int(f) < len(facilities) {
		return facilities[f]
	}
	return fmt.Sprintf("facility(%d)", uint8(f))
}

// Severity is a message's severity (RFC 5424 §6.2.1), the low 3 bits of
// PRI: 0 is the most severe.
type Severity uint8

// The severities l4lb uses (slog's levels map onto them, SeverityOf).
const (
	SeverityError   Severity = 3
	SeverityWarning Severity = 4
	SeverityInfo    Severity = 6
	SeverityDebug   Severity = 7
)
