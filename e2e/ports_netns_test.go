package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Ephemeral ports toward a backend on a real network (issue 15), and who
// closes first.
//
// l4lb's namespace (the test's own, testnet.RunInNetns) and a peer
// namespace of the backend's are joined by a veth pair: l4lb's side has
// 10.77.0.1/24 and 10.77.0.3/24, the backend's 10.77.0.2/24. The backend
// is an echo server listening inside the peer namespace; it closes its
// side only once it has read the end of the stream (EOF), the way a
// request/response server does when its client is done. l4lb's namespace
// gets a narrow ip_local_port_range (portsRangeLo..portsRangeHi, 100 ports)
// and tcp_tw_reuse = 0, so a port that held a connection toward the
// backend stays taken for TIME_WAIT's 60 seconds.
//
// Clients connect to l4lb on 127.0.0.1 in its namespace, each from a
// source port of its own outside the narrowed range (so the clients' own
// TIME_WAIT, which is theirs and on their host in real life, never
// competes for it), send a line, read it echoed and close: the client
// closes first. l4lb passes the FIN on to the backend (shutdown(SHUT_WR)),
// so l4lb's backend-side socket sends the first FIN on that connection and
// is the one left in TIME_WAIT; the backend, closing second, is not.
//
// Four listeners, four pools, one backend process (a port each, so one
// phase's TIME_WAIT does not touch the next one's 4-tuples):
//
//   - "plain" (no source): a burst of portsPlainConns connections, more
//     than the range holds. l4lb serves what the range allows, then finds
//     no port: l4lb_pool_ports_exhausted_total counts it, the client is
//     closed as local_error, no client dial fails, the breaker does not
//     trip, health checks (which meet the same shortage) stay up.
//   - "sourced" (source = the two addresses): a burst of
//     portsSourcedConns, more than one address's range and less than two:
//     every client served, nothing exhausted.
//   - "backfirst": the other close order. This backend port greets and
//     closes at once; the client reads to the end and closes second. The
//     TIME_WAIT moves to l4lb's client side (the listener's port, no
//     ephemeral port held) and to the backend; l4lb's backend side has
//     none.
//   - "twoback" (no source, round-robin over two backend ports A and B,
//     retries = 2): ports run out per destination. The test itself
//     first takes every port of the range toward A (its own connections,
//     closed first, left in TIME_WAIT: anything else on the host talking
//     to A would do the same), then runs portsTwoConns clients: those
//     whose first candidate is A find no port (counted in
//     l4lb_pool_ports_exhausted_total) and move on to B; every client is
//     served, none refused as local_error, no backend blamed. Then the
//     test takes what is left toward B too, and portsTwoOutConns clients
//     are refused as local_error (both candidates out, two exhausted
//     dials each), which l4lb's log says in a rate-limited warn line for
//     the listener.
//
// TIME_WAIT is counted on each side with ss after each phase.

const portsNetnsEnv = "L4LB_TEST_PORTS_NETNS_CHILD"

func TestSourcePortsOverVeth(t *testing.T) {
	testnet.NeedNetns(t, "ss")
	testnet.RunInNetns(t, portsNetnsEnv, "TestSourcePortsOverVethInNamespace", 3*time.Minute)
	// The child deletes its peer namespace; one that died before it could
	// leaves the namespace's file in /run/netns (the mount itself was in
	// the child's mount namespace and went with it).
	prefix := fmt.Sprintf("l4lbt-peer-%d-", os.Getpid())
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out, err := exec.Command("ip", "netns", "del", e.Name()).CombinedOutput()
			t.Errorf("the child left its peer namespace %s behind; deleted (%v) %s", e.Name(), err, out)
		}
	}
}

const (
	portsRangeLo, portsRangeHi = 61000, 61099 // the narrowed ip_local_port_range: 100 ports
	portsPlainConns            = 400          // > the range: exhausts it
	portsSourcedConns          = 180          // > one source's range, < two
	portsWorkers               = 16           // client connections at once
	portsBurstCap              = 60 * time.Second

	portsLBAddr   = "10.77.0.1" // l4lb's side of the veth (the kernel's choice of source)
	portsLBAddr2  = "10.77.0.3" // the second source address
	portsBackIP   = "10.77.0.2" // the backend's side
	portsPlainBE  = portsBackIP + ":8001"
	portsSrcBE    = portsBackIP + ":8002"
	portsAdmin    = "127.0.0.1:7100"
	portsPlainLn  = "127.0.0.1:7101"
	portsSrcLn    = "127.0.0.1:7102"
	portsFirstLn  = "127.0.0.1:7103"
	portsFirstBE  = portsBackIP + ":8003" // greets and closes first
	portsFirstN   = 50
	portsHealthIv = 300 * time.Millisecond // the plain pool's health interval

	portsTwoLn       = "127.0.0.1:7104"
	portsTwoA        = portsBackIP + ":8004" // the test takes every port toward it first
	portsTwoB        = portsBackIP + ":8005"
	portsTwoConns    = 60 // through twoback with only A out of ports: all served
	portsTwoOutConns = 20 // through twoback with A and B out: all refused

	// First client source ports by purpose, all below the narrowed range
	// and never used twice in one namespace.
	portsPlainFrom, portsSrcFrom, portsReadyFrom, portsAdminFrom, portsVethFrom, portsFirstFrom = 20000, 21000, 22000, 30000, 23000, 24000
	portsTwoFrom, portsTwoOutFrom                                                               = 25000, 26000
)

