package main

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Client outcomes, one per connection.
const (
	outExact       = "exact"        // hello, every response byte, a clean trailer, then the FIN
	outCorrupted   = "corrupted"    // a wrong byte anywhere (hello, response, trailer, request as the backend saw it)
	outTruncated   = "truncated"    // a FIN before the stream was complete (either direction)
	outReset       = "reset"        // a reset before the stream was complete (or after it, instead of the FIN)
	outStalled     = "stalled"      // no byte either way for the stall limit
	outNoHello     = "no-hello"     // ended (FIN or reset) before the backend's first byte
	outDialFailed  = "dial-failed"  // l4lb's listener did not accept
	outClientReset = "client-reset" // deliberate: the client reset it (its bytes so far were checked)
)

// chaosConn is what one client connection saw; the analysis adds the
// faults and the packets it coincided with.
type chaosConn struct {
	ID         uint64 `json:"id"`
	Start      int64  `json:"start_ns"` // unix ns
	End        int64  `json:"end_ns"`
	ClientPort uint16 `json:"client_port"`
	Backend    int    `json:"backend"` // from the hello; 0: unknown
	PID        int    `json:"backend_pid,omitempty"`
	PeerPort   uint16 `json:"l4lb_port,omitempty"` // l4lb's port towards the backend
	HelloAt    int64  `json:"hello_ns,omitempty"`
	ReqLen     uint64 `json:"req_len"`
	RespLen    uint64 `json:"resp_len"`
	HalfClose  bool   `json:"half_close"`
	PlanReset  string `json:"planned_reset,omitempty"`
	Sent       uint64 `json:"sent"`
	Received   uint64 `json:"received"` // response bytes
	Outcome    string `json:"outcome"`
	Detail     string `json:"detail,omitempty"`

	// Filled by the analysis.
	Faults     []string `json:"faults,omitempty"`      // faults on its backend during its life ("kill#12 b2 ...")
	AnyFaults  []string `json:"any_faults,omitempty"`  // backend unknown: faults on any backend during its life
	L4lbEnd    string   `json:"l4lb_end,omitempty"`    // what l4lb sent the client first: fin, rst, none (seen on lo)
	BackendEnd string   `json:"backend_end,omitempty"` // what the backend sent l4lb first on its stream: fin, rst, none
	L4lbLog    string   `json:"l4lb_log,omitempty"`    // l4lb's debug line naming this client, if any
	Verdict    string   `json:"verdict,omitempty"`     // why it is (not) a defect
}

func (c *chaosConn) failed() bool {
	return c.Outcome != outExact && c.Outcome != outClientReset
}

// chaosClientConfig is the load: workers, sizes, and how often a client
// half-closes or resets on purpose.
type chaosClientConfig struct {
	Addr       string
	Workers    int
	MinSize    uint64
	MaxSize    uint64
	HalfClose  float64 // share of half-closing clients
	ResetShare float64 // share of deliberate resets
	Stall      time.Duration
	MaxConns   int // across workers
	// StopOnFailure: no new connection once one did not end byte-exact.
	StopOnFailure bool
}

type chaosClients struct {
	cfg     chaosClientConfig
	seed    uint64
	nextID  atomic.Uint64
	started atomic.Int64
	mu      sync.Mutex
	conns   []*chaosConn
	open    atomic.Int64
	failed  atomic.Bool
}

// run starts connections until stop is closed or MaxConns were started,
// then waits for the open ones (each bounded by the stall limit).
func (cl *chaosClients) run(stop <-chan struct{}) {
	var wg sync.WaitGroup
	for w := range cl.cfg.Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(cl.seed, uint64(w)+1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				if cl.started.Add(1) > int64(cl.cfg.MaxConns) || cl.failed.Load() {
					return
				}
				rec := cl.one(rng)
				if cl.cfg.StopOnFailure && rec.Outcome != outExact {
					cl.failed.Store(true)
				}
				cl.mu.Lock()
				cl.conns = append(cl.conns, rec)
				cl.mu.Unlock()
			}
		})
	}
	wg.Wait()
}

