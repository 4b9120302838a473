package admin

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/l4lb/l4lb/pkg/pool"
)

type poolsJSON struct {
	Pools []poolJSON `json:"pools"`
}

type poolJSON struct {
	Name      string        `json:"name"`
	Algorithm string        `json:"algorithm"`
	Protocol  string        `json:"protocol"`
	Backends  []backendJSON `json:"backends"`
}

type backendJSON struct {
	Addr              string      `json:"addr"`
	Weight            int         `json:"weight"`
	Usable            bool        `json:"usable"`
	Health            string      `json:"health"`
	Disabled          bool        `json:"disabled"`
	ActiveConnections int64       `json:"active_connections"`
	Breaker           breakerJSON `json:"breaker"`
}

type breakerJSON struct {
	State               string  `json:"state"`
	Generation          uint64  `json:"generation"`
	CooldownLeftSeconds float64 `json:"cooldown_left_seconds"`
}

func backendView(b *pool.Backend) backendJSON {
	st := b.Breaker()
	health, state := "up", "closed"
	if !b.HealthUp() {
		health = "down"
	}
	if st.Open {
		state = "open"
	}
	return backendJSON{
		Addr: b.Addr, Weight: b.Weight, Usable: b.Usable(), Health: health, Disabled: st.Disabled,
		ActiveConnections: b.Active(),
		Breaker: breakerJSON{State: state, Generation: st.Generation,
			CooldownLeftSeconds: st.CooldownLeft.Seconds()},
	}
}

func poolView(p *pool.Pool) poolJSON {
	v := poolJSON{Name: p.Name, Algorithm: p.Algorithm, Protocol: p.Protocol(), Backends: []backendJSON{}}
	for _, b := range p.Backends() {
		v.Backends = append(v.Backends, backendView(b))
	}
	return v
}

// api serves /api/v1.
type api struct {
	pools  func() []*pool.Pool
	config *ConfigState
	log    *slog.Logger
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("/api/v1/pools", a.listPools)
	mux.HandleFunc("/api/v1/pools/{pool}", a.getPool)
	mux.HandleFunc("/api/v1/pools/{pool}/backends/{addr}/{action}", a.backendAction)
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
	out := poolsJSON{Pools: []poolJSON{}}
	for _, p := range a.pools() {
		out.Pools = append(out.Pools, poolView(p))
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
	writeJSON(w, http.StatusOK, poolView(p))
}

// backendActions are the POST routes on one backend: what each asks of the
// pool, and the status of a success.
var backendActions = map[string]struct {
	do     func(*pool.Pool, context.Context, *pool.Backend) error
	status int
}{
	"disable": {(*pool.Pool).Disable, http.StatusOK},
	"enable":  {(*pool.Pool).Enable, http.StatusOK},
	// The probe runs in the background and its result decides later, so
	// the request is accepted, not done; the state returned is the
	// breaker's as the probe starts.
	"probe": {(*pool.Pool).Probe, http.StatusAccepted},
}

func (a *api) backendAction(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	act, known := backendActions[action]
	if !known {
		writeError(w, http.StatusNotFound, "unknown action "+quote(action)+": use disable, enable or probe")
		return
	}
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
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
	switch err := act.do(p, ctx, b); {
	case err == nil:
		writeJSON(w, act.status, backendView(b))
	case errors.Is(err, pool.ErrBreakerClosed), errors.Is(err, pool.ErrDisabled):
		// The backend's state refuses the request; nothing failed.
		writeError(w, http.StatusConflict, action+" refused: "+err.Error())
	default:
		a.log.Error("admin action failed", "pool", p.Name, "backend", b.Addr, "action", action, "error", err)
		writeError(w, http.StatusServiceUnavailable, action+" failed: "+err.Error())
	}
}

func allowMethod(w http.ResponseWriter, r *http.Request, method string) bool {
	if r.Method == method {
		return true
	}
	w.Header().Set("Allow", method)
	writeError(w, http.StatusMethodNotAllowed, "method "+r.Method+" not allowed: use "+method)
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

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
