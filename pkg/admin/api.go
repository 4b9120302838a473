package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/l4lb/l4lb/pkg/pool"
)

type poolsJSON struct {
	Pools []poolJSON `json:"pools"`
}

type poolJSON struct {
	Name      string        `json:"name"`
	Algorithm string        `json:"algorithm"`
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
	v := poolJSON{Name: p.Name, Algorithm: p.Algorithm, Backends: []backendJSON{}}
	for _, b := range p.Backends() {
		v.Backends = append(v.Backends, backendView(b))
	}
	return v
}

// api serves /api/v1.
type api struct {
	pools []*pool.Pool
	log   *slog.Logger
}

func (a *api) routes(mux *http.ServeMux) {
	mux.HandleFunc("/api/v1/pools", a.listPools)
	mux.HandleFunc("/api/v1/pools/{pool}", a.getPool)
	mux.HandleFunc("/api/v1/pools/{pool}/backends/{addr}/{action}", a.switchBackend)
	mux.HandleFunc("/api/v1/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such route: "+r.URL.Path)
	})
}

func (a *api) findPool(name string) *pool.Pool {
	for _, p := range a.pools {
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
	for _, p := range a.pools {
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

func (a *api) switchBackend(w http.ResponseWriter, r *http.Request) {
	action := r.PathValue("action")
	if action != "disable" && action != "enable" {
		writeError(w, http.StatusNotFound, "unknown action "+quote(action)+": use disable or enable")
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
	var err error
	if action == "disable" {
		err = p.Disable(ctx, b)
	} else {
		err = p.Enable(ctx, b)
	}
	if err != nil {
		a.log.Error("admin switch failed", "pool", p.Name, "backend", b.Addr, "action", action, "err", err)
		writeError(w, http.StatusServiceUnavailable, action+" failed: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, backendView(b))
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

// notFromBrowser refuses requests a web page could make: any request with
// an Origin header (browsers send it on cross-origin POSTs and fetches), and
// any whose Host is a name other than localhost (DNS rebinding points a
// name the attacker owns at 127.0.0.1).
func notFromBrowser(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Origin") != "" {
			writeError(w, http.StatusForbidden, "requests carrying an Origin header are refused: the admin API is not for browsers")
			return
		}
		if !hostAllowed(r.Host) {
			writeError(w, http.StatusForbidden, "Host "+quote(r.Host)+" refused: use an IP address or localhost")
			return
		}
		next.ServeHTTP(w, r)
	})
}

func hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	return net.ParseIP(host) != nil
}