func TestSourcePortsOverVethInNamespace(t *testing.T) {
	if os.Getenv(portsNetnsEnv) == "" {
		t.Skip("run by TestSourcePortsOverVeth inside its network namespace")
	}
	// The sysctls below are per network namespace: never write them in
	// the parent test's (the host's). ip netns exec ran this process in
	// place of itself, so its parent is that test.
	own, err1 := os.Readlink("/proc/self/ns/net")
	parent, err2 := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", os.Getppid()))
	if err1 != nil || err2 != nil || own == parent {
		t.Fatalf("not in a network namespace of the test's own (self %s %v, parent %s %v): refusing to change sysctls", own, err1, parent, err2)
	}
	testnet.CheckLeaks(t)

	portsSysctl(t, "net/ipv4/ip_local_port_range", fmt.Sprintf("%d %d", portsRangeLo, portsRangeHi))
	portsSysctl(t, "net/ipv4/tcp_tw_reuse", "0")
	t.Logf("l4lb's namespace: ip_local_port_range %s, tcp_tw_reuse %s, tcp_max_tw_buckets %s, tcp_timestamps %s",
		portsReadSysctl(t, "net/ipv4/ip_local_port_range"), portsReadSysctl(t, "net/ipv4/tcp_tw_reuse"),
		portsReadSysctl(t, "net/ipv4/tcp_max_tw_buckets"), portsReadSysctl(t, "net/ipv4/tcp_timestamps"))

	peer := portsPeerNetns(t)
	echo := portsStartEcho(t, peer, portsPlainBE, portsSrcBE, portsFirstBE, portsTwoA, portsTwoB)
	portsWaitVeth(t)

	dir := t.TempDir()
	path := filepath.Join(dir, "l4lb.toml")
	if err := os.WriteFile(path, []byte(portsConfig()), 0o644); err != nil {
		t.Fatal(err)
	}
	lb := startL4LB(t, "", &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}, "-config", path)
	adm := newPortsAdminClient(portsAdmin, portsAdminFrom)
	t.Cleanup(adm.close)
	ready := portsReadyFrom
	for _, ln := range []string{portsPlainLn, portsSrcLn} {
		testnet.Eventually(t, "l4lb to serve on "+ln, func() bool {
			select {
			case err := <-lb.done:
				lb.done <- err
				t.Fatalf("l4lb exited early: %v\n%s", err, lb.stderr.String())
			default:
			}
			ready++
			return portsEchoOnce(ln, ready, "ready") == portsServed
		})
	}
	portsWaitIdle(t, adm, echo)

	// Phase 1: no source; the burst outgrows the range.
	m0 := adm.mustScrape(t)
	tw0 := portsCountTimeWait(t, "")
	plain := portsBurst(portsPlainLn, portsPlainConns, portsPlainFrom)
	portsWaitIdle(t, adm, echo)
	m1 := adm.mustScrape(t)
	tw1 := portsCountTimeWait(t, "")
	twPeer1 := portsCountTimeWait(t, peer)
	plain.log(t, "plain (no source)")

	d := func(m1, m0 portsMetrics, name string, kv ...string) float64 {
		return m1.get(name, kv...) - m0.get(name, kv...)
	}
	exhausted := d(m1, m0, "l4lb_pool_ports_exhausted_total", "pool", "plain")
	localErr := d(m1, m0, "l4lb_client_connections_closed_total", "listener", "plain", "reason", "local_error")
	completed := d(m1, m0, "l4lb_client_connections_closed_total", "listener", "plain", "reason", "completed")
	noBackend := d(m1, m0, "l4lb_client_connections_closed_total", "listener", "plain", "reason", "no_backend")
	rejected := d(m1, m0, "l4lb_client_connections_total", "listener", "plain", "result", "rejected")
	failedClients := d(m1, m0, "l4lb_client_connections_total", "listener", "plain", "result", "failed")
	dialOK := d(m1, m0, "l4lb_backend_dials_total", "backend", portsPlainBE, "kind", "client", "pool", "plain", "result", "success")
	dialFail := d(m1, m0, "l4lb_backend_dials_total", "backend", portsPlainBE, "kind", "client", "pool", "plain", "result", "failure")
	trips := m1.get("l4lb_breaker_trips_total", "backend", portsPlainBE, "pool", "plain")
	t.Logf("plain: l4lb counted exhausted %v, closed local_error %v, completed %v, no_backend %v; clients rejected %v, failed %v; client dials success %v, failure %v; breaker trips %v",
		exhausted, localErr, completed, noBackend, rejected, failedClients, dialOK, dialFail, trips)
	twPlain := tw1.sub(tw0)
	t.Logf("plain: new TIME_WAIT in l4lb's namespace: %s; in the backend's namespace: %d", twPlain, twPeer1.total)

	if plain.failed != 0 {
		t.Errorf("plain: %d clients failed other than by being refused (first: %v)", plain.failed, plain.failures)
	}
	if exhausted == 0 || localErr == 0 || plain.refused == 0 {
		t.Errorf("plain: %d connections through a %d-port range toward one backend: want ports exhausted (got %v), local_error closes (%v) and refused clients (%d)",
			portsPlainConns, portsRangeHi-portsRangeLo+1, exhausted, localErr, plain.refused)
	}
	if plain.served == 0 || float64(plain.served) != completed || float64(plain.served) != dialOK {
		t.Errorf("plain: %d clients served, l4lb completed %v, client dials succeeded %v: want the same, and more than none", plain.served, completed, dialOK)
	}
	if float64(plain.refused) != localErr || localErr != exhausted || rejected != localErr {
		t.Errorf("plain: %d clients refused; l4lb: local_error %v, exhausted %v, rejected %v: want all four equal (every refusal a dial without a port)",
			plain.refused, localErr, exhausted, rejected)
	}
	if dialFail != 0 || trips != 0 || noBackend != 0 || failedClients != 0 {
		t.Errorf("plain: the backend was blamed for this host's shortage: client dial failures %v, breaker trips %v, no_backend %v, failed clients %v",
			dialFail, trips, noBackend, failedClients)
	}
	if v := m1.get("l4lb_breaker_open", "backend", portsPlainBE, "pool", "plain"); v != 0 {
		t.Errorf("plain: breaker open (%v) after ports ran out", v)
	}
	if twPeer1.total != 0 {
		t.Errorf("plain: %d connections in TIME_WAIT in the backend's namespace, want none: the backend closes second", twPeer1.total)
	}
	if twPlain.backend[portsPlainBE] < int(plain.served) {
		t.Errorf("plain: %d of l4lb's backend-side sockets in TIME_WAIT toward %s, want at least one per client served (%d): l4lb closes first there",
			twPlain.backend[portsPlainBE], portsPlainBE, plain.served)
	}

	// Health checks meet the same shortage: inconclusive, never failed.
	// The sleeps are deliberate: checks in flight from before settle,
	// then a window in which no check may succeed or fail. A loaded
	// machine runs fewer checks in it, which cannot fail the assertion.
	time.Sleep(2 * portsHealthIv)
	h0 := adm.mustScrape(t)
	time.Sleep(6 * portsHealthIv)
	h1 := adm.mustScrape(t)
	hOK := d(h1, h0, "l4lb_backend_dials_total", "backend", portsPlainBE, "kind", "health", "pool", "plain", "result", "success")
	hFail := h1.get("l4lb_backend_dials_total", "backend", portsPlainBE, "kind", "health", "pool", "plain", "result", "failure")
	up := h1.get("l4lb_backend_up", "backend", portsPlainBE, "pool", "plain")
	healthUp := h1.get("l4lb_health_up", "backend", portsPlainBE, "pool", "plain")
	t.Logf("plain: over %v of exhausted ports (health every %v): health checks succeeded %v, failed %v in all; health_up %v, backend_up %v",
		6*portsHealthIv, portsHealthIv, hOK, hFail, healthUp, up)
	if hOK != 0 || hFail != 0 || up != 1 || healthUp != 1 {
		t.Errorf("plain: health checks while no port was left: succeeded %v, failed %v, health_up %v, backend_up %v; want inconclusive checks (neither) and the backend up",
			hOK, hFail, healthUp, up)
	}

	// Phase 2: two sources; the burst fits their two ranges.
	tw2 := portsCountTimeWait(t, "")
	sourced := portsBurst(portsSrcLn, portsSourcedConns, portsSrcFrom)
	portsWaitIdle(t, adm, echo)
	m3 := adm.mustScrape(t)
	tw3 := portsCountTimeWait(t, "")
	twPeer3 := portsCountTimeWait(t, peer)
	sourced.log(t, "sourced (two source addresses)")
	sExhausted := m3.get("l4lb_pool_ports_exhausted_total", "pool", "sourced")
	sLocalErr := m3.get("l4lb_client_connections_closed_total", "listener", "sourced", "reason", "local_error")
	sCompleted := d(m3, h1, "l4lb_client_connections_closed_total", "listener", "sourced", "reason", "completed")
	sDialFail := m3.get("l4lb_backend_dials_total", "backend", portsSrcBE, "kind", "client", "pool", "sourced", "result", "failure")
	sTrips := m3.get("l4lb_breaker_trips_total", "backend", portsSrcBE, "pool", "sourced")
	twSrc := tw3.sub(tw2)
	t.Logf("sourced: l4lb counted exhausted %v, local_error %v, completed %v, client dial failures %v, breaker trips %v", sExhausted, sLocalErr, sCompleted, sDialFail, sTrips)
	t.Logf("sourced: new TIME_WAIT in l4lb's namespace: %s; in the backend's namespace: %d", twSrc, twPeer3.total)
	if sourced.served != portsSourcedConns || sExhausted != 0 || sLocalErr != 0 || sDialFail != 0 || sTrips != 0 || sCompleted != portsSourcedConns {
		t.Errorf("sourced: %d of %d served (refused %d, failed %d: %v); exhausted %v, local_error %v, completed %v, dial failures %v, trips %v: want all served, nothing else",
			sourced.served, portsSourcedConns, sourced.refused, sourced.failed, sourced.failures, sExhausted, sLocalErr, sCompleted, sDialFail, sTrips)
	}
	from1, from2 := twSrc.bySource[portsSrcBE][portsLBAddr], twSrc.bySource[portsSrcBE][portsLBAddr2]
	if from1 == 0 || from2 == 0 || from1+from2 <= portsRangeHi-portsRangeLo+1 {
		t.Errorf("sourced: l4lb's TIME_WAIT toward %s from %s: %d, from %s: %d; want both sources used, more than one range's worth together",
			portsSrcBE, portsLBAddr, from1, portsLBAddr2, from2)
	}
	if twPeer3.total != 0 {
		t.Errorf("sourced: %d connections in TIME_WAIT in the backend's namespace, want none", twPeer3.total)
	}

	// Phase 3: the backend closes first.
	tw4 := portsCountTimeWait(t, "")
	greeted := 0
	for i := range portsFirstN {
		if err := portsReadToEnd(portsFirstLn, portsFirstFrom+i); err != nil {
			t.Errorf("backfirst: client %d: %v", i, err)
			continue
		}
		greeted++
	}
	portsWaitIdle(t, adm, echo)
	tw5 := portsCountTimeWait(t, "")
	twPeer5 := portsCountTimeWait(t, peer)
	twFirst := tw5.sub(tw4)
	t.Logf("backfirst: %d of %d clients greeted; new TIME_WAIT in l4lb's namespace: %s; in the backend's namespace, toward l4lb: %d (was %d)",
		greeted, portsFirstN, twFirst, twPeer5.total, twPeer3.total)
	if twFirst.backend[portsFirstBE] != 0 || twFirst.lbClient < greeted || twPeer5.total == 0 {
		t.Errorf("backfirst: TIME_WAIT on l4lb's backend side %d (want 0), on l4lb's client side %d (want one per client, %d), in the backend's namespace %d (want some)",
			twFirst.backend[portsFirstBE], twFirst.lbClient, greeted, twPeer5.total)
	}

	// Phase 4: two backends, no source. Ports run out per destination:
	// with every port toward A taken, a client whose first candidate is A
	// moves on to B; with B's taken too, clients are refused.
	tw6 := portsCountTimeWait(t, "")
	outStart := time.Now() // the TIME_WAIT taken here ends 60 s on: the phase must end well before
	heldA := portsTakeAllPorts(t, portsTwoA)
	portsWaitIdle(t, adm, echo)
	tw7 := portsCountTimeWait(t, "")
	twA := tw7.sub(tw6)
	t.Logf("twoback: the test took %d ports toward %s before connect found none (EADDRNOTAVAIL); new TIME_WAIT in l4lb's namespace (the test's own toward A): %s",
		heldA, portsTwoA, twA)
	if heldA != portsRangeHi-portsRangeLo+1 || twA.backend[portsTwoA] != heldA {
		t.Errorf("twoback: the test took %d ports toward %s, %d of them in TIME_WAIT; want the whole range (%d), all in TIME_WAIT",
			heldA, portsTwoA, twA.backend[portsTwoA], portsRangeHi-portsRangeLo+1)
	}
	twoWarn := func() (lines int, refused int) { return portsLocalTroubleLogged(lb.stderr.String(), "twoback") }

	m6 := adm.mustScrape(t)
	two := portsBurst(portsTwoLn, portsTwoConns, portsTwoFrom)
	portsWaitIdle(t, adm, echo)
	m7 := adm.mustScrape(t)
	tw8 := portsCountTimeWait(t, "")
	two.log(t, "twoback (no port left toward A)")
	twoCounts := func(m1, m0 portsMetrics) (exh, localErr, completed, noBackend, rejected, failed, okA, okB, failA, failB float64) {
		dial := func(be, result string) float64 {
			return d(m1, m0, "l4lb_backend_dials_total", "backend", be, "kind", "client", "pool", "twoback", "result", result)
		}
		closed := func(reason string) float64 {
			return d(m1, m0, "l4lb_client_connections_closed_total", "listener", "twoback", "reason", reason)
		}
		return d(m1, m0, "l4lb_pool_ports_exhausted_total", "pool", "twoback"), closed("local_error"), closed("completed"), closed("no_backend"),
			d(m1, m0, "l4lb_client_connections_total", "listener", "twoback", "result", "rejected"),
			d(m1, m0, "l4lb_client_connections_total", "listener", "twoback", "result", "failed"),
			dial(portsTwoA, "success"), dial(portsTwoB, "success"), dial(portsTwoA, "failure"), dial(portsTwoB, "failure")
	}
	twoBlamed := func(m portsMetrics) (trips, open float64) {
		for _, be := range []string{portsTwoA, portsTwoB} {
			trips += m.get("l4lb_breaker_trips_total", "backend", be, "pool", "twoback")
			open += m.get("l4lb_breaker_open", "backend", be, "pool", "twoback")
		}
		return trips, open
	}
	tExh, tLocalErr, tCompleted, tNoBackend, tRejected, tFailed, tOKA, tOKB, tFailA, tFailB := twoCounts(m7, m6)
	tTrips, tOpen := twoBlamed(m7)
	twTwo := tw8.sub(tw7)
	t.Logf("twoback: l4lb counted exhausted %v (clients whose first candidate was A), closed local_error %v, completed %v, no_backend %v; clients rejected %v, failed %v; client dials to A success %v failure %v, to B success %v failure %v; breaker trips %v, open %v",
		tExh, tLocalErr, tCompleted, tNoBackend, tRejected, tFailed, tOKA, tFailA, tOKB, tFailB, tTrips, tOpen)
	t.Logf("twoback: new TIME_WAIT in l4lb's namespace: %s", twTwo)
	if two.served != portsTwoConns || two.refused != 0 || two.failed != 0 {
		t.Errorf("twoback: with ports toward A only out, %d of %d clients served, %d refused, %d failed (first: %v); want every one served through B",
			two.served, portsTwoConns, two.refused, two.failed, two.failures)
	}
	if tExh == 0 || tExh > portsTwoConns {
		t.Errorf("twoback: exhausted rose by %v over %d clients round-robin over A and B; want more than none (the clients sent to A first), at most one a client",
			tExh, portsTwoConns)
	}
	if tOKA != 0 || tOKB != portsTwoConns || tCompleted != portsTwoConns {
		t.Errorf("twoback: client dials succeeded to A %v (want 0: no port), to B %v, completed %v (want %d each)", tOKA, tOKB, tCompleted, portsTwoConns)
	}
	if tLocalErr != 0 || tRejected != 0 || tNoBackend != 0 || tFailed != 0 {
		t.Errorf("twoback: with B's ports left, local_error %v, rejected %v, no_backend %v, failed clients %v; want none: A out of ports gives way to B",
			tLocalErr, tRejected, tNoBackend, tFailed)
	}
	if tFailA != 0 || tFailB != 0 || tTrips != 0 || tOpen != 0 {
		t.Errorf("twoback: a backend was blamed for this host's shortage: client dial failures to A %v, to B %v, breaker trips %v, open %v",
			tFailA, tFailB, tTrips, tOpen)
	}
	if twTwo.backend[portsTwoB] != portsTwoConns || twTwo.backend[portsTwoA] != 0 {
		t.Errorf("twoback: new TIME_WAIT toward B %d (want one per client, %d), toward A %d (want none: no port)",
			twTwo.backend[portsTwoB], portsTwoConns, twTwo.backend[portsTwoA])
	}
	warnLines0, warnRefused0 := twoWarn()
	if warnLines0 != 0 {
		t.Errorf("twoback: %d warn lines of clients refused for local trouble (%d clients) while none was refused", warnLines0, warnRefused0)
	}

	// Both out: the test takes what is left toward B.
	heldB := portsTakeAllPorts(t, portsTwoB)
	portsWaitIdle(t, adm, echo)
	tw9 := portsCountTimeWait(t, "")
	t.Logf("twoback: the test took the %d ports left toward %s; TIME_WAIT toward A %d, toward B %d (l4lb's %d, the test's %d)",
		heldB, portsTwoB, tw9.backend[portsTwoA], tw9.backend[portsTwoB], twTwo.backend[portsTwoB], heldB)
	if heldB+twTwo.backend[portsTwoB] != portsRangeHi-portsRangeLo+1 {
		t.Errorf("twoback: the test took %d ports toward B after l4lb's %d; want the range's %d together",
			heldB, twTwo.backend[portsTwoB], portsRangeHi-portsRangeLo+1)
	}
	// Now and then a connection ends without its TIME_WAIT and frees its
	// port (seen about one run in ten under load, with 99 toward B here):
	// take any such port again, so that none is left when the clients come.
	if strayA, strayB := portsTakeAllPorts(t, portsTwoA), portsTakeAllPorts(t, portsTwoB); strayA+strayB > 0 {
		t.Logf("twoback: took %d stray ports toward A and %d toward B again", strayA, strayB)
	}
	m8 := adm.mustScrape(t)
	out := portsBurst(portsTwoLn, portsTwoOutConns, portsTwoOutFrom)
	portsWaitIdle(t, adm, echo)
	m9 := adm.mustScrape(t)
	window := time.Since(outStart)
	out.log(t, "twoback (no port left toward A or B)")
	oExh, oLocalErr, oCompleted, oNoBackend, oRejected, oFailed, oOKA, oOKB, oFailA, oFailB := twoCounts(m9, m8)
	oTrips, oOpen := twoBlamed(m9)
	t.Logf("twoback, both out: l4lb counted exhausted %v, closed local_error %v, completed %v, no_backend %v; clients rejected %v, failed %v; client dials to A success %v failure %v, to B success %v failure %v; breaker trips %v, open %v; %v since the test took A's ports",
		oExh, oLocalErr, oCompleted, oNoBackend, oRejected, oFailed, oOKA, oFailA, oOKB, oFailB, oTrips, oOpen, window.Round(time.Millisecond))
	if window > 50*time.Second {
		t.Errorf("twoback: %v from taking A's ports to the last client: TIME_WAIT (60 s) may have given ports back within the phase", window)
	}
	if out.refused != portsTwoOutConns || out.served != 0 || out.failed != 0 {
		t.Errorf("twoback: with no port toward A or B, %d of %d clients refused, %d served, %d failed (first: %v); want every one refused",
			out.refused, portsTwoOutConns, out.served, out.failed, out.failures)
	}
	if oLocalErr != portsTwoOutConns || oRejected != portsTwoOutConns || oExh != 2*portsTwoOutConns {
		t.Errorf("twoback: %d clients refused; l4lb: local_error %v, rejected %v (want %d each), exhausted %v (want %d: both candidates tried, both out)",
			out.refused, oLocalErr, oRejected, portsTwoOutConns, oExh, 2*portsTwoOutConns)
	}
	if oNoBackend != 0 || oFailed != 0 || oCompleted != 0 || oOKA+oOKB != 0 || oFailA+oFailB != 0 || oTrips != 0 || oOpen != 0 {
		t.Errorf("twoback: both out of ports, no_backend %v, failed clients %v, completed %v, client dials succeeded %v, failed %v, breaker trips %v, open %v; want none: local trouble, no backend blamed",
			oNoBackend, oFailed, oCompleted, oOKA+oOKB, oFailA+oFailB, oTrips, oOpen)
	}
	// The first refusal is logged at once, the rest at the end of its
	// second, with their count.
	var warnLines, warnRefused int
	testnet.Eventually(t, "l4lb to log the twoback clients refused for local trouble", func() bool {
		warnLines, warnRefused = twoWarn()
		warnLines, warnRefused = warnLines-warnLines0, warnRefused-warnRefused0
		return warnRefused >= portsTwoOutConns
	})
	t.Logf("twoback: l4lb logged %d warn lines of clients refused for local trouble on twoback, %d clients in all", warnLines, warnRefused)
	if warnRefused != portsTwoOutConns {
		t.Errorf("twoback: l4lb's warn lines count %d clients refused for local trouble, want %d", warnRefused, portsTwoOutConns)
	}

	t.Logf("summary: range %d ports, tcp_tw_reuse 0; plain: %d conns at %.0f/s, %d served, %d refused (exhausted %v), 0 blamed; sourced: %d conns at %.0f/s, %d served, exhausted %v; twoback with A out: %d of %d served (exhausted %v, local_error %v), with A and B out: %d of %d refused (exhausted %v, local_error %v, %d in warn lines); TIME_WAIT at the end: l4lb's namespace %s, backend's %d",
		portsRangeHi-portsRangeLo+1, portsPlainConns, plain.rate(), plain.served, plain.refused, exhausted,
		portsSourcedConns, sourced.rate(), sourced.served, sExhausted,
		two.served, portsTwoConns, tExh, tLocalErr, out.refused, portsTwoOutConns, oExh, oLocalErr, warnRefused, tw9, twPeer5.total)
	if n := portsNotable(lb.stderr.String()); len(n) > 0 {
		t.Logf("l4lb's warnings and errors:\n%s", strings.Join(n, "\n"))
	} else {
		t.Logf("l4lb logged no warning or error")
	}
}

