package srclimit

import (
	"math/rand/v2"
	"net/netip"
	"testing"
)

// modelEntry is the reference model's state of a source: kept forever,
// never swept, so the Limiter's verdicts must be the model's.
type modelEntry struct {
	conns int
	tat   int64
}

type model struct {
	p   params
	now int64
	m   map[netip.Addr]*modelEntry
}

func (m *model) admit(a netip.Addr, now int64) Verdict {
	m.now = max(m.now, now)
	now = m.now
	e := m.m[a]
	if e == nil {
		e = &modelEntry{}
		m.m[a] = e
	}
	if m.p.maxConns > 0 && e.conns >= int(m.p.maxConns) {
		return OverConns
	}
	tat := int64(0)
	if m.p.interval > 0 {
		tat = max(e.tat, now) + m.p.interval
		if tat-now > m.p.tau {
			return OverRate
		}
	}
	e.tat = tat
	if m.p.maxConns > 0 {
		e.conns++
	}
	return Admit
}

func (m *model) release(a netip.Addr) {
	if e := m.m[a]; e != nil && e.conns > 0 && m.p.maxConns > 0 {
		e.conns--
	}
}

// TestAgainstModel runs random operations, with sweeps and removals at
// every position of the shards' slices, and compares each verdict and the
// held counts with a model that forgets nothing.
func TestAgainstModel(t *testing.T) {
	for _, cfg := range []Config{
		{MaxConns: 3, Rate: 10, Burst: 3},
		{MaxConns: 1, Rate: 100, Burst: 1},
		{Rate: 50, Burst: 4},
		{MaxConns: 2},
	} {
		l := mustNew(t, cfg)
		m := &model{p: l.p, m: map[netip.Addr]*modelEntry{}}
		r := rand.New(rand.NewPCG(1, uint64(cfg.MaxConns)))
		const sources = 300
		open := map[netip.Addr]int{}
		now := int64(0)
		for step := range 200_000 {
			now += r.Int64N(2 * ms)
			a := v4(r.IntN(sources))
			if r.IntN(3) == 0 {
				a = netip.AddrFrom16(a.As16()) // the mapped form of the same source
			}
			if r.IntN(2) == 0 && open[a.Unmap()] > 0 {
				open[a.Unmap()]--
				l.Release(a)
				m.release(a.Unmap())
				continue
			}
			got, want := l.Admit(a, now), m.admit(a.Unmap(), now)
			if got != want {
				t.Fatalf("%+v step %d: Admit(%v) = %v, model says %v", cfg, step, a, got, want)
			}
			if got == Admit && cfg.MaxConns > 0 {
				open[a.Unmap()]++
			}
			if step%10_000 == 0 {
				checkModel(t, l, m)
			}
		}
		checkModel(t, l, m)
	}
}

// checkModel: every entry the model has that is alive is held, with its
// count and bucket; what the Limiter holds besides is dead or not yet swept.
func checkModel(t *testing.T, l *Limiter, m *model) {
	t.Helper()
	check(t, l)
	for a, me := range m.m {
		k := l.key(a)
		s := l.shardOf(&k)
		s.mu.Lock()
		i, ok := s.idx[k]
		var e entry
		if ok {
			e = s.ents[i]
		}
		clock := s.clock
		s.mu.Unlock()
		live := me.conns > 0 || me.tat > clock
		switch {
		case live && !ok:
			t.Fatalf("%v is alive in the model (%+v) but not held", a, *me)
		case ok && (int(e.conns) != me.conns || e.tat != me.tat):
			t.Fatalf("%v: held %+v, model %+v", a, e, *me)
		}
	}
}
