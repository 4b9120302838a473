package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// runLonglivedClientRole is one process of the longlived scenario's
// clients (`-role llclient`): it owns -count connections, global numbers
// -first.., each to targets[g % len] from sources[g % len], and runs the
// phases the harness writes on its stdin, one line each, answering each
// with one JSON line on stdout (llReply). One epoll loop on a locked
// thread and a small struct per connection: a goroutine per connection
// would cost ~1 GB at 100,000 on this machine.
func runLonglivedClientRole(args []string) error {
	fs := flag.NewFlagSet("llclient", flag.ContinueOnError)
	targets := fs.String("targets", "", "comma-separated IP:PORT to connect to")
	sources := fs.String("sources", "", "comma-separated source IPs")
	first := fs.Int("first", 0, "global number of the first connection")
	count := fs.Int("count", 0, "connections this process holds")
	inflight := fs.Int("inflight", 64, "dials in flight at once while opening")
	if err := fs.Parse(args); err != nil {
		return err
	}
	c, err := newLLClient(*targets, *sources, *first, *count, *inflight)
	if err != nil {
		return err
	}
	runtime.LockOSThread()
	return c.loop()
}

// Connection states.
const (
	llIdle      = iota // not opened yet
	llDialing          // connect in progress
	llVerifying        // connected, first message sent, echo awaited
	llHeld             // established and verified
	llWaiting          // closed; redialed at nextTry
	llFailed           // gave up
	llBroken           // closed outside a storm: stays closed
)

const (
	llMsgSize     = 64
	llEchoTimeout = 5 * time.Second // a message unanswered this long is lost
	llOpenTries   = 3
	llStormTries  = 15 // reconnect attempts of one connection in a storm
)

type llConn struct {
	fd       int
	state    uint8
	tries    uint8
	dropped  bool  // closed since the storm began
	sentAt   int64 // ns since start of the message awaited; 0: none
	got      int   // bytes of it echoed so far
	nextTry  int64 // ns since start
	servedAt int64 // ns since start: verified again after a drop
}

type llClient struct {
	start    time.Time
	ep       int
	targets  []unix.SockaddrInet4
	sources  []unix.SockaddrInet4
	first    int
	conns    []llConn
	byFD     []int32 // fd -> index in conns, -1
	inflight int
	msg      [llMsgSize]byte
	buf      []byte
	stdin    []byte

	phase    string
	cursor   int // next connection the phase starts on
	dialing  int // connects in progress
	phaseT0  int64
	until    int64 // ns since start: the phase's end
	period   int64 // msgs: each connection's message interval
	rate     float64
	hist     rttHist
	sent     uint64
	echoed   uint64
	lost     uint64
	attempts uint64
	awaiting int   // messages sent, echo not complete
	retry    []int // connections in llWaiting
	lastScan int64
	rng      *rand.Rand
}

// llReply is one phase's outcome, the only thing a client prints.
type llReply struct {
	Op        string  `json:"op"`
	Held      int     `json:"held"`
	Failed    int     `json:"failed"`
	Broken    int     `json:"broken"`
	NotDrop   int     `json:"not_dropped"`
	Served    int     `json:"served"`
	Sent      uint64  `json:"sent"`
	Echoed    uint64  `json:"echoed"`
	Lost      uint64  `json:"lost"`
	Attempts  uint64  `json:"attempts"`
	LastNS    int64   `json:"last_ns"` // wall clock of the last connection served again
	Hist      rttHist `json:"hist,omitempty"`
	Error     string  `json:"error,omitempty"`
	ElapsedMS float64 `json:"elapsed_ms"`
}

func parseLLAddrs(list string, port bool) ([]unix.SockaddrInet4, error) {
	var out []unix.SockaddrInet4
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		var ap netip.AddrPort
		var err error
		if port {
			ap, err = netip.ParseAddrPort(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			ap = netip.AddrPortFrom(a, 0)
		}
		if err != nil {
			return nil, err
		}
		if !llNet.Contains(ap.Addr()) {
			return nil, fmt.Errorf("%s is outside the scenario's network %s", s, llNet)
		}
		out = append(out, unix.SockaddrInet4{Addr: ap.Addr().As4(), Port: int(ap.Port())})
	}
	if len(out) == 0 {
		return nil, errors.New("empty address list")
	}
	return out, nil
}