// portsConfig: the plain pool dials with the kernel's choice of source,
// the sourced pool from both of l4lb's addresses. The plain pool's health
// checks run often, so they meet the shortage too; the sourced pool's run
// at the default interval (they dial from its first source and use a few
// of its ports). The backfirst pool has none: a connect check closes
// first, which would blur who closed first there. Nor has the twoback
// pool: its checks would take ports toward A and B at times of their own,
// and one's TIME_WAIT ending mid-phase would give a port back.
func portsConfig() string {
	return fmt.Sprintf(`[admin]
listen = %q
[log]
level = "info"
[[listener]]
name = "plain"
bind = %q
pool = "plain"
[[listener]]
name = "sourced"
bind = %q
pool = "sourced"
[pool.plain]
algorithm = "round-robin"
[pool.plain.health]
interval = %q
timeout = "250ms"
fall = 2
[[pool.plain.backend]]
addr = %q
[pool.sourced]
algorithm = "round-robin"
source = [%q, %q]
[[pool.sourced.backend]]
addr = %q
[[listener]]
name = "backfirst"
bind = %q
pool = "backfirst"
[pool.backfirst]
algorithm = "round-robin"
[pool.backfirst.health]
enabled = false
[[pool.backfirst.backend]]
addr = %q
[[listener]]
name = "twoback"
bind = %q
pool = "twoback"
[pool.twoback]
algorithm = "round-robin"
retries = 2
[pool.twoback.health]
enabled = false
[[pool.twoback.backend]]
addr = %q
[[pool.twoback.backend]]
addr = %q
`, portsAdmin, portsPlainLn, portsSrcLn, portsHealthIv.String(), portsPlainBE, portsLBAddr, portsLBAddr2, portsSrcBE, portsFirstLn, portsFirstBE,
		portsTwoLn, portsTwoA, portsTwoB)
}

