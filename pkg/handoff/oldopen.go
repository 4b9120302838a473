package handoff

import (
	"context"
	"encoding/json"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/pkg/clock"
)

// The old process's open client connections, counted by the new one
// against [global] max_connections while both serve, so the cap holds for
// the service rather than for each process. The old process reports how
// many it holds on the flows socket ("open" messages): at the start of the
// hand-over, after each acknowledged batch, before "done", then every
// openEvery until it exits. The new process counts the last report, less
// what it adopted since: a batch sent after a report was counted in it
// (the old process takes a connection out of its count as it puts it in a
// batch), while one sent before it was not, and arrives first (the
// socket keeps the order), the report then replacing the count. So a
// connection handed over is counted once, there and then here. The count
// is forgotten openLife after it came, or at once when the socket closes (the old
// process exited, or died): a count never outlives the process that holds
// the connections. Handed-over connections are never refused for the cap;
// they were admitted long ago.

const (
	// openEvery is how often the old process reports once its hand-over
	// is done, while it drains what stayed with it.
	openEvery = 500 * time.Millisecond
	// openLife is how long a report counts without the next: an old
	// process that stopped reporting (hung, or a build that reports only
	// once) no longer holds new clients out after it.
	openLife = 4 * openEvery
)

// oldOpen is the old process's open client connections as the new process
// counts them.
type oldOpen struct {
	clk   clock.Clock
	n     int64
	until time.Time // the last report's end of life
}

// reported takes a report: the old process holds n.
func (o *oldOpen) reported(n int64) { o.n, o.until = max(n, 0), o.clk.Now().Add(openLife) }

// reportTo takes a report and tells h the count.
func (o *oldOpen) reportTo(h FlowHolder, n int64) {
	o.reported(n)
	h.HeldElsewhere(o.now())
}

// adopted counts k connections of a batch the new process took: the last
// report counted them, the new process's own count does from now.
func (o *oldOpen) adopted(k int) { o.n = max(0, o.n-int64(k)) }

// gone forgets the count: the old process closed the socket (it exited).
func (o *oldOpen) gone() { o.n, o.until = 0, time.Time{} }

// now is the count to hold new clients to: 0 once the last report's life
// is over.
func (o *oldOpen) now() int64 {
	if !o.clk.Now().Before(o.until) {
		return 0
	}
	return o.n
}

// waitMS is how long a reader may wait for the next message before the
// count expires, in poll(2)'s milliseconds (-1: no count to expire).
func (o *oldOpen) waitMS() int {
	if o.now() == 0 {
		return -1
	}
	return int(o.until.Sub(o.clk.Now())/time.Millisecond) + 1
}

// sendOpen reports n, the client connections this process holds, to the
// new process.
func (c *flowsConn) sendOpen(ctx context.Context, n int64) error {
	data, err := json.Marshal(flowsMessage{Type: "open", Open: &n})
	if err != nil {
		return err
	}
	return c.sendData(ctx, data, nil)
}

// openReporter reports, every openEvery until stopped, what h holds to
// the new process, on the flows socket it then closes. Stopped by
// Upgrader.Exiting; it stops by itself when the new process is gone.
type openReporter struct {
	stop context.CancelFunc
	done chan struct{}
}

func startReporting(c *flowsConn, h FlowHolder, clk clock.Clock) *openReporter {
	ctx, stop := context.WithCancel(context.Background())
	r := &openReporter{stop: stop, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer c.close()
		for {
			t, tick := clk.NewTimer(openEvery)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-tick:
			}
			if c.sendOpen(ctx, h.Holding()) != nil {
				return
			}
		}
	}()
	return r
}

// end stops r and waits until its socket is closed; nil: nothing.
func (r *openReporter) end() {
	if r == nil {
		return
	}
	r.stop()
	<-r.done
}

// next waits for the next message on c, telling h the old process's count
// as it expires meanwhile.
func (c *flowsConn) next(h FlowHolder, count *oldOpen) ([]byte, []int, error) {
	for {
		for !c.readable(count.waitMS()) {
			h.HeldElsewhere(count.now())
		}
		data, fds, err := c.recv(unix.MSG_DONTWAIT) // readable: one is there, or the end
		if err != unix.EAGAIN {
			return data, fds, err
		}
	}
}
