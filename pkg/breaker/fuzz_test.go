package breaker

import "testing"

// FuzzBreakerModel drives a fleet of 2-3 Breakers sharing one MemoryStore
// (same key) on a synthetic clock with a sequence of operations decoded from
// the input (fuzzharness_test.go): Begins of every kind on any instance,
// results in any order (so late and stale results happen), time steps,
// Refresh, slow refreshes, Disable/Enable, ProbeNow, Run's wake-ups with
// probes that stay in flight. After every operation the fleet must agree
// with the reference model (model_test.go), and these invariants must hold:
//
//   - a close is caused by a probe or force-try success that captured the
//     open generation it closes, and whose dial began after that
//     generation opened: never by a stale result;
//   - the generation only goes up, by exactly one per transition;
//   - the manual disable changes only with Disable/Enable; probes and
//     force-tries skip a disabled backend;
//   - at most one probe dial is in flight across the fleet, under the lock;
//   - a failed force-try changes nothing, open or closed;
//   - client failures of a closed generation trip at exactly Failures within
//     Window (and MinRatio), successes never clear the window;
//   - a failed probe of the open generation re-opens with the cooldown
//     doubled, capped by MaxCooldown, its next probe jittered by ±10%;
//   - a snapshot never goes back to an older generation, nor to a read made
//     before an admin switch it already showed;
//   - with a trip quorum (1-3 of the 2-3 instances): the breaker opens in
//     the Store only when quorum instances' votes of its generation lie
//     within Window; below it the tripping instance's breaker opens alone
//     (its Allow false, every other instance's as the Store says), probes
//     by itself with no lock, is closed only by a success of a dial that
//     captured its local generation and began after it opened, re-opens
//     with the doubled cooldown and votes again, and joins the fleet's
//     open once its snapshot shows one.
//
// Seeds are fuzzSeeds below; the corpus the fuzzer kept is in
// testdata/fuzz/FuzzBreakerModel. Run it with
//
//	go test -run '^$' -fuzz FuzzBreakerModel -fuzztime 5m ./pkg/breaker
func FuzzBreakerModel(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add(s.input())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		newFuzzHarness(t, data).run()
	})
}

// Each seed must reach what it is named for; otherwise it seeds nothing.
func TestFuzzSeedsReachTheirScenario(t *testing.T) {
	for _, s := range fuzzSeeds {
		t.Run(s.name, func(t *testing.T) {
			got := newFuzzHarness(t, s.input()).run()
			if !s.want(got) {
				t.Fatalf("seed did not reach its scenario: %+v", got)
			}
		})
	}
}

// seedCfg is a readable fuzz header: each field is the index or value the
// harness decodes (see newFuzzHarness).
type seedCfg struct {
	n, failures, successes int
	quorum                 int // the trip quorum, 1-3 (0: 1)
	window, ratio, volume  int // fuzzWindows, fuzzRatios, fuzzVolumes
	cooldown, maxMult      int // fuzzCooldowns, fuzzMaxMult
	ttl                    int // fuzzLockTTLs
	jitter, skew           [3]int
}

func (c seedCfg) header() []byte {
	h := []byte{
		byte(max(c.n, 2) - 2 + (max(c.quorum, 1)-1)<<1),
		byte(max(c.failures, 1) - 1),
		byte(c.window | c.ratio<<2 | c.volume<<4),
		byte(c.cooldown | c.maxMult<<2),
		byte(max(c.successes, 1) - 1),
		byte(c.ttl),
		0, 0,
	}
	for i := range 3 {
		h[6] |= byte(c.jitter[i] << (2 * i))
		h[7] |= byte(c.skew[i] << (2 * i))
	}
	return h
}

type fuzzSeed struct {
	name string
	cfg  seedCfg
	ops  [][2]byte
	want func(fuzzStats) bool
}

func (s fuzzSeed) input() []byte {
	b := s.cfg.header()
	for _, op := range s.ops {
		b = append(b, op[0], op[1])
	}
	return b
}

