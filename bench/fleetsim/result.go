package fleetsim

import (
	"maps"
	"math"
	"slices"
)

// Result is one simulation's figures. Rates are per second of wall time;
// CPU percentages are of one core.
type Result struct {
	Instances     int     `json:"instances"`
	Backends      int     `json:"backends"`
	DurationS     float64 `json:"duration_s"`
	SyncIntervalS float64 `json:"sync_interval_s"`
	TimeoutS      float64 `json:"store_timeout_s"`
	RefreshS      float64 `json:"snapshot_refresh_s"`
	CooldownS     float64 `json:"cooldown_s"`
	SetupS        float64 `json:"setup_s"`
	// SetupRetries: breaker.New calls retried at setup (their first read
	// of the Store timed out).
	SetupRetries int     `json:"setup_retries"`
	IdleS        float64 `json:"idle_s"`
	TripPhaseS   float64 `json:"trip_phase_s"`
	Trips        int     `json:"trips"`
	// RedisCommandsPerSIdle: total_commands_processed per second over the
	// idle phase (the simulation's own INFO commands taken out).
	RedisCommandsPerSIdle float64 `json:"redis_commands_per_s_idle"`
	// RedisCommandsPerSIdleAfter: the same over a second idle window
	// after the trip phase, as long as it.
	RedisCommandsPerSIdleAfter float64 `json:"redis_commands_per_s_idle_after"`
	IdleAfterS                 float64 `json:"idle_after_s"`
	// RedisCommandsPerTrip: the trip phase's commands less what the idle
	// rate (both idle windows') would have made in that time, per trip:
	// a trip's whole life,
	// fleet-wide (the trip, every instance's re-reads, the probes and
	// their locks, the re-open, the close and the re-reads after it).
	RedisCommandsPerTrip float64 `json:"redis_commands_per_trip"`
	// Convergence: from the moment the tripping instance's Store.Trip was
	// called (so it includes the trip script's own round trip) to the
	// moment another instance's breaker published the trip's open state
	// in its snapshot (breaker Events.Changed: its Run read the Store
	// after the Store's Watch told it, or at its own refresh): one sample
	// per trip and other instance.
	ConvergenceP50Ms   float64 `json:"convergence_p50_ms"`
	ConvergenceP99Ms   float64 `json:"convergence_p99_ms"`
	ConvergenceMaxMs   float64 `json:"convergence_max_ms"`
	ConvergenceSamples int     `json:"convergence_samples"`
	// ConvergenceByTrip: for each trip, in their order, how long the
	// tripping Store.Trip call took to answer, then the fastest, median
	// and slowest sample: a stall of the one simulating process shows as
	// one trip's samples late together, its Trip call included.
	ConvergenceByTrip [][4]float64 `json:"convergence_by_trip_call_min_p50_max_ms"`
	// ConvergenceMissing: instances that never read a trip open before
	// the trip phase ended (counted, not in the percentiles).
	ConvergenceMissing int `json:"convergence_missing"`
	// ProbesPerRecoveryMax: the most recovery probes made fleet-wide at
	// one open generation of one backend, that is within one cooldown of
	// one recovery (1: the single probe held), by instances whose Store
	// was with Redis.
	ProbesPerRecoveryMax int `json:"probes_per_recovery_max"`
	Probes               int `json:"probes"`
	// ProbesApart: probes made by an instance whose Store was apart from
	// Redis at the time (Redis did not answer within the timeout): such
	// an instance decides alone, under its own probe lock, by design.
	ProbesApart int `json:"probes_apart"`
	// Recoveries: trips that every instance read closed again.
	Recoveries int `json:"recoveries"`
	// ClientFailures: dials a client would have made to a tripped backend
	// that is still down, after the instance had read it open: every 5 ms
	// each instance that has converged on a down backend is asked
	// Allow(), and each yes counts one (0: once an instance knows, no
	// client of it is sent there again until the backend recovered).
	ClientFailures int `json:"client_failures"`
	// InstancesApartMax: the most instances deciding alone (Store.Up
	// false: Redis did not answer within [cluster] timeout) at one look,
	// every 5 ms.
	InstancesApartMax int `json:"instances_apart_max"`
	// Redis's CPU (/proc/PID/stat user + system).
	RedisCPUIdlePct float64 `json:"redis_cpu_idle_pct"`
	RedisCPUTripPct float64 `json:"redis_cpu_trip_phase_pct"`
	// Commands by name (INFO commandstats): per second idle, per trip in
	// the trip phase (idle rate taken out).
	RedisCallsPerSIdle map[string]float64 `json:"redis_calls_per_s_idle"`
	RedisCallsPerTrip  map[string]float64 `json:"redis_calls_per_trip"`
	GOMAXPROCS         int                `json:"gomaxprocs"`
	LoadAverage        string             `json:"load_average"`
	RedisVersion       string             `json:"redis_version"`
	Started            string             `json:"started"`
}

func (s *sim) results(res *Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var conv []float64
	backends := slices.Sorted(maps.Keys(s.trips))
	for _, b := range backends {
		tr := s.trips[b]
		if !slices.Contains(tr.closed, false) {
			res.Recoveries++
		}
		var one []float64
		for i, at := range tr.opened {
			switch {
			case i == tr.tripper:
			case at.IsZero() || tr.gen == 0:
				res.ConvergenceMissing++
			default:
				one = append(one, max(0, at.Sub(tr.start).Seconds()*1000))
			}
		}
		slices.Sort(one)
		res.ConvergenceByTrip = append(res.ConvergenceByTrip, [4]float64{round(tr.took.Seconds() * 1000),
			round(quantile(one, 0)), round(quantile(one, 0.5)), round(quantile(one, 1))})
		conv = append(conv, one...)
	}
	slices.Sort(conv)
	res.ConvergenceSamples = len(conv)
	res.ConvergenceP50Ms = round(quantile(conv, 0.50))
	res.ConvergenceP99Ms = round(quantile(conv, 0.99))
	res.ConvergenceMaxMs = round(quantile(conv, 1))
	for _, n := range s.probes {
		res.ProbesPerRecoveryMax = max(res.ProbesPerRecoveryMax, n)
	}
	res.Probes = int(s.probeN.Load())
	res.ProbesApart = s.probesApart
	res.ClientFailures = int(s.fails.Load())
	res.InstancesApartMax = int(s.apart.Load())
}

// quantile of sorted xs by the nearest rank; 0 for none (JSON has no
// NaN: ConvergenceSamples tells).
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(xs)))) - 1
	return xs[min(max(i, 0), len(xs)-1)]
}

func perUnit(m map[string]float64, d float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		out[k] = round(v / d)
	}
	return out
}

func round(x float64) float64 { return math.Round(x*100) / 100 }