// portsSysctl writes a sysctl of the current network namespace.
func portsSysctl(t *testing.T, key, value string) {
	t.Helper()
	if err := os.WriteFile("/proc/sys/"+key, []byte(value), 0o644); err != nil {
		t.Fatalf("sysctl %s = %s: %v", key, value, err)
	}
	if got := portsReadSysctl(t, key); strings.Join(strings.Fields(got), " ") != value {
		t.Fatalf("sysctl %s reads %q after writing %q", key, got, value)
	}
}

func portsReadSysctl(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/" + key)
	if err != nil {
		return "?"
	}
	return strings.Join(strings.Fields(string(b)), " ")
}

func portsRun(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// portsPeerNetns makes the backend's namespace, joined to this one by a
// veth pair, and deletes it (and with it the pair) when the test ends.
func portsPeerNetns(t *testing.T) string {
	t.Helper()
	ns := fmt.Sprintf("l4lbt-peer-%d-%d", os.Getppid(), os.Getpid())
	portsRun(t, "ip", "netns", "add", ns)
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v\n%s", ns, err, out)
		}
	})
	portsRun(t, "ip", "link", "add", "l4lbv0", "type", "veth", "peer", "name", "l4lbv1", "netns", ns)
	portsRun(t, "ip", "addr", "add", portsLBAddr+"/24", "dev", "l4lbv0")
	portsRun(t, "ip", "addr", "add", portsLBAddr2+"/24", "dev", "l4lbv0")
	portsRun(t, "ip", "link", "set", "l4lbv0", "up")
	portsRun(t, "ip", "-n", ns, "link", "set", "lo", "up")
	portsRun(t, "ip", "-n", ns, "addr", "add", portsBackIP+"/24", "dev", "l4lbv1")
	portsRun(t, "ip", "-n", ns, "link", "set", "l4lbv1", "up")
	return ns
}

