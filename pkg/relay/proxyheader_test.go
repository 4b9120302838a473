package relay

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/accesslog"
	"github.com/l4lb/l4lb/pkg/ipset"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/proxyproto"
)

// stubHeaderWrite makes every PROXY header write to a backend go through
// w until the test ends. Call it before newHarness: the loops start after
// the swap, and the restore runs after the harness stopped them (cleanups
// run last-registered first).
func stubHeaderWrite(t *testing.T, w func(fd int, b []byte) (int, error)) {
	prev := writeHeader
	writeHeader = w
	t.Cleanup(func() { writeHeader = prev })
}

// frontCounts checks a front's results against want (ok, failed,
// rejected) and its close reasons against wantClosed, every other reason
// at 0; and that the results add up to the closes, as docs/architecture.md promises.
func frontCounts(t *testing.T, f *Front, ok, failed, rejected int64, wantClosed map[CloseReason]int64) {
	t.Helper()
	if g := [3]int64{f.OK.Load(), f.Failed.Load(), f.Rejected.Load()}; g != [3]int64{ok, failed, rejected} {
		t.Errorf("results ok/failed/rejected = %v, want %v", g, [3]int64{ok, failed, rejected})
	}
	var closed int64
	for r := range NumCloseReasons {
		n := f.Closed[r].Load()
		closed += n
		if n != wantClosed[r] {
			t.Errorf("closed as %s: %d, want %d", r, n, wantClosed[r])
		}
	}
	if sum := f.OK.Load() + f.Failed.Load() + f.Rejected.Load(); sum != closed {
		t.Errorf("results add up to %d, closes to %d: the metrics disagree", sum, closed)
	}
}

// ended waits until front's clients have all ended, n of them.
func ended(t *testing.T, h *harness, front string, n int64) {
	t.Helper()
	f := h.front(front)
	testnet.Eventually(t, fmt.Sprintf("%d clients to end", n), func() bool {
		var closed int64
		for r := range NumCloseReasons {
			closed += f.Closed[r].Load()
		}
		return closed >= n && h.sh.Active.Load() == 0
	})
}

// A PROXY header this host fails to write to the backend (a short write,
// a write error that is no reset) ends the client as local_error: it is
// counted as rejected, never as ok, and its access record says so. A
// backend that reset as the header went out is a backend reset of a
// client that was served (ok), as ever.
func TestProxyHeaderNotWrittenIsNoOK(t *testing.T) {
	for _, tc := range []struct {
		name   string
		write  func(fd int, b []byte) (int, error)
		reason CloseReason
		result ClientResult
	}{
		{"short write", func(fd int, b []byte) (int, error) { return unix.Write(fd, b[:3]) }, CloseLocalError, ResultRejected},
		{"ENOBUFS", func(int, []byte) (int, error) { return 0, unix.ENOBUFS }, CloseLocalError, ResultRejected},
		{"backend reset", func(int, []byte) (int, error) { return 0, unix.ECONNRESET }, CloseBackendReset, ResultOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stubHeaderWrite(t, tc.write)
			k := testnet.StartTaker(t)
			h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr},
				keys: `proxy_protocol = "v2"`}}})
			q := accesslog.NewQueue(1, 16)
			h.sh.SetAccessLog(q)
			// The client's connect completes while the loop is held: the
			// loop's reset must not beat the client's own connect(2).
			release := h.hold(h.loops[0])
			c := h.dial("p")
			defer c.Close()
			release()
			b := k.Next(t) // the connect worked: the header is what failed
			defer b.Close()
			mustReset(t, "client", c)
			ended(t, h, "p", 1)
			var ok, rejected int64
			if tc.result == ResultOK {
				ok = 1
			} else {
				rejected = 1
			}
			frontCounts(t, h.front("p").Front, ok, 0, rejected, map[CloseReason]int64{tc.reason: 1})
			var recs []accesslog.Record
			q.Drain(func(r *accesslog.Record) { recs = append(recs, *r) })
			if len(recs) != 1 || recs[0].Reason != tc.reason.String() || recs[0].Result != tc.result.String() {
				t.Errorf("access records %+v, want one %s with result %s", recs, tc.reason, tc.result)
			}
			if s, f := h.front("p").Pool().Backends()[0].Dials(pool.DialClient); s != 1 || f != 0 {
				t.Errorf("client dials %d ok / %d failed, want 1 / 0: the connect itself worked", s, f)
			}
		})
	}
}

// acceptProxyFrom makes front take PROXY headers from 127.0.0.0/8, with a
// proxy_timeout no test waits for.
func acceptProxyFrom(h *harness, front string) {
	h.front(front).SetPolicy(&Policy{
		AcceptProxy:  true,
		Trusted:      ipset.New([]netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}),
		ProxyTimeout: time.Minute,
	})
}

// A client that sends its PROXY header and resets before the loop looks
// has left: it is not dialed for, and no backend is judged by a dial made
// for it (the backend here refuses, so a dial would be a failure), whether
// the header and the reset come in the turn that accepts it or in a later
// one, which sees the header's bytes and the reset in one event.
func TestClientResetWithItsProxyHeaderIsNoDial(t *testing.T) {
	for _, v := range []int{1, 2} {
		for _, later := range []bool{false, true} {
			turn := "accepting-turn"
			if later {
				turn = "later-turn"
			}
			t.Run(fmt.Sprintf("v%d/%s", v, turn), func(t *testing.T) {
				refusing := testnet.FreeAddr(t) // nothing listens there
				h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{refusing}}}})
				acceptProxyFrom(h, "p")
				l := h.loops[0]
				var release func()
				if !later {
					release = h.hold(l) // the loop accepts once header and reset are there
				}
				c := h.dial("p")
				defer c.Close()
				if later {
					testnet.Eventually(t, "the loop to wait for the client's PROXY header", func() bool {
						cs := h.conns()
						return len(cs) == 1 && cs[0].phase == phaseProxy
					})
					release = h.hold(l)
				}
				hdr := header(v, netip.MustParseAddrPort("203.0.113.7:4242"), netip.MustParseAddrPort("198.51.100.1:443"))
				if _, err := c.Write(hdr); err != nil {
					t.Fatal(err)
				}
				c.SetLinger(0)
				c.Close() // on loopback the RST has landed when Close returns
				release()
				ended(t, h, "p", 1)
				frontCounts(t, h.front("p").Front, 0, 0, 1, map[CloseReason]int64{CloseClientLeft: 1})
				if s, f := h.front("p").Pool().Backends()[0].Dials(pool.DialClient); s != 0 || f != 0 {
					t.Errorf("client dials %d ok / %d failed, want none judged: the client had left", s, f)
				}
			})
		}
	}
}

// header is a PROXY header of version v naming src as the client and dst
// as what it connected to.
func header(v int, src, dst netip.AddrPort) []byte {
	if v == 1 {
		return proxyproto.AppendV1(nil, src, dst)
	}
	return proxyproto.AppendV2(nil, proxyproto.Stream, src, dst)
}
