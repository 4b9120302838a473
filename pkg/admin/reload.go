package admin

import (
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

	// actions is held shared by an operator's action on a backend and
	// alone by a reload (Hold): a drain, weight or enable made on the
	// pools a reload is replacing would be lost with them.
	actions sync.RWMutex
}

// Hold runs f, a reload, with no operator action on a backend under way;
// one that comes meanwhile waits, then acts on the pools f left.
func (c *ConfigState) Hold(f func()) {
	c.actions.Lock()
	defer c.actions.Unlock()
	f()
}

// acting is held around an operator's action on a backend; it returns
// the release.
func (c *ConfigState) acting() (release func()) {
	if c == nil {
		return func() {}
	}
	c.actions.RLock()
	return c.actions.RUnlock
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
)

func (c *ConfigState) collect(gauge func(*prometheus.Desc, float64, ...string), counter func(*prometheus.Desc, int64, ...string)) {
	if c == nil {
		return
	}
	counter(descReloads, c.ok.Load(), "ok")
	counter(descReloads, c.failed.Load(), "failed")
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

type reloadErrorJSON struct {
	Error  string   `json:"error"`
	Errors []string `json:"errors"`
}

// reload serves POST /api/v1/reload: 200 with what changed, or 400 with
// every error, the running configuration untouched.
func (a *api) reload(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	if a.config == nil || a.config.Reload == nil {
		writeError(w, http.StatusNotFound, "this endpoint has no configuration file to reload")
		return
	}
	result, errs := a.config.Reload()
	if len(errs) > 0 {
		writeJSON(w, http.StatusBadRequest, reloadErrorJSON{Error: "reload failed: the running configuration stays", Errors: errs})
		return
	}
	writeJSON(w, http.StatusOK, result)
}