// portsWaitVeth waits until both backend ports answer across the veth
// (from source ports outside the narrowed range).
func portsWaitVeth(t *testing.T) {
	t.Helper()
	port := portsVethFrom
	for _, be := range []string{portsPlainBE, portsSrcBE, portsFirstBE, portsTwoA, portsTwoB} {
		testnet.Eventually(t, "the backend "+be+" across the veth", func() bool {
			port++
			d := net.Dialer{Timeout: time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(portsLBAddr), Port: port}}
			c, err := d.Dial("tcp", be)
			if err != nil {
				return false
			}
			c.Close()
			return true
		})
	}
}

// portsEcho echoes every connection until it reads the end of the stream,
// then closes it: it never closes first. Its listeners live in the peer
// namespace.
type portsEcho struct {
	lns    []net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	wg     sync.WaitGroup
	active atomic.Int64
}

func portsStartEcho(t *testing.T, ns string, addrs ...string) *portsEcho {
	t.Helper()
	lns, err := portsListenIn(ns, addrs)
	if err != nil {
		t.Fatalf("listening in %s: %v", ns, err)
	}
	e := &portsEcho{lns: lns, conns: map[net.Conn]struct{}{}}
	for _, ln := range lns {
		e.wg.Add(1)
		go e.accept(ln, ln.Addr().String() == portsFirstBE)
	}
	t.Cleanup(func() {
		for _, ln := range e.lns {
			ln.Close()
		}
		e.mu.Lock()
		for c := range e.conns {
			c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

// portsListenIn opens listeners inside network namespace ns: on an OS
// thread of its own moved there and back (setns). A socket belongs to the
// namespace it was made in, whichever thread uses it later.
func portsListenIn(ns string, addrs []string) ([]net.Listener, error) {
	type result struct {
		lns []net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		r := result{}
		defer func() { ch <- r }()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			r.err = err
			return
		}
		defer self.Close()
		target, err := os.Open("/run/netns/" + ns)
		if err != nil {
			runtime.UnlockOSThread()
			r.err = err
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			r.err = fmt.Errorf("setns: %w", err)
			return
		}
		for _, a := range addrs {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				r.err = err
				break
			}
			r.lns = append(r.lns, ln)
		}
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// Left locked: the thread ends with this goroutine instead
			// of running others in the wrong namespace.
			r.err = errors.Join(r.err, fmt.Errorf("setns back: %w", err))
		} else {
			runtime.UnlockOSThread()
		}
		if r.err != nil {
			for _, ln := range r.lns {
				ln.Close()
			}
			r.lns = nil
		}
	}()
	r := <-ch
	return r.lns, r.err
}

// accept serves ln's connections; first: greet and close at once
// instead of echoing.
func (e *portsEcho) accept(ln net.Listener, first bool) {
	defer e.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.active.Add(1)
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			buf := make([]byte, 4096)
			if first {
				io.WriteString(c, "hello\n")
			}
			for !first {
				n, err := c.Read(buf)
				if n > 0 {
					if _, werr := c.Write(buf[:n]); werr != nil {
						break
					}
				}
				if err != nil {
					break // EOF: the peer is done; close second
				}
			}
			c.Close()
			e.mu.Lock()
			delete(e.conns, c)
			e.mu.Unlock()
			e.active.Add(-1)
		}()
	}
}

