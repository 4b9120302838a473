package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/l4lb/l4lb/pkg/config"
)

// Membership changes which backends a pool has at run time: the admin
// API's POST /api/v1/pools/{pool}/backends and DELETE
// /api/v1/pools/{pool}/backends/{addr} call it.
//
// A change of membership rebuilds the pool as a reload does, so an
// implementation makes it under ConfigState.HoldActions: no operator's
// action on a backend runs meanwhile (made on the pool being replaced it
// would be lost), and while an upgrade refuses actions the change is
// refused too (ErrRefused, 409). The routes take no lock of their own
// around the call; two calls may run at once.
type Membership interface {
	// AddBackend adds b to pool; as any backend added, it takes clients
	// once its health checks pass.
	AddBackend(ctx context.Context, pool string, b NewBackend) error
	// RemoveBackend takes the backend at addr out of pool: it gets no new
	// client at once, and the connections still open to it at
	// drainTimeout are reset.
	RemoveBackend(ctx context.Context, pool, addr string, drainTimeout time.Duration) error
}

// NewBackend is a backend to add: its address (checked as the file's
// addr is, by config.ParseBackendAddr), its weight (0..config.MaxWeight)
// and its hashing identity ("": its address), as in [[pool.NAME.backend]].
type NewBackend struct {
	Addr   string
	Weight int
	ID     string
}

// The errors a Membership returns, wrapped with what names the pool and
// the backend; each route answers them with its own status. An error that
// wraps none of them is a failure (503).
var (
	ErrNoPool    = errors.New("no such pool")    // 404
	ErrNoBackend = errors.New("no such backend") // 404
	ErrExists    = errors.New("already in the pool")
	// ErrNotRemovable: the file or discovery names the backend, so the
	// API cannot remove it (409); the wrapping says which.
	ErrNotRemovable = errors.New("not removable through the API")
	// ErrInvalid: the backend cannot join the pool as asked (400), for
	// a reason only the pool knows (an identity another backend has).
	ErrInvalid = errors.New("invalid backend")
	// ErrRefused: actions are refused now (an upgrade under way, 409);
	// HoldActions returns it wrapped with why.
	ErrRefused = errors.New("actions are refused now")
	// ErrUnreadable: the fleet's record of the pool's API-added backends
	// cannot be read by this build (502): no change is made on it until
	// it is replaced (FleetMembership), and retrying alone never helps.
	ErrUnreadable = errors.New("the fleet's record of the pool's backends is unreadable")
	// ErrNothingToReplace: FleetMembership found the fleet's record
	// readable, or there is no fleet (409).
	ErrNothingToReplace = errors.New("nothing to replace")
)

// FleetMembership is a Membership whose API additions a fleet shares in
// one record per pool: POST /api/v1/pools/{pool}/fleet-members/replace
// calls it, the way out of a record no change can be made on.
type FleetMembership interface {
	// ReplaceUnreadable writes this instance's API additions to pool over
	// the fleet's record of them when that record is unreadable, and only
	// then (ErrNothingToReplace); every instance then takes them.
	ReplaceUnreadable(ctx context.Context, pool string) error
}

// membershipStatus is the status of a Membership's error.
func membershipStatus(err error) int {
	switch {
	case errors.Is(err, ErrNoPool), errors.Is(err, ErrNoBackend):
		return http.StatusNotFound
	case errors.Is(err, ErrExists), errors.Is(err, ErrNotRemovable), errors.Is(err, ErrRefused), errors.Is(err, ErrNothingToReplace):
		return http.StatusConflict
	case errors.Is(err, ErrInvalid):
		return http.StatusBadRequest
	case errors.Is(err, ErrUnreadable):
		return http.StatusBadGateway
	}
	return http.StatusServiceUnavailable
}

// newBackendJSON is the body of POST /api/v1/pools/{pool}/backends.
type newBackendJSON struct {
	Addr   string `json:"addr"`
	Weight *int   `json:"weight"` // nil: the file's default
	ID     string `json:"id"`
}

// maxBackendBody bounds what the add route reads: a backend is a few
// dozen bytes.
const maxBackendBody = 16 << 10

// fieldKinds are the JSON types of newBackendJSON's fields.
var fieldKinds = map[string]string{"addr": "string", "weight": "integer", "id": "string"}

const newBackendShape = `{"addr":"IP:port","weight":N,"id":"..."} (weight and id optional)`