// Operation constructors for seeds.
func sBegin(k Kind, i int) [2]byte {
	return [2]byte{byte(map[Kind]int{KindClient: opBeginClient, KindForce: opBeginForce, KindProbe: opBeginProbe}[k]), byte(i)}
}
func sDone(outstanding int, r Result) [2]byte { return [2]byte{opDone, byte(outstanding*3 + int(r))} }
func sFail(i int) [2]byte                     { return [2]byte{opFailClient, byte(i)} }
func sOK(i int) [2]byte                       { return [2]byte{opOkClient, byte(i)} }
func sForce(i int, r Result) [2]byte          { return [2]byte{opForceNow, byte(i | int(r)<<2)} }
func sSmall(idx int) [2]byte                  { return [2]byte{opStepSmall, byte(idx)} }
func sLarge(idx int) [2]byte                  { return [2]byte{opStepLarge, byte(idx)} }
func sWake(i int) [2]byte                     { return [2]byte{opWake, byte(i)} }
func sProbeNow(i int) [2]byte                 { return [2]byte{opProbeNow, byte(i)} }
func sReturn(r Result) [2]byte                { return [2]byte{opProbeReturn, byte(r)} }
func sShutdown() [2]byte                      { return [2]byte{opProbeReturn, 3} }
func sDisable(i int) [2]byte                  { return [2]byte{opDisable, byte(i)} }
func sEnable(i int) [2]byte                   { return [2]byte{opEnable, byte(i)} }
func sRefresh(i int) [2]byte                  { return [2]byte{opRefresh, byte(i)} }
func sSlowRefresh(i, k int) [2]byte           { return [2]byte{opSlowRefresh, byte(i | (k-1)<<2)} }
func sWakeDelayed(i, d int) [2]byte           { return [2]byte{opWake, byte(i | d<<2)} }

// Step indices used below (fuzzSmallSteps, fuzzLargeSteps).
const (
	s100ms, s1s, s2s = 2, 5, 6
	l5s, l10s, l29s  = 0, 1, 2
	l30s             = 3
)