func (cl *chaosClients) results() []*chaosConn {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return append([]*chaosConn(nil), cl.conns...)
}

func logUniform(rng *rand.Rand, lo, hi uint64) uint64 {
	if hi <= lo {
		return lo
	}
	v := math.Exp(math.Log(float64(lo)) + rng.Float64()*(math.Log(float64(hi))-math.Log(float64(lo))))
	return min(hi, max(lo, uint64(v)))
}

// clientConn is one connection in flight.
type clientConn struct {
	c        *net.TCPConn
	stall    time.Duration
	progress atomic.Int64 // unix ns of the last byte either way
	mu       sync.Mutex
	aborted  bool
	reason   string // why the client cut it (client-reset, stalled); "": the outcome was already known
}

// abort resets the connection for reason, unless it was already cut.
func (cc *clientConn) abort(reason string) {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	if cc.aborted {
		return
	}
	cc.aborted, cc.reason = true, reason
	_ = cc.c.SetLinger(0)
	_ = cc.c.Close()
}

func (cc *clientConn) cutReason() string {
	cc.mu.Lock()
	defer cc.mu.Unlock()
	return cc.reason
}

func (cc *clientConn) moved() { cc.progress.Store(time.Now().UnixNano()) }

// stalled is true once no byte moved either way for the stall limit.
func (cc *clientConn) stalled() bool {
	return time.Since(time.Unix(0, cc.progress.Load())) > cc.stall
}

// poll is how long one blocking read or write waits before the stall
// limit is checked again.
const chaosPoll = time.Second

// read reads into p, waiting through short deadlines while the other
// direction moves; it fails with errStalled when nothing moved for the
// stall limit.
func (cc *clientConn) read(p []byte) (int, error) {
	for {
		_ = cc.c.SetReadDeadline(time.Now().Add(chaosPoll))
		n, err := cc.c.Read(p)
		if n > 0 {
			cc.moved()
		}
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			if n > 0 {
				return n, nil
			}
			if cc.stalled() {
				cc.abort(outStalled)
				return 0, errStalled
			}
			continue
		}
		return n, err
	}
}

func (cc *clientConn) readFull(p []byte) (int, error) {
	got := 0
	for got < len(p) {
		n, err := cc.read(p[got:])
		got += n
		if err != nil {
			if errors.Is(err, io.EOF) && got > 0 && got < len(p) {
				return got, io.ErrUnexpectedEOF
			}
			return got, err
		}
	}
	return got, nil
}

func (cc *clientConn) write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		_ = cc.c.SetWriteDeadline(time.Now().Add(chaosPoll))
		n, err := cc.c.Write(p[done:])
		done += n
		if n > 0 {
			cc.moved()
		}
		if err != nil {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				if cc.stalled() {
					cc.abort(outStalled)
					return done, errStalled
				}
				continue
			}
			return done, err
		}
	}
	return done, nil
}

var errStalled = errors.New("stalled")

// endKind names how a read ended: "fin", "rst" or the error.
func endKind(err error) string {
	switch {
	case err == nil:
		return "no error"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "fin"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "rst"
	case errors.Is(err, errStalled):
		return "stalled"
	}
	return err.Error()
}

