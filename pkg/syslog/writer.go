package syslog

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/clock"
)

// RetryEvery is the least time between two attempts to open the socket
// while the daemon is unreachable.
const RetryEvery = time.Second

// Reason is why a message was dropped.
type Reason int

// The reasons a message is dropped, in the order of Reasons.
const (
	ReasonFull        Reason = iota // the socket's queue is full (EAGAIN, ENOBUFS)
	ReasonUnreachable               // no daemon at the address, or between retries
	ReasonError                     // any other send error
	NumReasons
)

var reasonNames = [NumReasons]string{"full", "unreachable", "error"}

// String is the reason's metric label.
func (r Reason) String() string { return reasonNames[r] }

// Drops counts dropped messages by Reason.
type Drops [NumReasons]int64

// Config sets up a Writer.
type Config struct {
	Address Address
	// Format is FormatRFC5424 or FormatLocal; "": FormatRFC5424.
	Format   string
	Facility Facility
	// MsgID is RFC 5424's MSGID: what kind of message ("access").
	MsgID string
	// Hostname is RFC 5424's HOSTNAME; "": os.Hostname.
	Hostname string
	// Clock paces the reconnects; nil: the real clock.
	Clock clock.Clock
}

// Writer sends messages to one syslog address. Its methods are safe for
// concurrent use; none blocks (see the package doc).
type Writer struct {
	addr  Address
	sa    unix.Sockaddr
	limit int
	clock clock.Clock

	mu      sync.Mutex
	h       header
	fd      int // -1: not open
	nextTry time.Time
	buf     []byte
	closed  bool

	drops [NumReasons]atomic.Int64
}

// Open returns a Writer for c and tries the socket once: a daemon not
// there yet is no error (messages are dropped until it is). An error
// names what in c is wrong.
func Open(c Config) (*Writer, error) {
	w := &Writer{addr: c.Address, fd: -1, clock: clock.Or(c.Clock)}
	switch c.Format {
	case "", FormatRFC5424:
		w.h.format = FormatRFC5424
	case FormatLocal:
		w.h.format = FormatLocal
	default:
		return nil, fmt.Errorf("syslog format %q: use %s or %s", c.Format, FormatRFC5424, FormatLocal)
	}
	if int(c.Facility) >= len(facilities) {
		return nil, fmt.Errorf("syslog facility %d: at most %d", c.Facility, len(facilities)-1)
	}
	w.h.facility = c.Facility
	host := c.Hostname
	if host == "" {
		host, _ = os.Hostname()
	}
	w.h.hostname = printable(host, 255)
	w.h.procid = strconv.Itoa(os.Getpid())
	w.h.msgid = printable(c.MsgID, 32)
	switch c.Address.Network {
	case NetworkUnixgram:
		w.sa, w.limit = &unix.SockaddrUnix{Name: c.Address.Path}, MaxUnixgram
	case NetworkUDP:
		ap := c.Address.AddrPort
		if ap.Addr().Is4() {
			w.sa = &unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
		} else {
			w.sa = &unix.SockaddrInet6{Port: int(ap.Port()), Addr: ap.Addr().As16()}
		}
		w.limit = MaxUDP
	default:
		return nil, fmt.Errorf("syslog address: network %q: use %s or %s", c.Address.Network, NetworkUnixgram, NetworkUDP)
	}
	w.buf = make([]byte, 0, w.limit)
	w.mu.Lock()
	w.open(w.clock.Now())
	w.mu.Unlock()
	return w, nil
}

// Address is where the writer sends.
func (w *Writer) Address() Address { return w.addr }

// Connected reports whether the socket is open: false from Open on when
// no daemon was there, until a retry finds one.
func (w *Writer) Connected() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fd >= 0
}

// Send sends one message of severity sev stamped t; body's trailing
// newline is dropped. It reports whether the message went out; one that
// did not is counted in Dropped.
func (w *Writer) Send(sev Severity, t time.Time, body []byte) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return w.drop(ReasonError)
	}
	w.buf = w.h.appendMessage(w.buf[:0], sev, t, body, w.limit)
	if w.fd < 0 && !w.open(w.clock.Now()) {
		return w.drop(ReasonUnreachable)
	}
	err := w.send()
	if err != nil && unreachable(err) {
		// The daemon went away, or restarted with a new socket: open it
		// again now if the pacing allows, so a restart loses nothing.
		w.shut()
		if w.open(w.clock.Now()) {
			err = w.send()
		}
	}
	switch {
	case err == nil:
		return true
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.ENOBUFS):
		return w.drop(ReasonFull)
	case unreachable(err):
		w.shut()
		return w.drop(ReasonUnreachable)
	default:
		return w.drop(ReasonError)
	}
}

func (w *Writer) send() error {
	for {
		err := unix.Sendto(w.fd, w.buf, unix.MSG_DONTWAIT|unix.MSG_NOSIGNAL, nil)
		if err != unix.EINTR {
			return err
		}
	}
}

// unreachable reports a send error that says nobody reads at the address.
func unreachable(err error) bool {
	for _, e := range []unix.Errno{unix.ECONNREFUSED, unix.ENOENT, unix.ENOTCONN, unix.ECONNRESET, unix.EPIPE, unix.EDESTADDRREQ} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

func (w *Writer) drop(r Reason) bool {
	w.drops[r].Add(1)
	return false
}

// open opens and connects the socket, at most once per RetryEvery; it
// reports whether the socket is open. Under mu.
func (w *Writer) open(now time.Time) bool {
	if now.Before(w.nextTry) {
		return false
	}
	w.nextTry = now.Add(RetryEvery)
	domain := unix.AF_UNIX
	switch w.sa.(type) {
	case *unix.SockaddrInet4:
		domain = unix.AF_INET
	case *unix.SockaddrInet6:
		domain = unix.AF_INET6
	}
	fd, err := unix.Socket(domain, unix.SOCK_DGRAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return false
	}
	if err := unix.Connect(fd, w.sa); err != nil {
		unix.Close(fd)
		return false
	}
	w.fd = fd
	return true
}

// shut closes the socket. Under mu.
func (w *Writer) shut() {
	if w.fd >= 0 {
		unix.Close(w.fd)
		w.fd = -1
	}
}

// Dropped returns the messages dropped so far, by reason.
func (w *Writer) Dropped() Drops {
	var d Drops
	for r := range d {
		d[r] = w.drops[r].Load()
	}
	return d
}

// Close closes the socket; a message sent after it is dropped (error).
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.shut()
	return nil
}
