package admin

import (
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/l4lb/l4lb/pkg/pool"
)

// ConfigState is the running configuration as the admin endpoint shows
// it, and the way to reload it.
type ConfigState struct {
	// Reload re-reads the configuration file and applies it; on failure
	// the running configuration stays and errs lists every problem (each
	// with its line, for file errors). result is what the API returns on
	// success.
	Reload func() (result any, errs []string)

	mu     sync.Mutex
	hash   string
	loaded time.Time
	ok     atomic.Int64
	failed atomic.Int64
	// lastFailed: the last reload failed (none yet: false), so the file
	// on disk is not the one running until a reload succeeds.
	lastFailed atomic.Bool

	// actions is held shared by an operator's action on a backend and
	// alone by a reload (Hold) and by RefuseActions: a drain, weight or
	// enable made on the pools a reload is replacing would be lost with
	// them, and one made after an upgrade took its state would be lost
	// with this process. actionsRefused says why actions are refused now
	// ("": they are not); written under actions held alone.
	actions        sync.RWMutex
	actionsRefused string

	// gate is held by an API reload while it runs and by RefuseReloads,
	// so the refusal waits for one under way; refused says why the API
	// refuses reloads now ("": it does not).
	gate    sync.Mutex
	refused string
}

// RefuseReloads makes the API refuse reloads with 409 and why (a binary
// upgrade is under way, as SIGHUP is then ignored) until allow is called.
// It returns once no API reload is under way.
func (c *ConfigState) RefuseReloads(why string) (allow func()) {
	c.gate.Lock()
	c.refused = why
	c.gate.Unlock()
	return func() {
		c.gate.Lock()
		c.refused = ""
		c.gate.Unlock()
	}
}

// reloadUnlessRefused is an API reload: Reload's answer, or why reloads
// are refused now.
func (c *ConfigState) reloadUnlessRefused() (result any, errs []string, refused string) {
	c.gate.Lock()
	defer c.gate.Unlock()
	if c.refused != "" {
		return nil, nil, c.refused
	}
	result, errs = c.Reload()
	return result, errs, ""
}

// RefuseActions makes the API refuse operators' actions on backends
// (disable, enable, probe, drain, weight) with 409 and why until allow is
// called: a binary upgrade has taken this process's state for the new
// one, and an action made now would not reach it (a disable undone by the
// upgrade breaks rule 5). It returns once no action is under way, so the
// state taken after it includes every action this endpoint accepted.
func (c *ConfigState) RefuseActions(why string) (allow func()) {
	c.actions.Lock()
	c.actionsRefused = why
	c.actions.Unlock()
	return func() {
		c.actions.Lock()
		c.actionsRefused = ""
		c.actions.Unlock()
	}
}

// Hold runs f, a reload, with no operator action on a backend under way;
// one that comes meanwhile waits, then acts on the pools f left.
func (c *ConfigState) Hold(f func()) {
	c.actions.Lock()
	defer c.actions.Unlock()
	f()
}

// HoldActions runs f, a change that rebuilds pools (a membership change),
// as Hold runs a reload; while RefuseActions holds, f does not run and the
// error wraps ErrRefused with why.
func (c *ConfigState) HoldActions(f func() error) error {
	c.actions.Lock()
	defer c.actions.Unlock()
	if why := c.actionsRefused; why != "" {
		return fmt.Errorf("%w: %s", ErrRefused, why)
	}
	return f()
}

// acting is held around an operator's action on a backend; it returns
// the release, or why actions are refused now (RefuseActions), with
// nothing held.
func (c *ConfigState) acting() (release func(), refused string) {
	if c == nil {
		return func() {}, ""
	}
	c.actions.RLock()
	if why := c.actionsRefused; why != "" {
		c.actions.RUnlock()
		return nil, why
	}
	return c.actions.RUnlock, ""
}

// Loaded records the configuration now running (its content hash).
func (c *ConfigState) Loaded(hash string, at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hash, c.loaded = hash, at
}

// Counted records a reload's result.
func (c *ConfigState) Counted(ok bool) {
	if ok {
		c.ok.Add(1)
	} else {
		c.failed.Add(1)
	}
	c.lastFailed.Store(!ok)
}

// Running returns the hash and load time of the running configuration.
func (c *ConfigState) Running() (string, time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hash, c.loaded
}

var (
	descReloads    = desc("l4lb_config_reloads_total", "Configuration reloads by result: ok, or failed (the running configuration stayed).", "result")
	descConfigInfo = desc("l4lb_config_info", "The running configuration file: its SHA-256 (label hash) and, as the value, when it was loaded (Unix seconds).", "hash")
	descLastReload = desc("l4lb_config_last_reload_successful", "1 unless the last configuration reload failed (0: the file on disk is not the one running, until a reload succeeds); 1 before any reload.")
)

func (c *ConfigState) collect(gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, int64, ...string)) {
	if c == nil {
		return
	}
	counter(descReloads, c.ok.Load(), "ok")
	counter(descReloads, c.failed.Load(), "failed")
	last := 1.0
	if c.lastFailed.Load() {
		last = 0
	}
	gauge(descLastReload, last)
	hash, at := c.Running()
	if hash != "" {
		gauge(descConfigInfo, float64(at.UnixNano())/1e9, hash)
	}
}

// pools are the pools served now.
func (s Sources) pools() []*pool.Pool {
	if s.Live != nil {
		return s.Live()
	}
	return s.Pools
}

// reload serves POST /api/v1/reload: 200 with what changed, or 400 with
// every error, the running configuration untouched; 409 while reloads are
// refused (RefuseReloads).
func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	if a.config == nil || a.config.Reload == nil {
		writeError(w, http.StatusNotFound, "this endpoint has no configuration file to reload")
		return
	}
	result, errs, refused := a.config.reloadUnlessRefused()
	if refused != "" {
		a.log.Warn("reload refused: " + refused)
		writeError(w, http.StatusConflict, "reload refused: "+refused)
		return
	}
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, ErrorJSON{Error: "reload failed: the running configuration stays", Errors: errs})
		return
	}
	writeJSON(w, http.StatusOK, result)
}