// one runs a single connection to its end and says what it saw.
func (cl *chaosClients) one(rng *rand.Rand) *chaosConn {
	cl.open.Add(1)
	defer cl.open.Add(-1)
	rec := &chaosConn{
		ID:        cl.nextID.Add(1),
		ReqLen:    logUniform(rng, cl.cfg.MinSize, cl.cfg.MaxSize),
		RespLen:   logUniform(rng, cl.cfg.MinSize, cl.cfg.MaxSize),
		HalfClose: rng.Float64() < cl.cfg.HalfClose,
	}
	req := chaosRequest{ID: rec.ID, Seed: rng.Uint64(), ReqLen: rec.ReqLen, RespLen: rec.RespLen}
	if rec.HalfClose {
		req.Flags |= chaosFlagHalfClose
	}
	// A deliberate reset: after some request bytes, or some response bytes.
	resetAtReq, resetAtResp := int64(-1), int64(-1)
	if rng.Float64() < cl.cfg.ResetShare {
		if rng.IntN(2) == 0 {
			resetAtReq = int64(rng.Uint64N(rec.ReqLen + 1))
			rec.PlanReset = fmt.Sprintf("after %d request bytes", resetAtReq)
		} else {
			resetAtResp = int64(rng.Uint64N(rec.RespLen + 1))
			rec.PlanReset = fmt.Sprintf("after %d response bytes", resetAtResp)
		}
	}
	chunkMax := 1 + rng.IntN(256<<10)
	wseed := rng.Uint64()

	rec.Start = time.Now().UnixNano()
	finish := func(outcome, detail string) *chaosConn {
		rec.End = time.Now().UnixNano()
		rec.Outcome, rec.Detail = outcome, detail
		return rec
	}
	if err := checkLoopback(cl.cfg.Addr); err != nil {
		return finish(outDialFailed, err.Error())
	}
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.Dial("tcp4", cl.cfg.Addr)
	if err != nil {
		if errors.Is(err, syscall.ECONNRESET) {
			// The handshake with l4lb completed, then l4lb reset the
			// connection before connect(2) returned: turned away.
			return finish(outNoHello, "reset while connecting: "+err.Error())
		}
		return finish(outDialFailed, err.Error())
	}
	cc := &clientConn{c: nc.(*net.TCPConn), stall: cl.cfg.Stall}
	defer cc.c.Close()
	rec.ClientPort = uint16(cc.c.LocalAddr().(*net.TCPAddr).Port)
	cc.moved()

	// The writer: header, the request stream in random chunks, the FIN for
	// a half-closing client.
	reqSum := sha256.New()
	var sent atomic.Uint64
	writeDone := make(chan error, 1)
	go func() {
		wrng := rand.New(rand.NewPCG(wseed, 7))
		if _, err := cc.write(req.marshal()); err != nil {
			writeDone <- err
			return
		}
		buf := make([]byte, 256<<10)
		var off uint64
		for off < req.ReqLen {
			n := min(uint64(1+wrng.IntN(chunkMax)), req.ReqLen-off, uint64(len(buf)))
			if resetAtReq >= 0 && off+n >= uint64(resetAtReq) {
				n = uint64(resetAtReq) - off
			}
			fillStream(req.Seed, off, buf[:n])
			m, err := cc.write(buf[:n])
			reqSum.Write(buf[:m])
			off += uint64(m)
			sent.Store(off)
			if err != nil {
				writeDone <- err
				return
			}
			if resetAtReq >= 0 && off == uint64(resetAtReq) {
				cc.abort(outClientReset)
				writeDone <- errors.New("client reset")
				return
			}
		}
		if resetAtReq >= 0 && off == uint64(resetAtReq) {
			cc.abort(outClientReset)
			writeDone <- errors.New("client reset")
			return
		}
		if req.halfClose() {
			writeDone <- cc.c.CloseWrite()
			return
		}
		writeDone <- nil
	}()
	// Whatever the reader decides, the writer is done before we return.
	waitWriter := func() error { return <-writeDone }

	end := func(outcome, detail string) *chaosConn {
		rec.Sent = sent.Load()
		if r := cc.cutReason(); r != "" && outcome != outCorrupted {
			// The client cut it: on purpose, or because nothing moved.
			outcome = r
			if r == outStalled {
				detail = fmt.Sprintf("no byte either way for %v (%s)", cl.cfg.Stall, detail)
			}
		}
		return finish(outcome, detail)
	}

	// fail ends the connection once its outcome is known: the client
	// resets it (no FIN of ours may look like a complete request) and
	// waits for its writer.
	fail := func(outcome, detail string) *chaosConn {
		cc.abort("")
		waitWriter()
		return end(outcome, detail)
	}

	hb := make([]byte, chaosHelloLen)
	if n, err := cc.readFull(hb); err != nil {
		return fail(outNoHello, fmt.Sprintf("%s after %d hello bytes", endKind(err), n))
	}
	rec.HelloAt = time.Now().UnixNano()
	hello, err := parseChaosHello(hb)
	if err != nil {
		return fail(outCorrupted, err.Error())
	}
	rec.Backend, rec.PID, rec.PeerPort = int(hello.Backend), int(hello.PID), hello.PeerPort

	v := newStreamVerifier(req.respSeed())
	buf := make([]byte, 64<<10)
	for v.off < req.RespLen {
		want := min(uint64(len(buf)), req.RespLen-v.off)
		if resetAtResp >= 0 {
			if v.off >= uint64(resetAtResp) {
				cc.abort(outClientReset)
				break
			}
			want = min(want, uint64(resetAtResp)-v.off)
		}
		n, err := cc.read(buf[:want])
		v.check(buf[:n])
		rec.Received = v.off
		if v.firstBad >= 0 {
			return fail(outCorrupted, fmt.Sprintf("response byte %d of %d wrong", v.firstBad, req.RespLen))
		}
		if err != nil {
			if endKind(err) == "fin" {
				return fail(outTruncated, fmt.Sprintf("FIN after %d of %d response bytes", v.off, req.RespLen))
			}
			return fail(outReset, fmt.Sprintf("%s after %d of %d response bytes", endKind(err), v.off, req.RespLen))
		}
	}
	if resetAtResp >= 0 && v.off >= uint64(resetAtResp) {
		cc.abort(outClientReset)
		waitWriter()
		return end(outClientReset, "")
	}
	tb := make([]byte, chaosTrailerLen)
	if n, err := cc.readFull(tb); err != nil {
		if endKind(err) == "fin" {
			return fail(outTruncated, fmt.Sprintf("FIN after the response and %d trailer bytes", n))
		}
		return fail(outReset, fmt.Sprintf("%s after the response and %d trailer bytes", endKind(err), n))
	}
	tr, err := parseChaosTrailer(tb)
	if err != nil {
		return fail(outCorrupted, err.Error())
	}
	switch {
	case tr.FirstBad >= 0:
		return fail(outCorrupted, fmt.Sprintf("backend: request byte %d of %d wrong (or extra)", tr.FirstBad, req.ReqLen))
	case tr.Status == chaosTrailerShort || tr.RxLen != req.ReqLen:
		return fail(outTruncated, fmt.Sprintf("backend got a FIN after %d of %d request bytes", tr.RxLen, req.ReqLen))
	}
	// The backend had the whole request before it sent the trailer, so the
	// writer is done.
	if werr := waitWriter(); werr != nil {
		cc.abort("")
		return end(outReset, fmt.Sprintf("request write: %v (after a complete trailer)", werr))
	}
	var sum [32]byte
	copy(sum[:], reqSum.Sum(nil))
	if sum != tr.Sum {
		cc.abort("")
		return end(outCorrupted, "backend's request sha256 differs from what was sent")
	}
	// After the trailer: the FIN, and not one byte more.
	var one [1]byte
	n, err := cc.read(one[:])
	switch {
	case n > 0:
		cc.abort("")
		return end(outCorrupted, "a byte after the trailer")
	case !errors.Is(err, io.EOF):
		cc.abort("")
		return end(outReset, fmt.Sprintf("%s instead of the FIN after a complete stream", endKind(err)))
	}
	rec.Sent = sent.Load()
	return finish(outExact, "")
}