// decodeNewBackend reads and checks the body of an add: one JSON object
// of the known fields, its addr an address a backend can have, its weight
// in range.
func decodeNewBackend(r *http.Request) (NewBackend, error) {
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBackendBody))
	dec.DisallowUnknownFields()
	var in newBackendJSON
	if err := dec.Decode(&in); err != nil {
		var typeErr *json.UnmarshalTypeError
		switch {
		case errors.Is(err, io.EOF):
			return NewBackend{}, fmt.Errorf("the body is empty: send %s", newBackendShape)
		case errors.As(err, &typeErr):
			return NewBackend{}, fmt.Errorf("body: %s must be a JSON %s, not %s", typeErr.Field, fieldKinds[typeErr.Field], typeErr.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return NewBackend{}, fmt.Errorf("body: %s: send %s", strings.TrimPrefix(err.Error(), "json: "), newBackendShape)
		}
		return NewBackend{}, fmt.Errorf("the body is not JSON (%v): send %s", err, newBackendShape)
	}
	if dec.More() {
		return NewBackend{}, fmt.Errorf("the body holds more than one JSON value: send one object %s", newBackendShape)
	}
	b := NewBackend{Addr: in.Addr, Weight: config.DefaultBackend().Weight, ID: in.ID}
	if in.Weight != nil {
		b.Weight = *in.Weight
	}
	switch _, err := config.ParseBackendAddr(b.Addr); {
	case in.Addr == "":
		return NewBackend{}, fmt.Errorf("addr is missing: send %s", newBackendShape)
	case err != nil:
		return NewBackend{}, fmt.Errorf("addr: %v", err)
	case b.Weight < 0 || b.Weight > config.MaxWeight:
		return NewBackend{}, fmt.Errorf("weight %d is out of range 0..%d", b.Weight, config.MaxWeight)
	}
	return b, nil
}

// membershipOff answers 501 when the endpoint has no Membership.
func (a *api) membershipOff(w http.ResponseWriter, verb string) bool {
	if a.membership != nil {
		return false
	}
	writeError(w, http.StatusNotImplemented, verb+" refused: this endpoint cannot add or remove backends at run time (it was started without a membership source)")
	return true
}

// membershipCall runs call on the Membership for the route named verb on
// the pool in the path, as an operator's action, and answers status and
// the pool's JSON, or the error. The request is read before: a slow body
// must not hold up reloads.
func (a *api) membershipCall(w http.ResponseWriter, r *http.Request, verb string, status int, call func(context.Context) error) {
	name := r.PathValue("pool")
	if a.findPool(name) == nil {
		writeError(w, http.StatusNotFound, "unknown pool "+quote(name))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	if err := call(ctx); err != nil {
		code := membershipStatus(err)
		if code == http.StatusServiceUnavailable {
			a.log.Error("admin "+verb+" failed", "pool", name, "error", err)
		}
		if code == http.StatusServiceUnavailable || code == http.StatusBadGateway {
			// 502 is not logged per request: the fleet store logs each
			// unreadable record once.
			writeError(w, code, verb+" failed: "+err.Error())
			return
		}
		if errors.Is(err, ErrRefused) {
			a.log.Warn(verb+" refused", "pool", name, "error", err)
		}
		writeError(w, code, verb+" refused: "+err.Error())
		return
	}
	p := a.findPool(name)
	if p == nil { // a reload dropped the pool since
		writeError(w, http.StatusNotFound, "pool "+quote(name)+" is gone")
		return
	}
	writeJSON(w, status, a.view(p))
}

// addBackend serves POST /api/v1/pools/{pool}/backends: 201 with the
// pool's JSON.
func (a *api) addBackend(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) || a.membershipOff(w, "add") {
		return
	}
	b, err := decodeNewBackend(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "add refused: "+err.Error())
		return
	}
	a.membershipCall(w, r, "add", http.StatusCreated, func(ctx context.Context) error {
		return a.membership.AddBackend(ctx, r.PathValue("pool"), b)
	})
}

// removeBackend serves DELETE /api/v1/pools/{pool}/backends/{addr}
// [?timeout=D]: 202 with the pool's JSON, as the drain runs on.
func (a *api) removeBackend(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodDelete) || a.membershipOff(w, "remove") {
		return
	}
	q, err := onlyParam(r, "remove", "timeout")
	var timeout time.Duration
	if err == nil {
		timeout, err = drainTimeout(q)
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "remove refused: "+err.Error())
		return
	}
	a.membershipCall(w, r, "remove", http.StatusAccepted, func(ctx context.Context) error {
		return a.membership.RemoveBackend(ctx, r.PathValue("pool"), r.PathValue("addr"), timeout)
	})
}

// replaceFleetMembers serves POST /api/v1/pools/{pool}/fleet-members/replace:
// 200 with the pool's JSON once the fleet's unreadable record of the
// pool's API-added backends holds this instance's (FleetMembership).
func (a *api) replaceFleetMembers(w http.ResponseWriter, r *http.Request) {
	if !allowMethod(w, r, http.MethodPost) {
		return
	}
	fm, ok := a.membership.(FleetMembership)
	if !ok {
		writeError(w, http.StatusNotImplemented, "replace refused: this endpoint shares no backends with a fleet")
		return
	}
	if r.URL.RawQuery != "" {
		writeError(w, http.StatusBadRequest, "replace refused: it takes no query parameter, not "+quote(r.URL.RawQuery))
		return
	}
	a.membershipCall(w, r, "replace", http.StatusOK, func(ctx context.Context) error {
		return fm.ReplaceUnreadable(ctx, r.PathValue("pool"))
	})
}
