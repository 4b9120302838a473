package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/l4lb/l4lb/pkg/pool"
	"github.com/l4lb/l4lb/pkg/server"
)

// PoolsJSON is the body of GET /api/v1/pools; PoolJSON that of one pool
// (GET /api/v1/pools/{pool}, and the answer of the membership routes);
// BackendJSON that of one backend (the answer of its actions). Exported
// for the API's clients (l4lb ctl) to decode: docs/contracts.md has the
// contract.
type PoolsJSON struct {
	Pools []PoolJSON `json:"pools"`
}

type PoolJSON struct {
	Name      string `json:"name"`
	Algorithm string `json:"algorithm"`
	Protocol  string `json:"protocol"`
	// Serving: which backends take new clients, "primary" while a primary
	// is usable, "backup" while none is and a backup is, "none" when the
	// pool is all down (pool.Serving).
	Serving  string        `json:"serving"`
	Backends []BackendJSON `json:"backends"`
	// Listeners: the listeners whose new clients this pool takes (SNI
	// routes aside), in configuration order; empty for a pool only routes
	// reach, or on an endpoint without the server.
	Listeners []string `json:"listeners"`
	// Discovery: the pool's DNS discovery as its watcher sees it now;
	// absent for a pool without [pool.X.discovery].
	Discovery *DiscoveryJSON `json:"discovery,omitempty"`
	// Leaving: backends that left the pool (a reload, the API or
	// discovery removed them) while connections on them still finish;
	// absent when there are none.
	Leaving []LeavingJSON `json:"leaving,omitempty"`
}

// LeavingJSON is a backend that left its pool, and its connections still
// open.
type LeavingJSON struct {
	Addr              string `json:"addr"`
	ActiveConnections int64  `json:"active_connections"`
}

