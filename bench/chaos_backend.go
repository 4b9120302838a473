package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Backend modes a chaos fault can switch a backend process into.
const (
	modeNormal      int32 = iota
	modeResetMid          // some new streams are reset after some bytes
	modeAcceptClose       // every connection is closed the moment it is accepted
)

var modeNames = map[string]int32{"normal": modeNormal, "reset-mid": modeResetMid, "accept-close": modeAcceptClose}

// Backend event kinds (one JSON line each in the events file).
const (
	evAcceptClose    = "accept-close"    // closed at once (mode accept-close)
	evResetMid       = "reset-mid"       // reset after Tx response bytes (mode reset-mid)
	evShortRequest   = "short-request"   // a FIN arrived before the whole request: nobody but l4lb sent it
	evCorruptRequest = "corrupt-request" // a request byte, header or extra byte was wrong
)

// chaosBackendEvent is one notable thing a backend did or saw.
type chaosBackendEvent struct {
	T       int64  `json:"t"` // unix ns
	Backend int    `json:"backend"`
	PID     int    `json:"pid"`
	Seq     uint32 `json:"seq"`
	Peer    uint16 `json:"peer"` // l4lb's port on this stream
	ConnID  uint64 `json:"conn,omitempty"`
	Kind    string `json:"kind"`
	Rx      uint64 `json:"rx"`
	Tx      uint64 `json:"tx"`
	Detail  string `json:"detail,omitempty"`
}

type chaosBackend struct {
	id   int
	port uint16
	mode atomic.Int32
	seq  atomic.Uint32
	evMu sync.Mutex
	ev   *os.File
}

// chaosBackendIOTimeout bounds every read and write of a backend, so a
// stream whose peer vanished (reject-all) does not pin a goroutine forever.
const chaosBackendIOTimeout = 120 * time.Second

// runChaosBackendRole serves the chaos protocol on one loopback address
// until killed. stdin takes "mode NAME" lines, each answered "ok NAME" on
// stdout once in force.
func runChaosBackendRole(args []string) error {
	fs := flag.NewFlagSet("chaos-backend", flag.ContinueOnError)
	addr := fs.String("listen", "", "listen address (127.0.0.1:PORT)")
	id := fs.Int("id", 0, "backend id, sent in every hello")
	events := fs.String("events", "", "append notable events to this file (JSON lines)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	l, err := listenLoopback(*addr)
	if err != nil {
		return err
	}
	b := &chaosBackend{id: *id, port: uint16(l.Addr().(*net.TCPAddr).Port)}
	if *events != "" {
		if b.ev, err = os.OpenFile(*events, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
			return err
		}
	}
	var outMu sync.Mutex
	say := func(s string) {
		outMu.Lock()
		defer outMu.Unlock()
		fmt.Fprintln(os.Stdout, s)
	}
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			f := strings.Fields(sc.Text())
			if len(f) == 2 && f[0] == "mode" {
				if m, ok := modeNames[f[1]]; ok {
					b.mode.Store(m)
					say("ok " + f[1])
					continue
				}
			}
			say("error " + sc.Text())
		}
		// The harness is gone: so are we.
		os.Exit(0)
	}()
	say(readyLine)
	for {
		c, err := l.AcceptTCP()
		if err != nil {
			time.Sleep(time.Millisecond) // EMFILE and friends: keep serving
			continue
		}
		go b.handle(c)
	}
}

func (b *chaosBackend) record(e chaosBackendEvent) {
	if b.ev == nil {
		return
	}
	e.T, e.Backend, e.PID = time.Now().UnixNano(), b.id, os.Getpid()
	line, _ := json.Marshal(e)
	b.evMu.Lock()
	defer b.evMu.Unlock()
	_, _ = b.ev.Write(append(line, '\n'))
}

