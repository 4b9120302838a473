package server

import (
	"log/slog"
	"reflect"
	"slices"

	"github.com/l4lb/l4lb/pkg/config"
)

// ConfigChanges is what a reload changed, by name: listeners by name,
// pools by name, backends as "pool/identity". Moving a key to another
// line changes nothing; so does reordering backends.
type ConfigChanges struct {
	ListenersAdded   []string `json:"listeners_added,omitempty"`
	ListenersRemoved []string `json:"listeners_removed,omitempty"`
	ListenersChanged []string `json:"listeners_changed,omitempty"`
	PoolsAdded       []string `json:"pools_added,omitempty"`
	PoolsRemoved     []string `json:"pools_removed,omitempty"`
	PoolsChanged     []string `json:"pools_changed,omitempty"`
	BackendsAdded    []string `json:"backends_added,omitempty"`
	BackendsRemoved  []string `json:"backends_removed,omitempty"`
	BackendsChanged  []string `json:"backends_changed,omitempty"`
}

// None reports whether the reload changed nothing that serves.
func (c ConfigChanges) None() bool { return reflect.ValueOf(c).IsZero() }

// LogAttr is the changes as a log group ("changes.backends_added=[...]"),
// only those that happened.
func (c ConfigChanges) LogAttr() slog.Attr {
	var args []any
	add := func(key string, names []string) {
		if len(names) > 0 {
			args = append(args, key, names)
		}
	}
	add("listeners_added", c.ListenersAdded)
	add("listeners_removed", c.ListenersRemoved)
	add("listeners_changed", c.ListenersChanged)
	add("pools_added", c.PoolsAdded)
	add("pools_removed", c.PoolsRemoved)
	add("pools_changed", c.PoolsChanged)
	add("backends_added", c.BackendsAdded)
	add("backends_removed", c.BackendsRemoved)
	add("backends_changed", c.BackendsChanged)
	return slog.Group("changes", args...)
}

// DiffConfigs compares the listeners, pools and backends of two
// configurations.
func DiffConfigs(old, cfg *config.Config) ConfigChanges {
	var c ConfigChanges
	// Lines are left out of every comparison: an edit above a table moves
	// it without changing it. Routes and discovery are copied to do so.
	listener := func(l config.Listener) config.Listener {
		l.Line = 0
		if l.Routes != nil {
			l.Routes = slices.Clone(l.Routes)
			for i := range l.Routes {
				l.Routes[i].Line = 0
			}
		}
		return l
	}
	oldL := map[string]config.Listener{}
	for _, l := range old.Listeners {
		oldL[l.Name] = listener(l)
	}
	newL := map[string]config.Listener{}
	for _, l := range cfg.Listeners {
		newL[l.Name] = listener(l)
	}
	c.ListenersAdded, c.ListenersRemoved, c.ListenersChanged = diffMaps(oldL, newL)

	// A pool's own keys, without its backends (compared one by one).
	pool := func(p *config.Pool) config.Pool {
		q := *p
		q.Line, q.Backends = 0, nil
		if q.Discovery != nil {
			d := *q.Discovery
			d.Line = 0
			q.Discovery = &d
		}
		return q
	}
	oldP, newP := map[string]config.Pool{}, map[string]config.Pool{}
	oldB, newB := map[string]config.Backend{}, map[string]config.Backend{}
	backends := func(p *config.Pool, into map[string]config.Backend) {
		for _, b := range p.Backends {
			b.Line = 0
			into[p.Name+"/"+b.Identity()] = b
		}
	}
	for name, p := range old.Pools {
		oldP[name] = pool(p)
		backends(p, oldB)
	}
	for name, p := range cfg.Pools {
		newP[name] = pool(p)
		backends(p, newB)
	}
	c.PoolsAdded, c.PoolsRemoved, c.PoolsChanged = diffMaps(oldP, newP)
	c.BackendsAdded, c.BackendsRemoved, c.BackendsChanged = diffMaps(oldB, newB)
	return c
}

// diffMaps lists, sorted, the keys only in next, only in prev, and in
// both with different values.
func diffMaps[V any](prev, next map[string]V) (added, removed, changed []string) {
	for k, v := range next {
		p, ok := prev[k]
		switch {
		case !ok:
			added = append(added, k)
		case !reflect.DeepEqual(p, v):
			changed = append(changed, k)
		}
	}
	for k := range prev {
		if _, ok := next[k]; !ok {
			removed = append(removed, k)
		}
	}
	slices.Sort(added)
	slices.Sort(removed)
	slices.Sort(changed)
	return added, removed, changed
}
