package server

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/udpsession"
)

// UDP through l4lb with real DNS servers (dnsmasq) and a real client
// (dig): issue 11's first "What it must show". Each dig is a new process
// with a new source port, so every query is a new session; responses = 1
// ends it at the answer, as a DNS listener is configured.

func TestDNSEveryQueryAnswered(t *testing.T) {
	servers := startDnsmasqs(t, 3)
	lb := startDNSLB(t, servers, dnsOpts{retries: 2})
	const queries, workers, clients = 200, 8, 5
	var (
		next   atomic.Int64
		mu     sync.Mutex
		counts = make([]int, len(servers))
	)
	err := parallelDo(workers, func(int) error {
		for {
			i := int(next.Add(1) - 1)
			if i >= queries {
				return nil
			}
			r, err := testnet.Dig(lb.addr, dnsClient(i%clients), fmt.Sprintf("q%d.%s", i, testnet.DNSZone), 3)
			if err != nil {
				return err
			}
			s := serverOf(servers, r.Answer)
			if s < 0 {
				return fmt.Errorf("query %d: answer %q is no server's", i, r.Answer)
			}
			mu.Lock()
			counts[s]++
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d queries answered, by server %v", queries, counts)
	// Round robin over sessions: a third each, give or take the sessions
	// of dig's own retries.
	for i, n := range counts {
		if n < queries/5 {
			t.Errorf("server %s answered %d of %d queries under round robin (by server: %v)", servers[i].Answer, n, queries, counts)
		}
	}
	f := lb.front
	testnet.Eventually(t, "every session ended at its answer (responses = 1)", func() bool {
		return f.Sessions.Load() == 0 && f.Ended[udpsession.EndResponses].Load() >= queries
	})
	if got := f.Started.Load(); got < queries {
		t.Errorf("%d sessions for %d digs, each from a new source port", got, queries)
	}
	for r := range udpsession.NumDropReasons {
		if n := f.Drops[r].Load(); n != 0 && !kernelDrop(r) {
			t.Errorf("%d datagrams dropped for %s", n, r)
		}
	}
}

func TestDNSAffinityUnderHashing(t *testing.T) {
	servers := startDnsmasqs(t, 3)
	for _, alg := range []string{config.AlgorithmIPHash, config.AlgorithmMaglev} {
		t.Run(alg, func(t *testing.T) {
			lb := startDNSLB(t, servers, dnsOpts{algorithm: alg, retries: 2})
			const clients, queries = 8, 8
			var mu sync.Mutex
			got := make([]map[string]int, clients) // client -> answer -> count
			err := parallelDo(clients, func(c int) error {
				seen := map[string]int{}
				for q := range queries {
					r, err := testnet.Dig(lb.addr, dnsClient(c), fmt.Sprintf("c%d-q%d.%s", c, q, testnet.DNSZone), 3)
					if err != nil {
						return err
					}
					seen[r.Answer]++
				}
				mu.Lock()
				got[c] = seen
				mu.Unlock()
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			used := map[string]bool{}
			for c, seen := range got {
				if len(seen) != 1 {
					t.Errorf("client %s (a new source port, so a new session, on each of %d queries) reached several servers: %v", dnsClient(c), queries, seen)
				}
				for a := range seen {
					used[a] = true
				}
			}
			// The servers' IDs are fixed, so where the hash puts these
			// clients is too: over 8 clients it uses more than one server.
			if len(used) < 2 {
				t.Errorf("%d clients all hashed to one server: %v", clients, got)
			}
			t.Logf("%s: servers by client %v", alg, got)
			if n := lb.front.Started.Load(); n < clients*queries {
				t.Errorf("%d sessions for %d digs", n, clients*queries)
			}
		})
	}
}

func TestDNSBackendKilledBreakerTripsNoQueryLost(t *testing.T) {
	servers := startDnsmasqs(t, 3)
	lb := startDNSLB(t, servers, dnsOpts{retries: 2, failures: 2})
	const workers = 4
	dead, db := servers[2], lb.pool.Backends()[2]
	load := startDigLoad(t, lb, servers, workers)
	testnet.Eventually(t, "30 queries answered before the kill", func() bool { return load.answered() >= 30 })

	dead.Kill()
	load.mark()
	testnet.Eventually(t, "the killed server's breaker open, and 60 queries answered since the kill", func() bool {
		_, n := load.sinceMark()
		return db.Breaker().Open && n >= 60
	})
	load.check(t)
	logFront(t, lb.front)

	after, n := load.sinceMark()
	// A dig already answered by the server when it was killed can finish
	// after: one per worker at most. Every other answer came from the
	// servers still up. (A query the server took but had not answered when
	// it was killed is lost without a refusal: dig resends it, from a new
	// source port, so in a new session; that is the client's own retry.)
	if after[2] > workers {
		t.Errorf("the killed server answered %d of the %d queries after its kill", after[2], n)
	}
	if after[0] == 0 || after[1] == 0 {
		t.Errorf("after the kill the servers up answered %v: both should share the load", after)
	}
	ok, fail := db.Dials(pool.DialClient)
	t.Logf("killed server: client dials %d ok, %d refused; trips %d; breaker %+v", ok, fail, db.Trips(), db.Breaker())
	if fail < 2 {
		t.Errorf("the killed server's refusals counted as %d client dial failures, want the breaker's 2 at least", fail)
	}
	if db.Trips() < 1 {
		t.Errorf("the killed server's breaker tripped %d times", db.Trips())
	}
	for i, b := range lb.pool.Backends()[:2] {
		if st := b.Breaker(); st.Open {
			t.Errorf("server %s, up all along, has its breaker open: %+v", servers[i].Answer, st)
		}
		if _, fail := b.Dials(pool.DialClient); fail != 0 {
			t.Errorf("server %s, up all along, has %d failed client dials", servers[i].Answer, fail)
		}
	}
	// The refused first datagrams went to the next candidate: no session
	// ran out of candidates and nothing was dropped.
	f := lb.front
	if n := f.Ended[udpsession.EndRefused].Load(); n != 0 {
		t.Errorf("%d sessions ended refused: their query was not retried on another server", n)
	}
	for r := range udpsession.NumDropReasons {
		if n := f.Drops[r].Load(); n != 0 && !kernelDrop(r) {
			t.Errorf("%d datagrams dropped for %s", n, r)
		}
	}
}

// The health check and the breaker's probe of the DNS pool: a query for
// health.<zone> (id 0x4c34, recursion desired), as send_hex holds it, and
// the header of its answer as expect_hex: same id, flags qr aa rd ra with
// no error (dnsmasq answers its own --address names authoritatively),
// one question, one answer. A REFUSED or empty answer does not match.
const (
	healthSendHex   = "4c340100000100000000000006" + "6865616c7468" + "04" + "6c346c62" + "04" + "74657374" + "00" + "00010001"
	healthExpectHex = "4c34858000010001"
)

func TestDNSBackendRestartedReadmittedByProbe(t *testing.T) {
	send, err := hex.DecodeString(healthSendHex)
	if err != nil {
		t.Fatal(err)
	}
	if want := testnet.DNSQuery(0x4c34, "health."+testnet.DNSZone); !bytes.Equal(send, want) {
		t.Fatalf("send_hex is not the query for health.%s: % x, want % x", testnet.DNSZone, send, want)
	}
	expect, err := hex.DecodeString(healthExpectHex)
	if err != nil {
		t.Fatal(err)
	}
	servers := startDnsmasqs(t, 3)
	// The servers answer the check as the pool expects.
	for _, s := range servers {
		reply, err := testnet.ExchangeDNS(s.Addr, send, 5*time.Second)
		if err != nil || !bytes.HasPrefix(reply, expect) {
			t.Fatalf("server %s answers the health query with % x (%v), want it to start with % x", s.Answer, reply, err, expect)
		}
	}
	health := config.DefaultHealth()
	health.Type = config.HealthSendExpect
	health.Send, health.Expect = send, expect
	health.Interval, health.Timeout = 250*time.Millisecond, 500*time.Millisecond
	health.Rise, health.Fall = 2, 4
	lb := startDNSLB(t, servers, dnsOpts{retries: 2, failures: 2,
		cooldown: 300 * time.Millisecond, maxCooldown: time.Second, health: &health})
	dead, db := servers[2], lb.pool.Backends()[2]

	for _, b := range lb.pool.Backends() {
		testnet.Eventually(t, b.Addr+" passing its send-expect check", func() bool {
			ok, _ := b.Dials(pool.DialHealth)
			return ok >= 1 && b.HealthUp()
		})
	}
	load := startDigLoad(t, lb, servers, 4)
	testnet.Eventually(t, "every server answering through l4lb", func() bool {
		by := load.byServer()
		return by[0] > 0 && by[1] > 0 && by[2] > 0
	})

	// Killed: refused client dials trip the breaker, the probe fails while
	// it is down, and the send-expect check takes it down. A burst of
	// queries at the kill, on top of the load, lands a few sessions on the
	// dead server well before the checks' fall (a second at least), which
	// would take it out of the picks before the breaker saw a refusal.
	dead.Kill()
	err = parallelDo(6, func(i int) error {
		_, err := testnet.Dig(lb.addr, dnsClient(10+i), fmt.Sprintf("burst%d.%s", i, testnet.DNSZone), 3)
		return err
	})
	if err != nil {
		t.Errorf("a query at the kill got no answer through l4lb: %v", err)
	}
	testnet.Eventually(t, "the killed server's breaker open", func() bool { return db.Breaker().Open })
	testnet.Eventually(t, "a recovery probe failing and the check down while the server is dead", func() bool {
		return db.ProbeFailures() >= 1 && !db.HealthUp()
	})
	if probeOK, _ := db.Dials(pool.DialProbe); probeOK != 0 {
		t.Errorf("%d recovery probes of a dead server passed", probeOK)
	}

	// Restarted on the same port: the checks pass again, the probe (the
	// same send-expect exchange) passes and closes the breaker, and
	// queries reach it again.
	dead.Restart(t)
	load.mark()
	testnet.Eventually(t, "the restarted server readmitted: breaker closed, check up", func() bool {
		st := db.Breaker()
		return !st.Open && db.HealthUp() && db.Usable()
	})
	if ok, _ := db.Dials(pool.DialProbe); ok < 1 {
		t.Errorf("the breaker closed with %d passing probes: only a probe may close it", ok)
	}
	testnet.Eventually(t, "queries answered by the restarted server", func() bool {
		after, _ := load.sinceMark()
		return after[2] >= 3
	})
	load.check(t)
	logFront(t, lb.front)
	ok, fail := db.Dials(pool.DialClient)
	pOK, pFail := db.Dials(pool.DialProbe)
	hOK, hFail := db.Dials(pool.DialHealth)
	t.Logf("restarted server: client dials %d ok/%d failed, probes %d/%d, checks %d/%d, trips %d, probe failures %d",
		ok, fail, pOK, pFail, hOK, hFail, db.Trips(), db.ProbeFailures())
	if f := lb.front; f.Ended[udpsession.EndRefused].Load() != 0 || f.Drops[udpsession.DropNoBackend].Load() != 0 {
		t.Errorf("queries lost: %d sessions ended refused, %d datagrams had no backend",
			f.Ended[udpsession.EndRefused].Load(), f.Drops[udpsession.DropNoBackend].Load())
	}
}