var fuzzSeeds = []fuzzSeed{
	{
		// The seed scenario: a dial begun before the trip succeeds after
		// it. It is stale; only the probe after the cooldown closes.
		name: "in-flight success after the trip is stale",
		cfg:  seedCfg{failures: 3, window: 3, cooldown: 2, maxMult: 3, ttl: 2},
		ops: [][2]byte{
			sBegin(KindClient, 0),
			sSmall(s100ms), sFail(0), sSmall(s100ms), sFail(0), sSmall(s100ms), sFail(0),
			sSmall(s2s), sDone(0, Success),
			sLarge(l30s), sWake(0), sReturn(Success),
		},
		want: func(s fuzzStats) bool { return s.trips == 1 && s.staleSuccess == 1 && s.closeByProbe == 1 },
	},
	{
		// A probe fails (re-open, cooldown doubled), fails again up to the
		// cap, then succeeds; wake-ups inside the cooldown do not probe.
		name: "probe fails then succeeds",
		cfg:  seedCfg{failures: 2, cooldown: 1, maxMult: 2, ttl: 1},
		ops: [][2]byte{
			sFail(0), sFail(0), sLarge(l5s),
			sWake(0), sReturn(Failure), // 10s
			sLarge(l5s), sWake(1), // inside the cooldown: nothing
			sLarge(l5s), sWake(1), sReturn(Failure), // 20s
			sLarge(l29s), sWake(0), sReturn(Failure), // capped at 20s
			sLarge(l29s), sWake(1), sReturn(Success),
		},
		want: func(s fuzzStats) bool { return s.reopens == 3 && s.closeByProbe == 1 && s.probes == 4 },
	},
	{
		// Disable while open: no probe, no early probe, no force-try; a
		// force-try begun before the disable still closes on success, and
		// the backend stays disabled until Enable.
		name: "disable during open",
		cfg:  seedCfg{failures: 1, cooldown: 0, ttl: 2},
		ops: [][2]byte{
			sFail(0), sBegin(KindForce, 0), sDisable(1),
			sLarge(l10s), sWake(0), sProbeNow(0), sWake(0),
			sForce(0, Success), sBegin(KindForce, 1), sRefresh(1), sBegin(KindForce, 1),
			sDone(0, Success), // closes; still disabled
			sRefresh(1), sFail(1), sLarge(l10s), sWake(1),
			sEnable(0), sProbeNow(0), sWake(0), sReturn(Success),
		},
		want: func(s fuzzStats) bool {
			return s.disabledOpen > 0 && s.trips == 2 && s.closeByForce == 1 && s.closeByProbe == 1 && s.probes == 1
		},
	},
	{
		// Two instances race to trip and to close: the loser of the trip
		// learns the Store's state; a force-try on one instance closes
		// while the other's probe is in flight, whose success is then
		// stale, and so is a client dial that raced the trip.
		name: "two instances race to trip and close",
		cfg:  seedCfg{failures: 2, cooldown: 1, ttl: 1},
		ops: [][2]byte{
			sFail(0), sFail(1), sFail(0), sFail(1),
			sBegin(KindForce, 1), sBegin(KindClient, 0),
			sLarge(l5s), sWake(0),
			sWake(1), sDone(0, Success), sReturn(Success),
			sDone(0, Failure),
		},
		want: func(s fuzzStats) bool {
			return s.trips == 1 && s.closeByForce == 1 && s.lockedOut == 1 && s.stale >= 2 && s.closeByProbe == 0
		},
	},
	{
		// A ProbeNow made while the early probe runs is answered by it: the
		// probe fails and no second early probe skips the new cooldown.
		name: "probe request during a probe",
		cfg:  seedCfg{failures: 1, cooldown: 2, ttl: 2},
		ops: [][2]byte{
			sFail(0), sProbeNow(0), sWake(0),
			sProbeNow(0), sWake(0), sReturn(Failure),
			sWake(0), sSmall(s1s), sWake(0),
		},
		want: func(s fuzzStats) bool { return s.earlyProbes == 1 && s.probes == 1 && s.reopens == 1 },
	},
	{
		// min_ratio: two failures among five dials do not trip at 0.5; the
		// third failure (3 of 6) does. Successes never clear the window.
		name: "min ratio",
		cfg:  seedCfg{failures: 2, window: 1, ratio: 2, volume: 2},
		ops: [][2]byte{
			sOK(0), sOK(0), sOK(0), sFail(0), sSmall(s100ms), sFail(0),
			sOK(1), sSmall(s100ms), sFail(0),
		},
		want: func(s fuzzStats) bool { return s.trips == 1 },
	},
	{
		// A probe that outlives its lock TTL times out at the deadline (a
		// failure); a later probe cut by shutdown is local trouble; the
		// next one closes. Three instances, one locked out meanwhile.
		name: "probe timeout and shutdown",
		cfg:  seedCfg{n: 3, failures: 1, cooldown: 0, maxMult: 1, ttl: 0},
		ops: [][2]byte{
			sFail(0), sSmall(s1s), sWake(0),
			sWake(1), sSmall(s1s), // times out
			sLarge(l5s), sWake(2), sShutdown(),
			sWake(2), sReturn(Success),
		},
		want: func(s fuzzStats) bool {
			return s.reopens == 1 && s.lockedOut == 1 && s.probes == 3 && s.closeByProbe == 1
		},
	},
	{
		// Found by the fuzzer: a refresh that read the Store before a
		// Disable returns after it. It must not undo the disable in the
		// snapshot (Allow said yes until the next refresh).
		name: "slow refresh does not undo a disable",
		cfg:  seedCfg{failures: 1},
		ops: [][2]byte{
			sSlowRefresh(0, 1), sDisable(0),
			sOK(0), sForce(0, Success),
			sSlowRefresh(1, 2), sEnable(1), sDisable(0),
		},
		want: func(s fuzzStats) bool { return s.slowReads == 2 && s.trips == 0 },
	},
	{
		// Run's probe goroutine gets going only after a Disable (and a
		// ProbeNow): under the lock it re-reads the Store and does not dial.
		name: "disable before the probe goroutine runs",
		cfg:  seedCfg{failures: 1, cooldown: 0, ttl: 2},
		ops: [][2]byte{
			sFail(0), sLarge(l5s), sWakeDelayed(0, 2), sDisable(1), sProbeNow(0),
			sWake(0), sEnable(1), sWake(0), sReturn(Success),
		},
		want: func(s fuzzStats) bool { return s.probes == 1 && s.closeByProbe == 1 && s.lockedOut == 0 },
	},
	{
		// successes = 2, counted by the instance that sees them; clocks of
		// the instances hours apart (rule 7).
		name: "successes counted per instance, skewed clocks",
		cfg:  seedCfg{failures: 1, successes: 2, cooldown: 2, skew: [3]int{2, 1, 0}},
		ops: [][2]byte{
			sFail(0), sRefresh(1),
			sForce(1, Success), sForce(0, Success), sForce(0, Failure), sForce(0, Success),
		},
		want: func(s fuzzStats) bool { return s.closeByForce == 1 && s.trips == 1 },
	},
	{
		// Trip quorum 2 of 3: one instance's trip opens its breaker alone
		// (the others still dial); a second instance's makes the quorum,
		// and the first joins the fleet's open at its next read.
		name: "quorum: one trip is local, two are the fleet's",
		cfg:  seedCfg{n: 3, quorum: 2, failures: 1, window: 2, cooldown: 2},
		ops: [][2]byte{
			sFail(0), sOK(1), sOK(2),
			sFail(1), sRefresh(0), sRefresh(2),
		},
		want: func(s fuzzStats) bool { return s.localTrips == 1 && s.trips == 1 && s.joins == 1 },
	},
	{
		// An open alone: a dial begun before it succeeds late and is
		// stale; its own probe fails (re-open alone, doubled cooldown, a
		// new vote that makes no quorum), then succeeds and closes it.
		name: "quorum: an open alone probes and closes by itself",
		cfg:  seedCfg{n: 3, quorum: 3, failures: 1, window: 3, cooldown: 0, maxMult: 2},
		ops: [][2]byte{
			sBegin(KindForce, 0), sFail(0), sDone(0, Success),
			sLarge(l5s), sWake(0), sReturn(Failure),
			sLarge(l5s), sWake(0), sReturn(Success),
		},
		want: func(s fuzzStats) bool {
			return s.localTrips == 1 && s.localReopens == 1 && s.localCloses == 1 && s.staleSuccess == 1 && s.trips == 0
		},
	},
	{
		// Votes age out of the window: two trips further apart than the
		// window are two opens alone, never the fleet's.
		name: "quorum: votes age out of the window",
		cfg:  seedCfg{n: 2, quorum: 2, failures: 1, window: 0, cooldown: 2},
		ops: [][2]byte{
			sFail(0), sSmall(s2s), sFail(1),
		},
		want: func(s fuzzStats) bool { return s.localTrips == 2 && s.trips == 0 },
	},
	{
		// A failed probe of an open alone votes again: with another
		// instance's vote in the window, that makes the quorum. The first
		// vote aged out before the second instance's, so that alone made
		// none.
		name: "quorum: a failed local probe's vote makes the quorum",
		cfg:  seedCfg{n: 2, quorum: 2, failures: 1, window: 1, cooldown: 0},
		ops: [][2]byte{
			sFail(0), sLarge(l10s), sFail(1),
			sWake(0), sReturn(Failure), sRefresh(1),
		},
		want: func(s fuzzStats) bool {
			return s.localTrips == 2 && s.trips == 1 && s.joins == 2 && s.localReopens == 0
		},
	},
}