// Outcomes of one client connection.
const (
	portsServed  = iota // its line came back
	portsRefused        // connected, then closed or reset before any echo (l4lb refused it)
	portsFailed         // anything else
)

// portsReadToEnd connects to l4lb from 127.0.0.1:localPort and reads until
// the end of the stream (the backend's greeting), then closes: the backend
// closes first.
func portsReadToEnd(addr string, localPort int) error {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: localPort}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "hello\n" {
		return fmt.Errorf("read %q: %v", b, err)
	}
	return nil
}

// portsEchoOnce connects to l4lb from 127.0.0.1:localPort, sends msg and
// reads it back, then closes: the client closes first.
func portsEchoOnce(addr string, localPort int, msg string) int {
	o, _ := portsEchoOnceErr(addr, localPort, msg)
	return o
}

func portsEchoOnceErr(addr string, localPort int, msg string) (int, error) {
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: localPort}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		return portsFailed, fmt.Errorf("dial from :%d: %w", localPort, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg+"\n"); err != nil {
		if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
			return portsRefused, err
		}
		return portsFailed, fmt.Errorf("send: %w", err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	switch {
	case err == nil && line == msg+"\n":
		return portsServed, nil
	case line == "" && (errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET)):
		return portsRefused, err
	default:
		return portsFailed, fmt.Errorf("echo %q: %v", line, err)
	}
}