func newLLClient(targets, sources string, first, count, inflight int) (*llClient, error) {
	c := &llClient{start: time.Now(), first: first, inflight: max(inflight, 1), buf: make([]byte, 64<<10),
		rng: rand.New(rand.NewPCG(uint64(first), 27))}
	var err error
	if c.targets, err = parseLLAddrs(targets, true); err != nil {
		return nil, fmt.Errorf("-targets: %w", err)
	}
	if c.sources, err = parseLLAddrs(sources, false); err != nil {
		return nil, fmt.Errorf("-sources: %w", err)
	}
	if count <= 0 {
		return nil, errors.New("-count must be > 0")
	}
	c.conns = make([]llConn, count)
	for i := range c.conns {
		c.conns[i].fd = -1
	}
	copy(c.msg[:], bytes.Repeat([]byte("m"), llMsgSize))
	if c.ep, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return nil, err
	}
	if err := unix.SetNonblock(0, true); err != nil {
		return nil, err
	}
	if err := unix.EpollCtl(c.ep, unix.EPOLL_CTL_ADD, 0, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: 0}); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *llClient) now() int64 { return int64(time.Since(c.start)) }

func (c *llClient) reply(r llReply) {
	r.Op = c.phase
	r.ElapsedMS = float64(c.now()-c.phaseT0) / 1e6
	b, _ := json.Marshal(r)
	os.Stdout.Write(append(b, '\n'))
	c.phase = ""
}

// loop serves epoll events and the current phase until stdin closes or
// says quit.
func (c *llClient) loop() error {
	events := make([]unix.EpollEvent, 1024)
	for {
		n, err := unix.EpollWait(c.ep, events, c.waitMS())
		if err != nil && !errors.Is(err, unix.EINTR) {
			return err
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == 0 {
				if quit, err := c.readCommands(); quit || err != nil {
					return err
				}
				continue
			}
			c.onEvent(int(ev.Fd), ev.Events)
		}
		c.tick()
	}
}

// waitMS is how long epoll may sleep: briefly while a phase has work on
// a clock, else until an event.
func (c *llClient) waitMS() int {
	switch c.phase {
	case "":
		return -1
	case "msgs", "check":
		return 1
	}
	return 10
}

func (c *llClient) readCommands() (quit bool, err error) {
	for {
		n, err := unix.Read(0, c.buf)
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n == 0 {
			return true, nil // the harness is gone
		}
		c.stdin = append(c.stdin, c.buf[:n]...)
	}
	for {
		i := bytes.IndexByte(c.stdin, '\n')
		if i < 0 {
			return false, nil
		}
		line := strings.Fields(string(c.stdin[:i]))
		c.stdin = c.stdin[i+1:]
		if len(line) == 0 {
			continue
		}
		if line[0] == "quit" {
			return true, nil
		}
		if err := c.begin(line); err != nil {
			c.phase = line[0]
			c.reply(llReply{Error: err.Error()})
		}
	}
}

func msArg(line []string, i int) (int64, error) {
	if len(line) <= i {
		return 0, fmt.Errorf("%s: missing argument %d", line[0], i)
	}
	v, err := strconv.ParseFloat(line[i], 64)
	return int64(v * float64(time.Millisecond)), err
}

// begin starts a phase:
//
//	open DEADLINE_MS         dial and verify every connection
//	msgs WINDOW_MS PERIOD_MS each held connection sends a message every PERIOD, spread evenly
//	check RATE_PER_S         one message on every connection, paced
//	storm DEADLINE_MS        from now, a connection that closes reconnects at once
func (c *llClient) begin(line []string) error {
	if c.phase != "" {
		return fmt.Errorf("phase %s still running", c.phase)
	}
	c.phase, c.phaseT0, c.cursor = line[0], c.now(), 0
	c.sent, c.echoed, c.lost, c.attempts = 0, 0, 0, 0
	switch line[0] {
	case "open", "storm":
		d, err := msArg(line, 1)
		if err != nil {
			return err
		}
		c.until = c.phaseT0 + d
		if line[0] == "storm" {
			for i := range c.conns {
				c.conns[i].dropped, c.conns[i].servedAt, c.conns[i].tries = false, 0, 0
			}
			os.Stdout.WriteString("{\"op\":\"armed\"}\n")
		}
	case "msgs":
		w, err := msArg(line, 1)
		if err != nil {
			return err
		}
		if c.period, err = msArg(line, 2); err != nil || c.period <= 0 {
			return fmt.Errorf("msgs: bad period")
		}
		c.until, c.hist = c.phaseT0+w, rttHist{}
	case "check":
		if len(line) < 2 {
			return errors.New("check: missing rate")
		}
		r, err := strconv.ParseFloat(line[1], 64)
		if err != nil || r <= 0 {
			return errors.New("check: bad rate")
		}
		c.rate, c.hist = r, rttHist{}
		c.until = c.phaseT0 + int64(float64(len(c.conns))/r*1e9) + int64(llEchoTimeout)
	default:
		c.phase = ""
		return fmt.Errorf("unknown command %q", line[0])
	}
	return nil
}
