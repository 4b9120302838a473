package breaker

import (
	"context"
	"testing"
)

// publish installs st as if it had just been read (tests publish a state
// by hand with it).
func (b *Breaker) publish(st State) { b.publishRead(st, b.reads.Add(1)) }

// gatedStore is a Store whose next Read, once armed, sees the Store and
// then waits for release before it returns: a slow background refresh.
type gatedStore struct {
	Store
	armed   chan struct{} // closed by the gated Read once it has read
	release chan struct{}
	gate    chan struct{} // holds one token while armed
}

func newGatedStore(s Store) *gatedStore {
	return &gatedStore{Store: s, gate: make(chan struct{}, 1)}
}

// arm makes the next Read slow.
func (g *gatedStore) arm() {
	g.armed, g.release = make(chan struct{}), make(chan struct{})
	g.gate <- struct{}{}
}

func (g *gatedStore) Read(ctx context.Context, key string) (State, error) {
	st, err := g.Store.Read(ctx, key)
	select {
	case <-g.gate:
		close(g.armed)
		<-g.release
	default:
	}
	return st, err
}

// Found by FuzzBreakerModel: a Refresh that read the Store before a Disable
// and returned after it put the old "enabled" state back in the snapshot
// (same generation, so the generation guard let it through), and Allow()
// said yes to a backend the operator had just disabled, until the next
// refresh. Rule 5: nothing automatic re-enables a disabled backend. The
// same held for Enable the other way round.
func TestRule5_SlowRefreshDoesNotUndoAdminSwitch(t *testing.T) {
	for _, disable := range []bool{true, false} {
		name := map[bool]string{true: "disable", false: "enable"}[disable]
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			mem := NewMemoryStore(nil)
			if !disable {
				if err := mem.Disable(ctx, testKey); err != nil {
					t.Fatal(err)
				}
			}
			g := newGatedStore(mem)
			b, err := New(testKey, Config{}.withDefaults(), g, Options{})
			if err != nil {
				t.Fatal(err)
			}
			g.arm()
			refreshed := make(chan error, 1)
			go func() { refreshed <- b.Refresh(ctx) }() // Run's background refresh
			<-g.armed                                   // it has read the Store: not switched yet

			switchErr := b.Enable(ctx)
			if disable {
				switchErr = b.Disable(ctx)
			}
			if switchErr != nil {
				t.Fatal(switchErr)
			}
			close(g.release)
			if err := <-refreshed; err != nil {
				t.Fatal(err)
			}
			if got := b.State().Disabled; got != disable {
				t.Fatalf("after %s and a refresh that read before it, the snapshot says disabled=%v", name, got)
			}
			if b.Allow() == disable {
				t.Fatalf("Allow() = %v after %s", b.Allow(), name)
			}
		})
	}
}