// portsBurstResult is one burst's outcome from the clients' side.
type portsBurstResult struct {
	n                       int
	served, refused, failed int
	refusedReset            int      // of refused: by a reset rather than an end of stream
	failures                []string // the first few
	elapsed                 time.Duration
}

func (r portsBurstResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

func (r portsBurstResult) log(t *testing.T, what string) {
	t.Helper()
	t.Logf("%s: %d connections in %v (%.0f/s, %d at once): %d served, %d refused (%d of them by a reset, %d by an end of stream), %d failed otherwise",
		what, r.n, r.elapsed.Round(time.Millisecond), r.rate(), portsWorkers, r.served, r.refused, r.refusedReset, r.refused-r.refusedReset, r.failed)
}

// portsBurst makes n connections to addr as fast as portsWorkers clients
// at once can, from source ports firstPort.., within portsBurstCap.
func portsBurst(addr string, n, firstPort int) portsBurstResult {
	var next atomic.Int64
	var mu sync.Mutex
	r := portsBurstResult{}
	start := time.Now()
	end := start.Add(portsBurstCap)
	var wg sync.WaitGroup
	for range portsWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || time.Now().After(end) {
					return
				}
				o, err := portsEchoOnceErr(addr, firstPort+i, fmt.Sprintf("client %d", i))
				mu.Lock()
				r.n++
				switch o {
				case portsServed:
					r.served++
				case portsRefused:
					r.refused++
					if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) {
						r.refusedReset++
					}
				default:
					r.failed++
					if len(r.failures) < 5 {
						r.failures = append(r.failures, err.Error())
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	return r
}

// portsWaitIdle waits until l4lb holds no client and the backend no
// connection: every close of the burst has happened on both sides.
func portsWaitIdle(t *testing.T, adm *portsAdminClient, echo *portsEcho) {
	t.Helper()
	testnet.Eventually(t, "l4lb and the backend idle", func() bool {
		m, err := adm.scrape()
		return err == nil && m.get("l4lb_client_connections_open") == 0 && echo.active.Load() == 0
	})
}

// portsAdminClient scrapes l4lb's /metrics from a source port of its own
// each time, outside the narrowed range.
type portsAdminClient struct {
	addr   string
	next   atomic.Int64
	client *http.Client
}

func newPortsAdminClient(addr string, firstPort int) *portsAdminClient {
	a := &portsAdminClient{addr: addr}
	a.next.Store(int64(firstPort))
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, address string) (net.Conn, error) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: int(a.next.Add(1))}}
			return d.DialContext(ctx, network, address)
		},
	}
	a.client = &http.Client{Timeout: 5 * time.Second, Transport: tr}
	return a
}

func (a *portsAdminClient) close() { a.client.CloseIdleConnections() }

// portsMetrics are the series of one scrape, by their text
// ("name{label="value",...}", labels sorted as the exposition has them).
type portsMetrics map[string]float64

func (m portsMetrics) get(name string, kv ...string) float64 {
	if len(kv) == 0 {
		return m[name]
	}
	type pair struct{ k, v string }
	var ps []pair
	for i := 0; i+1 < len(kv); i += 2 {
		ps = append(ps, pair{kv[i], kv[i+1]})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].k < ps[j].k })
	var b strings.Builder
	b.WriteString(name + "{")
	for i, p := range ps {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", p.k, p.v)
	}
	b.WriteByte('}')
	return m[b.String()]
}

func (a *portsAdminClient) scrape() (portsMetrics, error) {
	resp, err := a.client.Get("http://" + a.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics: %s", resp.Status)
	}
	m := portsMetrics{}
	for line := range strings.SplitSeq(string(body), "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			m[line[:i]] = v
		}
	}
	return m, nil
}

func (a *portsAdminClient) mustScrape(t *testing.T) portsMetrics {
	t.Helper()
	m, err := a.scrape()
	if err != nil {
		t.Fatalf("scraping l4lb: %v", err)
	}
	return m
}

