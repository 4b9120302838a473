package admin

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/l4lb/l4lb/pkg/pool"
)

// FleetRuntime makes drains and weights hold on every instance of a fleet
// ([cluster] store = "redis"): cmd/l4lb writes them to the fleet's store
// and applies them here as the fleet's (pool.ApplyFleet). Without one,
// every drain and weight is this instance's own, as before fleets shared
// them.
//
// With one, the drain and weight routes are the fleet's unless the
// request says scope=local; enable ends the fleet's drain and disable as
// well as this instance's drain, and enable?scope=local this instance's
// own drain only. A fleet-wide undrain or weight needs the store: while it is
// out of reach they fail (503) and change nothing, and scope=local still
// works; a fleet-wide drain is kept and merged back (pkg/fleet).
type FleetRuntime interface {
	Drain(ctx context.Context, p *pool.Pool, b *pool.Backend, timeout time.Duration) error
	Undrain(ctx context.Context, p *pool.Pool, b *pool.Backend) error
	SetWeight(ctx context.Context, p *pool.Pool, b *pool.Backend, w int) error
}

// scopeOf is the scope= of a drain or weight: the fleet's by default when
// there is a fleet, else this instance's.
func (a *api) scopeOf(q url.Values) (pool.Scope, error) {
	switch v := pool.Scope(q.Get("scope")); {
	case v == "" && a.fleet != nil, v == pool.ScopeFleet && a.fleet != nil:
		return pool.ScopeFleet, nil
	case v == "", v == pool.ScopeLocal:
		return pool.ScopeLocal, nil
	case v == pool.ScopeFleet:
		return "", fmt.Errorf("%w: scope=fleet needs a fleet ([cluster] store = \"redis\"): this instance's drains and weights are its own", errBadParam)
	default:
		return "", fmt.Errorf("%w: scope=%q: use local (this instance only) or fleet", errBadParam, v)
	}
}

// enable is the enable route: the manual disable and every drain end here,
// and with a fleet the fleet's drain ends on every instance.
func (a *api) enable(p *pool.Pool, ctx context.Context, b *pool.Backend) error {
	if err := p.Enable(ctx, b); err != nil {
		return err
	}
	if a.fleet == nil {
		return nil
	}
	if err := a.fleet.Undrain(ctx, p, b); err != nil {
		return fmt.Errorf("enabled here, but the fleet's drain is not ended: %w", err)
	}
	return nil
}