func (b *chaosBackend) handle(c *net.TCPConn) {
	defer c.Close()
	seq := b.seq.Add(1)
	peer := uint16(c.RemoteAddr().(*net.TCPAddr).Port)
	ev := chaosBackendEvent{Seq: seq, Peer: peer}
	if b.mode.Load() == modeAcceptClose {
		ev.Kind = evAcceptClose
		b.record(ev)
		return
	}
	deadline := func() { _ = c.SetDeadline(time.Now().Add(chaosBackendIOTimeout)) }
	deadline()
	hello := chaosHello{Backend: uint32(b.id), PID: uint32(os.Getpid()), PeerPort: peer, LocalPort: b.port, Seq: seq}
	if _, err := c.Write(hello.marshal()); err != nil {
		return
	}
	hdr := make([]byte, chaosReqLen)
	n, err := io.ReadFull(c, hdr)
	if err != nil {
		// Nothing at all, then FIN: a health check or a breaker probe.
		if n > 0 && errors.Is(err, io.ErrUnexpectedEOF) {
			ev.Kind, ev.Rx, ev.Detail = evShortRequest, uint64(n), "FIN inside the request header"
			b.record(ev)
		}
		return
	}
	req, err := parseChaosRequest(hdr)
	if err != nil {
		ev.Kind, ev.Detail = evCorruptRequest, err.Error()
		b.record(ev)
		_ = c.SetLinger(0)
		return
	}
	ev.ConnID = req.ID

	// The reader checks the request while the writer streams the response.
	type readResult struct {
		tr  chaosTrailer
		err error // a reset or timeout: no trailer
	}
	readDone := make(chan readResult, 1)
	go func() {
		v := newStreamVerifier(req.Seed)
		sum := sha256.New()
		buf := make([]byte, 64<<10)
		var rx uint64
		for rx < req.ReqLen {
			deadline()
			n, err := c.Read(buf[:min(uint64(len(buf)), req.ReqLen-rx)])
			v.check(buf[:n])
			sum.Write(buf[:n])
			rx += uint64(n)
			if err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				readDone <- readResult{err: err}
				return
			}
		}
		tr := chaosTrailer{RxLen: rx, FirstBad: v.firstBad}
		copy(tr.Sum[:], sum.Sum(nil))
		if rx < req.ReqLen {
			tr.Status = chaosTrailerShort
		} else if req.halfClose() {
			// The client half-closes after its last byte: expect its FIN.
			deadline()
			n, err := c.Read(buf[:1])
			if n > 0 {
				tr.FirstBad = int64(rx) // a byte past the end
			} else if !errors.Is(err, io.EOF) {
				readDone <- readResult{err: err}
				return
			}
		}
		readDone <- readResult{tr: tr}
	}()

	rng := rand.New(rand.NewPCG(req.Seed, uint64(seq)))
	cut := int64(-1) // reset when this many response bytes are out
	drawn := false
	out := make([]byte, 128<<10)
	var tx uint64
	reset := func() {
		ev.Kind, ev.Tx = evResetMid, tx
		b.record(ev)
		_ = c.SetLinger(0)
	}
	for {
		if !drawn && b.mode.Load() == modeResetMid {
			drawn = true
			if rng.IntN(2) == 0 {
				cut = int64(tx + rng.Uint64N(req.RespLen-tx+1))
			}
		}
		if cut >= 0 && int64(tx) >= cut {
			reset()
			return
		}
		if tx >= req.RespLen {
			break
		}
		n := min(uint64(1+rng.IntN(len(out))), req.RespLen-tx)
		if cut >= 0 {
			n = min(n, uint64(cut)-tx)
		}
		fillStream(req.respSeed(), tx, out[:n])
		deadline()
		if _, err := c.Write(out[:n]); err != nil {
			return
		}
		tx += n
	}
	r := <-readDone
	ev.Tx = tx
	if r.err != nil {
		return
	}
	ev.Rx = r.tr.RxLen
	if r.tr.Status == chaosTrailerShort {
		ev.Kind, ev.Detail = evShortRequest, fmt.Sprintf("FIN after %d of %d request bytes", r.tr.RxLen, req.ReqLen)
		b.record(ev)
	}
	if r.tr.FirstBad >= 0 {
		ev.Kind, ev.Detail = evCorruptRequest, fmt.Sprintf("request byte %d of %d wrong (or extra)", r.tr.FirstBad, req.ReqLen)
		b.record(ev)
	}
	deadline()
	if _, err := c.Write(r.tr.marshal()); err != nil {
		return
	}
	if err := c.CloseWrite(); err != nil {
		return
	}
	if !req.halfClose() && r.tr.Status == chaosTrailerOK {
		// The client closes once it has the trailer: nothing more may come.
		deadline()
		var one [1]byte
		if n, _ := c.Read(one[:]); n > 0 {
			ev.Kind, ev.Detail = evCorruptRequest, "a byte after the request"
			b.record(ev)
		}
	}
}