// portsTimeWait counts sockets in TIME_WAIT by which end they are.
type portsTimeWait struct {
	total int
	// backend: l4lb's sockets toward a backend (by backend), local port
	// in the narrowed range; bySource splits them by l4lb's address.
	// Toward twoback's backends they include the test's own, which took
	// the ports there.
	backend  map[string]int
	bySource map[string]map[string]int
	// lbClient: l4lb's sockets toward a client (l4lb closed first);
	// client: the test's clients' own (they closed first); other: the
	// rest (scrapes, the veth check).
	lbClient, client, other int
}

func (w portsTimeWait) sub(o portsTimeWait) portsTimeWait {
	r := portsTimeWait{total: w.total - o.total, backend: map[string]int{}, bySource: map[string]map[string]int{},
		lbClient: w.lbClient - o.lbClient, client: w.client - o.client, other: w.other - o.other}
	for k, v := range w.backend {
		r.backend[k] = v - o.backend[k]
	}
	for be, m := range w.bySource {
		r.bySource[be] = map[string]int{}
		for src, v := range m {
			r.bySource[be][src] = v - o.bySource[be][src]
		}
	}
	return r
}

func (w portsTimeWait) String() string {
	var parts []string
	for _, be := range []string{portsPlainBE, portsSrcBE, portsFirstBE, portsTwoA, portsTwoB} {
		if n := w.backend[be]; n != 0 {
			var srcs []string
			for src, k := range w.bySource[be] {
				srcs = append(srcs, fmt.Sprintf("%s %d", src, k))
			}
			sort.Strings(srcs)
			parts = append(parts, fmt.Sprintf("l4lb->%s %d (from %s)", be, n, strings.Join(srcs, ", ")))
		}
	}
	parts = append(parts, fmt.Sprintf("l4lb->clients %d", w.lbClient), fmt.Sprintf("clients->l4lb %d", w.client), fmt.Sprintf("other %d", w.other))
	return fmt.Sprintf("%d (%s)", w.total, strings.Join(parts, ", "))
}

// portsCountTimeWait runs ss -tan state time-wait in this namespace ("")
// or in ns.
func portsCountTimeWait(t *testing.T, ns string) portsTimeWait {
	t.Helper()
	args := []string{"ss", "-Htan", "state", "time-wait"}
	if ns != "" {
		args = append([]string{"ip", "netns", "exec", ns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	w := portsTimeWait{backend: map[string]int{}, bySource: map[string]map[string]int{}}
	listeners := map[string]bool{portsPlainLn: true, portsSrcLn: true, portsFirstLn: true, portsTwoLn: true}
	for line := range strings.SplitSeq(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		local, err1 := netip.ParseAddrPort(f[len(f)-2])
		peer, err2 := netip.ParseAddrPort(f[len(f)-1])
		if err1 != nil || err2 != nil {
			t.Fatalf("ss line %q: %v %v", line, err1, err2)
		}
		w.total++
		switch {
		case peer.Addr().String() == portsBackIP && local.Port() >= portsRangeLo && local.Port() <= portsRangeHi:
			be := peer.String()
			w.backend[be]++
			if w.bySource[be] == nil {
				w.bySource[be] = map[string]int{}
			}
			w.bySource[be][local.Addr().String()]++
		case listeners[local.String()]:
			w.lbClient++
		case listeners[peer.String()]:
			w.client++
		default:
			w.other++
		}
	}
	return w
}

// portsTakeAllPorts connects to be from this namespace with the kernel's
// choice of source address and port (from the narrowed range, as a pool
// without source does) and closes each connection at once, first, until
// connect(2) finds no port left toward be (EADDRNOTAVAIL). Each leaves its
// 4-tuple in TIME_WAIT for 60 seconds. It returns how many it made.
func portsTakeAllPorts(t *testing.T, be string) int {
	t.Helper()
	limit := 4 * (portsRangeHi - portsRangeLo + 1)
	// Distinct ports are counted: now and then (about one run in ten under
	// load) a connection ends without a TIME_WAIT on this side, and
	// connect hands its port out again: 101 connects then filled a
	// 100-port range.
	taken := map[int]bool{}
	for n := 0; n < limit; n++ {
		c, err := net.DialTimeout("tcp", be, 5*time.Second)
		if errors.Is(err, syscall.EADDRNOTAVAIL) {
			return len(taken)
		}
		if err != nil {
			t.Fatalf("taking the ports toward %s: connection %d: %v", be, n, err)
		}
		port := c.LocalAddr().(*net.TCPAddr).Port
		c.Close()
		taken[port] = true
		if port < portsRangeLo || port > portsRangeHi {
			t.Fatalf("taking the ports toward %s: connection %d got port %d, outside ip_local_port_range %d-%d", be, n, port, portsRangeLo, portsRangeHi)
		}
	}
	t.Fatalf("taking the ports toward %s: %d connections and a port still left", be, limit)
	return 0
}

// portsLocalTroubleLogged counts l4lb's warn lines of clients refused for
// local trouble on listener, and the clients they count.
func portsLocalTroubleLogged(stderr, listener string) (lines, refused int) {
	for _, line := range portsNotable(stderr) {
		if !strings.Contains(line, "level=WARN") || !strings.Contains(line, `msg="clients refused: local trouble`) {
			continue
		}
		f := strings.Fields(line)
		if !slices.Contains(f, "listener="+listener) {
			continue
		}
		lines++
		for _, kv := range f {
			if v, ok := strings.CutPrefix(kv, "refused="); ok {
				n, _ := strconv.Atoi(v)
				refused += n
			}
		}
	}
	return lines, refused
}

// portsNotable are l4lb's log lines at WARN and ERROR.
func portsNotable(stderr string) []string {
	var out []string
	for line := range strings.SplitSeq(stderr, "\n") {
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			out = append(out, line)
		}
	}
	return out
}