// DiscoveryJSON is a pool's DNS discovery (docs/discovery.md): what it
// looks up, and whether the last lookup worked. While lookups fail, or
// answer that there are no records within empty_grace, the pool keeps
// the last good set, so its backends alone cannot say that DNS is down.
type DiscoveryJSON struct {
	// Type is "dns" (A/AAAA records of Name) or "srv" (its SRV records).
	Type string `json:"type"`
	Name string `json:"name"`
	// Backends is the number of backends in the set applied last.
	Backends int `json:"backends"`
	// LastSuccess: the last lookup that got an answer (records, or an
	// answer that there are none); absent before the first.
	LastSuccess *time.Time `json:"last_success,omitempty"`
	// Failing: the last lookup failed (an error or a timeout), since
	// FailingSince; LastError is the last failure's, kept after recovery.
	Failing      bool       `json:"failing"`
	FailingSince *time.Time `json:"failing_since,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
	// EmptySince: the answers have said there are no records since then,
	// and the last set is kept for empty_grace.
	EmptySince *time.Time `json:"empty_since,omitempty"`
}

type BackendJSON struct {
	Addr string `json:"addr"`
	// Source: where the backend came from, "file", "dns" or "api"
	// (pool.Backend.Source).
	Source string `json:"source"`
	Weight int    `json:"weight"`
	// Role: "backup" for a backup (backup = true), which takes new
	// clients only while the pool serves from its backups; else "primary".
	Role string `json:"role"`
	// Usable: takes new connections (pool.Backend.InRotation), so false
	// while draining, even though the backend itself is fine.
	Usable bool `json:"usable"`
	// Draining: an operator's drain, under way or done (drain says
	// since when and its deadline); the backend takes no new connection
	// until it is enabled.
	Draining          bool        `json:"draining"`
	Health            string      `json:"health"`
	Disabled          bool        `json:"disabled"`
	ActiveConnections int64       `json:"active_connections"`
	Breaker           BreakerJSON `json:"breaker"`
	// Why the last active health check failed or was inconclusive;
	// absent after a pass, before the first check and when checks are off.
	LastCheckError string `json:"last_check_error,omitempty"`
	// Runtime control: the weight the file gives (weight is the one in
	// use), the connection cap (0: none) and a drain in progress or done.
	// WeightScope: where weight comes from when it is not the file's,
	// "local" (this instance's own) or "fleet" (every instance's).
	ConfiguredWeight int        `json:"configured_weight"`
	WeightScope      string     `json:"weight_scope,omitempty"`
	MaxConnections   int64      `json:"max_connections"`
	Drain            *DrainJSON `json:"drain,omitempty"`
	// Counters since start, as /metrics has them (the status page rates
	// them from two reads): bytes relayed each way (l4lb_bytes_total),
	// client dials that failed (l4lb_backend_dials_total{kind="client",
	// result="failure"}) and failed recovery probes
	// (l4lb_breaker_probe_failures_total).
	BytesToBackend int64 `json:"bytes_to_backend"`
	BytesToClient  int64 `json:"bytes_to_client"`
	DialFailures   int64 `json:"dial_failures"`
	ProbeFailures  int64 `json:"probe_failures"`
}

// DrainJSON is a drain's progress: the connections still open
// (active_connections) end by themselves or are reset at the deadline.
type DrainJSON struct {
	Since               time.Time `json:"since"`
	Deadline            time.Time `json:"deadline"`
	DeadlineLeftSeconds float64   `json:"deadline_left_seconds"`
	Remaining           int64     `json:"remaining"`
	// Scope: "local", this instance's own drain, or "fleet", one every
	// instance of the fleet holds.
	Scope string `json:"scope"`
}

type BreakerJSON struct {
	State               string  `json:"state"`
	Generation          uint64  `json:"generation"`
	CooldownLeftSeconds float64 `json:"cooldown_left_seconds"`
	// LocalOnly: open on this instance alone, below the fleet's trip
	// quorum; the other instances still dial the backend.
	LocalOnly bool `json:"local_only,omitempty"`
}

func backendView(b *pool.Backend) BackendJSON {
	st := b.Breaker()
	health, state := "up", "closed"
	if !b.HealthUp() {
		health = "down"
	}
	if st.Open {
		state = "open"
	}
	role := "primary"
	if b.Backup() {
		role = "backup"
	}
	v := BackendJSON{
		Addr: b.Addr, Source: b.Source(), Weight: b.Weight(), Role: role, Usable: b.InRotation(), Health: health, Disabled: st.Disabled,
		ActiveConnections: b.Active(),
		Breaker: BreakerJSON{State: state, Generation: st.Generation,
			CooldownLeftSeconds: st.CooldownLeft.Seconds(), LocalOnly: st.LocalOnly},
		ConfiguredWeight: b.ConfiguredWeight(), WeightScope: string(b.WeightScope()), MaxConnections: b.MaxConnections(),
		BytesToBackend: b.Meter.ToBackend.Load(), BytesToClient: b.Meter.ToClient.Load(),
		ProbeFailures: b.ProbeFailures(),
	}
	_, v.DialFailures = b.Dials(pool.DialClient)
	if hs, ok := b.HealthStatus(); ok {
		v.LastCheckError = hs.LastError
	}
	if d, ok := b.DrainState(); ok {
		v.Draining = true
		v.Drain = &DrainJSON{Since: d.Since, Deadline: d.Deadline,
			DeadlineLeftSeconds: max(0, time.Until(d.Deadline).Seconds()), Remaining: b.Active(), Scope: string(d.Scope)}
	}
	return v
}

// poolView is p's JSON; listeners are the names of the listeners that
// take it (listenersByPool).
func poolView(p *pool.Pool, listeners []string) PoolJSON {
	if listeners == nil {
		listeners = []string{}
	}
	v := PoolJSON{Name: p.Name, Algorithm: p.Algorithm, Protocol: p.Protocol(), Serving: p.Serving().String(), Backends: []BackendJSON{},
		Listeners: listeners}
	for _, b := range p.Backends() {
		v.Backends = append(v.Backends, backendView(b))
	}
	v.Leaving = leavingView(p)
	return v
}

// leavingView is p's leaving backends by address (one address may have
// left more than once: a removal, a re-add, a removal), in the order they
// left.
func leavingView(p *pool.Pool) []LeavingJSON {
	var out []LeavingJSON
	for _, b := range p.Leaving() {
		i := slices.IndexFunc(out, func(l LeavingJSON) bool { return l.Addr == b.Addr })
		if i < 0 {
			out = append(out, LeavingJSON{Addr: b.Addr})
			i = len(out) - 1
		}
		out[i].ActiveConnections += b.Active()
	}
	return out
}

// api serves /api/v1.
type api struct {
	pools      func() []*pool.Pool
	config     *ConfigState
	membership Membership   // nil: the membership routes answer 501
	fleet      FleetRuntime // nil: drains and weights are this instance's
	// listeners gives every listener's pool; nil: none known.
	listeners func() []server.ListenerPool
	// discovery gives a pool's DNS discovery (nil: none known).
	discovery func(pool string) *DiscoveryJSON
	log       *slog.Logger
}

// listenersByPool maps each pool's name to its listeners' names.
func (a *api) listenersByPool() map[string][]string {
	if a.listeners == nil {
		return nil
	}
	m := map[string][]string{}
	for _, l := range a.listeners() {
		m[l.Pool] = append(m[l.Pool], l.Name)
	}
	return m
}

// view is p's JSON with its listeners.
func (a *api) view(p *pool.Pool) PoolJSON { return a.viewWith(p, a.listenersByPool()) }

// viewWith is p's JSON with its listeners from byPool and its discovery.
func (a *api) viewWith(p *pool.Pool, byPool map[string][]string) PoolJSON {
	v := poolView(p, byPool[p.Name])
	if a.discovery != nil {
		v.Discovery = a.discovery(p.Name)
	}
	return v
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("/api/v1/pools", a.listPools)
	mux.HandleFunc("/api/v1/pools/{pool}", a.getPool)
	mux.HandleFunc("/api/v1/pools/{pool}/backends", a.addBackend)
	mux.HandleFunc("/api/v1/pools/{pool}/backends/{addr}", a.removeBackend)
	mux.HandleFunc("/api/v1/pools/{pool}/backends/{addr}/{action}", a.backendAction)
	mux.HandleFunc("/api/v1/pools/{pool}/fleet-members/replace", a.replaceFleetMembers)
	mux.HandleFunc("/api/v1/reload", a.reload)
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such route: "+r.URL.Path)
	})
}

func (a *api) findPool(name string) *pool.Pool {
	for _, p := range a.pools() {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (a *api) listPools(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	out := PoolsJSON{Pools: []PoolJSON{}}
	byPool := a.listenersByPool()
	for _, p := range a.pools() {
		out.Pools = append(out.Pools, a.viewWith(p, byPool))
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *api) getPool(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodGet) {
		return
	}
	p := a.findPool(r.PathValue("pool"))
	if p == nil {
		writeError(w, http.StatusNotFound, "unknown pool "+quote(r.PathValue("pool")))
		return
	}
	writeJSON(w, http.StatusOK, a.view(p))
}

// backendActions are the POST routes on one backend: what each asks of the
// pool, and the status of a success.
var backendActions = map[string]struct {
	do     func(*pool.Pool, context.Context, *pool.Backend) error
	status int
}{
	"disable": {(*pool.Pool).Disable, http.StatusOK},
	"enable":  {nil, http.StatusOK}, // api.enable
	// The probe runs in the background and its result decides later, so
	// the request is accepted, not done; the state returned is the
	// breaker's as the probe starts.
	"probe": {(*pool.Pool).Probe, http.StatusAccepted},
	// drain?timeout=30s: no new connections at once; those left are reset
	// at the deadline (202: the drain runs on). weight?value=N: new picks
	// use N at once.
	"drain":  {nil, http.StatusAccepted},
	"weight": {nil, http.StatusOK},
}

// errBadParam is wrapped by the error of a drain or weight request whose
// query parameter is missing or wrong (400).
var errBadParam = errors.New("bad parameter")

// actionParams are the query parameters each of drain and weight takes.
var actionParams = map[string][]string{"drain": {"timeout", "scope"}, "weight": {"value", "scope"}, "enable": {"scope"}}

// DefaultDrainTimeout is a drain's when the request names none: drain's
// and the removal of a backend's (DELETE .../backends/{addr}).
const DefaultDrainTimeout = 30 * time.Second

// onlyParam returns r's query, refused (errBadParam) unless it has no
// parameter but those of want, each given at most once and with a value.
func onlyParam(r *http.Request, action string, want ...string) (url.Values, error) {
	// Not r.URL.Query: it drops a pair it cannot decode, and the default
	// would then stand in for what the operator wrote; so would a
	// misspelled name ("timout=0s").
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, fmt.Errorf("%w: query %q does not decode: %w", errBadParam, r.URL.RawQuery, err)
	}
	for name, values := range q {
		switch {
		case !slices.Contains(want, name):
			return nil, fmt.Errorf("%w: unknown query parameter %q: %s takes %s only", errBadParam, name, action, strings.Join(want, " and "))
		// Neither an empty value nor a second one is what the
		// operator meant: the default would stand in for the first, and
		// one of two for the other.
		case len(values) > 1:
			return nil, fmt.Errorf("%w: %s given %d times: give it once", errBadParam, name, len(values))
		case values[0] == "":
			return nil, fmt.Errorf("%w: %s= has no value: give one, or leave %s out for the default", errBadParam, name, name)
		}
	}
	return q, nil
}

// drainTimeout is the timeout= of a drain or a removal: the default when
// the query has none.
func drainTimeout(q url.Values) (time.Duration, error) {
	v := q.Get("timeout")
	if v == "" {
		return DefaultDrainTimeout, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%w: timeout=%q is not a duration >= 0 such as 30s", errBadParam, v)
	}
	return d, nil
}

// withParams binds the query parameters of drain and weight to the pool's
// call, or the fleet's (scope, shared.go).
func (a *api) withParams(action string, r *http.Request) func(*pool.Pool, context.Context, *pool.Backend) error {
	q, err := onlyParam(r, action, actionParams[action]...)
	var scope pool.Scope
	if err == nil {
		scope, err = a.scopeOf(q)
	}
	if err != nil {
		return func(*pool.Pool, context.Context, *pool.Backend) error { return err }
	}
	switch action {
	case "enable":
		if scope == pool.ScopeLocal && a.fleet != nil {
			return func(p *pool.Pool, ctx context.Context, b *pool.Backend) error { return p.EndLocalDrain(ctx, b) }
		}
		return a.enable
	case "drain":
		return func(p *pool.Pool, ctx context.Context, b *pool.Backend) error {
			timeout, err := drainTimeout(q)
			if err != nil {
				return err
			}
			if scope == pool.ScopeFleet {
				return a.fleet.Drain(ctx, p, b, timeout)
			}
			return p.Drain(ctx, b, timeout)
		}
	case "weight":
		return func(p *pool.Pool, ctx context.Context, b *pool.Backend) error {
			v := q.Get("value")
			w, err := strconv.Atoi(v)
			if err != nil {
				return fmt.Errorf("%w: value=%q is not an integer weight (0..256)", errBadParam, v)
			}
			if err := pool.CheckWeight(w); err != nil {
				return fmt.Errorf("%w: %w", errBadParam, err)
			}
			if scope == pool.ScopeFleet {
				return a.fleet.SetWeight(ctx, p, b, w)
			}
			if err := p.SetWeight(ctx, b, w); err != nil {
				return fmt.Errorf("%w: %w", errBadParam, err)
			}
			return nil
		}
	}
	return nil
}

func (a *api) backendAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	act, known := backendActions[action]
	if !known {
		writeError(w, http.StatusNotFound, "unknown action "+quote(action)+": use disable, enable, probe, drain or weight")
		return
	}
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	release, refused := a.config.acting() // not on pools a reload is replacing
	if refused != "" {
		a.log.Warn(action+" refused: "+refused, "pool", r.PathValue("pool"), "backend", r.PathValue("addr"))
		writeError(w, http.StatusConflict, action+" refused: "+refused)
		return
	}
	defer release()
	p := a.findPool(r.PathValue("pool"))
	if p == nil {
		writeError(w, http.StatusNotFound, "unknown pool "+quote(r.PathValue("pool")))
		return
	}
	b, ok := p.Backend(r.PathValue("addr"))
	if !ok {
		writeError(w, http.StatusNotFound, "unknown backend "+quote(r.PathValue("addr"))+" in pool "+quote(p.Name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	do := act.do
	if do == nil {
		do = a.withParams(action, r)
	}
	switch err := do(p, ctx, b); {
	case err == nil:
		writeJSON(w, act.status, backendView(b))
	case errors.Is(err, errBadParam):
		writeError(w, http.StatusBadRequest, action+" refused: "+err.Error())
	case errors.Is(err, pool.ErrBreakerClosed), errors.Is(err, pool.ErrDisabled):
		// The backend's state refuses the request; nothing failed.
		writeError(w, http.StatusConflict, action+" refused: "+err.Error())
	default:
		a.log.Error("admin action failed", "pool", p.Name, "backend", b.Addr, "action", action, "error", err)
		writeError(w, http.StatusServiceUnavailable, action+" failed: "+err.Error())
	}
}

// allowMethod answers 405 to a request of another method. A read (GET)
// also takes HEAD, as HTTP asks of every GET resource: monitoring checks
// probe with it, and net/http leaves the body out.
func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	allowed := method
	if method == http.MethodGet {
		if r.Method == http.MethodHead {
			return true
		}
		allowed = "GET, HEAD"
	}
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", allowed)
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: use "+allowed)
	return false
}

func quote(s string) string { return `"` + s + `"` }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.Encode(v)
}

// ErrorJSON is the body of every error the API answers: error says what
// went wrong; errors, of a failed reload only, lists every problem.
type ErrorJSON struct {
	Error  string   `json:"error"`
	Errors []string `json:"errors"`
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
