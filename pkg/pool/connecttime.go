package pool

import (
	"sync/atomic"
	"time"
)

// ConnectBuckets are the upper bounds, in seconds, of the connect-time
// histogram (l4lb_backend_connect_seconds): from 100 µs, a connect on the
// same host or rack, to 5 s, past any sane connect_timeout's first SYN
// retransmit (1 s) and second (3 s).
var ConnectBuckets = [...]float64{
	0.0001, 0.00025, 0.0005,
	0.001, 0.0025, 0.005,
	0.01, 0.025, 0.05,
	0.1, 0.25, 0.5,
	1, 2.5, 5,
}

// connectBounds are ConnectBuckets in nanoseconds.
var connectBounds = func() (b [len(ConnectBuckets)]int64) {
	for i, s := range ConnectBuckets {
		b[i] = int64(s * float64(time.Second))
	}
	return b
}()

// connectTimes is a backend's histogram of successful connect times: a
// counter per bucket (the last one for times above every bound) and the
// sum, each a lone atomic, so every event loop adds to it without a lock.
type connectTimes struct {
	counts [len(ConnectBuckets) + 1]atomic.Uint64
	sumNs  atomic.Int64
}

// ObserveConnect records one client dial to b that connected after d
// (from connect(2) to the socket turning writable, on the dialing loop's
// clock).
func (b *Backend) ObserveConnect(d time.Duration) {
	ns := max(int64(d), 0)
	i := 0
	for i < len(connectBounds) && ns > connectBounds[i] {
		i++
	}
	b.connect.counts[i].Add(1)
	b.connect.sumNs.Add(ns)
}

// ConnectHistogram is a snapshot of a backend's connect times.
type ConnectHistogram struct {
	Count uint64
	Sum   time.Duration
	// Cumulative[i] counts the connects that took at most
	// ConnectBuckets[i] seconds.
	Cumulative [len(ConnectBuckets)]uint64
}

// ConnectTimes returns b's connect-time histogram. Read while dials go on,
// the sum may run a connect or two ahead of or behind the counts.
func (b *Backend) ConnectTimes() ConnectHistogram {
	var h ConnectHistogram
	var n uint64
	for i := range ConnectBuckets {
		n += b.connect.counts[i].Load()
		h.Cumulative[i] = n
	}
	h.Count = n + b.connect.counts[len(ConnectBuckets)].Load()
	h.Sum = time.Duration(b.connect.sumNs.Load())
	return h
}
