package main

import (
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

const idleDialers = 50

// idleScenario: the proxy holds N idle connections, each verified end to
// end with a 1-byte echo, on a fresh process (it runs before any other
// scenario). N comes from RLIMIT_NOFILE and the proxy's fds per connection.
type idleScenario struct{}

func (idleScenario) name() string { return "idle" }
func (idleScenario) metrics() []MetricDef {
	return []MetricDef{
		{Name: "n", Unit: "conns", Better: HigherBetter, NoRatio: true},
		{Name: "rss_kb_per_conn", Unit: "KB", Better: LowerBetter, Chart: true},
		{Name: "pss_kb_per_conn", Unit: "KB", Better: LowerBetter},
		{Name: "fds_per_conn", Unit: "fds", Better: LowerBetter},
		{Name: "slab_kb_per_conn", Unit: "KB", Better: LowerBetter},
		{Name: "kernel_kb_per_conn", Unit: "KB", Better: LowerBetter, Chart: true},
		{Name: "rss_mb_with_n", Unit: "MB", Better: LowerBetter},
	}
}

// rounds is 1: a second round would not measure a fresh process.
func (idleScenario) rounds(options) int   { return 1 }
func (idleScenario) applies(*system) bool { return true }

// finish: kernel memory the proxy adds = its slab per connection minus
// direct's (the client's and the backend's sockets).
func (idleScenario) finish(sr *ScenarioResult) {
	sr.subtractDirect("slab_kb_per_conn", "kernel_kb_per_conn")
	sr.Notes = append(sr.Notes, "idle runs once per system on freshly started processes; slab_kb_per_conn counts kernel slab objects in use (/proc/slabinfo), so caches grown by an earlier system do not favour later ones; kernel_kb_per_conn = slab_kb_per_conn minus direct's")
}

// idleTarget is N for system s under this run's limit.
func idleTarget(h *harness, s *system) int {
	fds := s.spec.fdsPerConn
	if fds == 0 {
		fds = 2 // direct: sized like a 2-fd proxy
	}
	return idleBudget(h.limit, fds, h.opts.idleCap)
}

func (idleScenario) run(h *harness, s *system) (map[string]float64, error) {
	n := idleTarget(h, s)
	if n == 0 {
		return nil, fmt.Errorf("RLIMIT_NOFILE %d leaves no room", h.limit)
	}
	h.logf("  idle     %s: holding N=%d connections (RLIMIT_NOFILE %d, %d fds/conn)", s.spec.name, n, h.limit, s.spec.fdsPerConn)
	pids := s.pids()
	rss0, pss0 := treeMemKB(pids)
	fd0 := treeFds(pids)
	slab0 := slabKB()

	conns := openIdle(s.addr(routeEcho), n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
		waitFdsDrop(s, fd0+16, 10*time.Second)
	}()
	got := len(conns)
	if got == 0 {
		return nil, fmt.Errorf("no idle connection could be verified")
	}
	time.Sleep(h.opts.idleSettle)
	pids = s.pids()
	rss1, pss1 := treeMemKB(pids)
	fd1 := treeFds(pids)
	slab1 := slabKB()

	out := map[string]float64{
		"n":                float64(got),
		"slab_kb_per_conn": (slab1 - slab0) / float64(got),
	}
	if isProxy(s) {
		out["rss_kb_per_conn"] = (rss1 - rss0) / float64(got)
		out["pss_kb_per_conn"] = (pss1 - pss0) / float64(got)
		out["fds_per_conn"] = float64(fd1-fd0) / float64(got)
		out["rss_mb_with_n"] = rss1 / 1024
	}
	var err error
	if got < n {
		err = fmt.Errorf("only %d of %d idle connections verified", got, n)
	}
	return out, err
}

// openIdle dials n connections with a 1-byte echo each and returns those
// that answered.
func openIdle(addr string, n int) []*net.TCPConn {
	var (
		mu    sync.Mutex
		conns = make([]*net.TCPConn, 0, n)
		next  atomic.Int64
		wg    sync.WaitGroup
	)
	for range idleDialers {
		wg.Go(func() {
			b := []byte{'i'}
			for next.Add(1) <= int64(n) {
				c, err := dialLoopback(addr)
				if err != nil {
					continue
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := c.Write(b); err != nil {
					c.Close()
					continue
				}
				if _, err := c.Read(b); err != nil {
					c.Close()
					continue
				}
				_ = c.SetDeadline(time.Time{})
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return conns
}

// waitFdsDrop polls until the proxy released the connections, bounded.
func waitFdsDrop(s *system, limit int, within time.Duration) {
	if !isProxy(s) {
		return
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) && treeFds(s.pids()) > limit {
		time.Sleep(100 * time.Millisecond)
	}
}
