package server

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// The DNS tests: dnsmasq servers on 127.0.53.N answering every name under
// testnet.DNSZone with 10.53.0.N (their tag), dig clients on 127.0.54.Y,
// l4lb in between with one UDP listener, `responses = 1` as for DNS.

// startDnsmasqs starts n dnsmasq servers; the test is leak-checked from
// here on.
func startDnsmasqs(t *testing.T, n int) []*testnet.Dnsmasq {
	t.Helper()
	testnet.NeedDNSTools(t)
	testnet.CheckLeaks(t)
	servers := make([]*testnet.Dnsmasq, n)
	for i := range servers {
		servers[i] = testnet.StartDnsmasq(t, fmt.Sprintf("127.0.53.%d", i+1), fmt.Sprintf("10.53.0.%d", i+1))
	}
	return servers
}

// dnsClient is the source address of client y.
func dnsClient(y int) string { return fmt.Sprintf("127.0.54.%d", y+1) }

// serverOf is the index of the server whose tag answer is, or -1.
func serverOf(servers []*testnet.Dnsmasq, answer string) int {
	for i, s := range servers {
		if s.Answer == answer {
			return i
		}
	}
	return -1
}

type dnsOpts struct {
	algorithm   string // "": round-robin
	retries     int
	failures    int // breaker failures that trip; 0: never trips
	cooldown    time.Duration
	maxCooldown time.Duration
	health      *config.Health // nil: no active checks
}

// startDNSLB is startUDPLB for DNS: the pool's backends are the servers,
// each with a fixed hashing ID (its tag), so where a hash puts a client
// does not depend on the servers' random ports, and the pool's health
// checks run when o.health says so. The listener ends a session at the
// first reply (responses = 1).
func startDNSLB(t *testing.T, servers []*testnet.Dnsmasq, o dnsOpts) *udpLB {
	t.Helper()
	addrs := make([]string, len(servers))
	for i, s := range servers {
		addrs[i] = s.Addr
	}
	return startUDPLB(t, addrs, udpOpts{
		algorithm: o.algorithm, retries: o.retries, failures: o.failures, cooldown: o.cooldown,
		sessionTimeout: 30 * time.Second, maxSessions: 1000, responses: 1,
		pool: func(pc *config.Pool) {
			for i, s := range servers {
				pc.Backends[i].ID = "dns-" + s.Answer
			}
			if o.maxCooldown > 0 {
				pc.Breaker.MaxCooldown = o.maxCooldown
			}
			if o.health != nil {
				pc.Health = *o.health
			}
		},
	})
}

// digLoad runs dig through lb on workers goroutines, client w from
// dnsClient(w), until stop is called, recording every answer and every
// query that got none.
type digLoad struct {
	servers   []*testnet.Dnsmasq
	mu        sync.Mutex
	answers   []int // by server
	marked    bool
	afterMark []int // answers by server since mark
	timeouts  int   // dig's own retries
	retried   []string
	errs      []error
	total     int
	stopc     chan struct{}
	once      sync.Once
	wg        sync.WaitGroup
}

func startDigLoad(t *testing.T, lb *udpLB, servers []*testnet.Dnsmasq, workers int) *digLoad {
	d := &digLoad{servers: servers, answers: make([]int, len(servers)), afterMark: make([]int, len(servers)), stopc: make(chan struct{})}
	for w := range workers {
		d.wg.Go(func() {
			for q := 0; ; q++ {
				select {
				case <-d.stopc:
					return
				default:
				}
				r, err := testnet.Dig(lb.addr, dnsClient(w), fmt.Sprintf("w%d-q%d.%s", w, q, testnet.DNSZone), 3)
				d.record(r, err)
			}
		})
	}
	t.Cleanup(d.stop)
	return d
}

func (d *digLoad) record(r testnet.DigResult, err error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.total++
	d.timeouts += r.Timeouts
	if r.Timeouts > 0 {
		d.retried = append(d.retried, fmt.Sprintf("%s (after mark: %v), answered by %q:\n%s", time.Now().Format("15:04:05.000"), d.marked, r.Answer, r.Output))
	}
	if err != nil {
		d.errs = append(d.errs, err)
		return
	}
	i := serverOf(d.servers, r.Answer)
	if i < 0 {
		d.errs = append(d.errs, fmt.Errorf("answer %q is no server's", r.Answer))
		return
	}
	d.answers[i]++
	if d.marked {
		d.afterMark[i]++
	}
}

// mark starts counting answers anew (sinceMark).
func (d *digLoad) mark() {
	d.mu.Lock()
	d.marked = true
	d.mu.Unlock()
}

// sinceMark is the answers from each server since mark, and their sum.
func (d *digLoad) sinceMark() ([]int, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range d.afterMark {
		n += k
	}
	return append([]int(nil), d.afterMark...), n
}

// byServer is the answers from each server in all.
func (d *digLoad) byServer() []int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]int(nil), d.answers...)
}

// answered is how many queries were answered in all.
func (d *digLoad) answered() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, k := range d.answers {
		n += k
	}
	return n
}

// stop ends the load and waits for its digs.
func (d *digLoad) stop() {
	d.once.Do(func() { close(d.stopc) })
	d.wg.Wait()
}

// check fails t for every query that got no answer, and logs the totals.
func (d *digLoad) check(t *testing.T) {
	t.Helper()
	d.stop()
	t.Logf("%d digs: answers by server %v; %d of dig's tries timed out (retried by dig)", d.total, d.answers, d.timeouts)
	for _, r := range d.retried {
		t.Logf("a dig retried: %s", r)
	}
	for _, err := range d.errs {
		t.Errorf("a query got no answer through l4lb: %v", err)
	}
	if len(d.errs) > 0 {
		for _, s := range d.servers {
			t.Logf("dnsmasq %s on %s (queries logged):\n%s", s.Answer, s.Addr, s.Log())
		}
	}
}

// logFront logs the listener's session and drop counters.
func logFront(t *testing.T, f *udpsession.Front) {
	t.Helper()
	ends := map[string]int64{}
	for e := range udpsession.NumSessionEnds {
		if n := f.Ended[e].Load(); n != 0 {
			ends[e.String()] = n
		}
	}
	drops := map[string]int64{}
	for r := range udpsession.NumDropReasons {
		if n := f.Drops[r].Load(); n != 0 {
			drops[r.String()] = n
		}
	}
	t.Logf("listener: %d sessions started, %d open, ended %v, %d first datagrams unanswered, dropped %v; datagrams to backends %d, to clients %d",
		f.Started.Load(), f.Sessions.Load(), ends, f.Unanswered.Load(), drops, f.DatagramsToBackend.Load(), f.DatagramsToClient.Load())
}
