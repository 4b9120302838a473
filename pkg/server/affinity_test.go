package server

import (
	"context"
	"fmt"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Hashing algorithms through a running proxy, with many client source
// addresses (all of 127.0.0.0/8 is local on Linux).
func TestHashAffinityAcrossSources(t *testing.T) {
	for _, algorithm := range []string{"ip-hash", "consistent-hash", "maglev"} {
		t.Run(algorithm, func(t *testing.T) {
			noLeaks(t)
			var addrs []string
			for i := 0; i < 4; i++ {
				b := testnet.StartBackend(t, fmt.Sprintf("b%d", i), "")
				addrs = append(addrs, b.Addr)
			}
			l := startLB(t, poolTOML(t, algorithm, addrs, "[pool.p.health]\nenabled = false\n"), 0)

			// served asks from every source three times and insists each
			// source always reached the same backend.
			served := func() map[string]string {
				t.Helper()
				out := map[string]string{}
				for i := 10; i < 50; i++ {
					src := fmt.Sprintf("127.0.0.%d", i)
					for try := 0; try < 3; try++ {
						tag, err := testnet.Hello(l.addr, src)
						if err != nil {
							t.Fatalf("source %s: %v", src, err)
						}
						if prev, ok := out[src]; ok && prev != tag {
							t.Fatalf("source %s reached %s, then %s", src, prev, tag)
						}
						out[src] = tag
					}
				}
				return out
			}
			before := served()
			perBackend := map[string]int{}
			for _, tag := range before {
				perBackend[tag]++
			}
			if len(perBackend) != 4 {
				t.Fatalf("40 sources spread over %d of 4 backends: %v", len(perBackend), perBackend)
			}

			// Disable the busiest backend: only its sources move.
			victim := ""
			for tag, n := range perBackend {
				if victim == "" || n > perBackend[victim] || (n == perBackend[victim] && tag < victim) {
					victim = tag
				}
			}
			p := l.pools["p"]
			vb := p.Backends()[int(victim[1]-'0')]
			if err := p.Disable(context.Background(), vb); err != nil {
				t.Fatal(err)
			}
			during := served()
			for src, tag := range before {
				switch {
				case tag == victim && during[src] == victim:
					t.Fatalf("source %s still reaches the disabled backend", src)
				case tag != victim && during[src] != tag:
					t.Fatalf("source %s moved from %s to %s although its backend stayed up", src, tag, during[src])
				}
			}

			// Enable it again: every source goes back to where it was.
			if err := p.Enable(context.Background(), vb); err != nil {
				t.Fatal(err)
			}
			after := served()
			for src, tag := range before {
				if after[src] != tag {
					t.Fatalf("source %s on %s after re-enable, was %s", src, after[src], tag)
				}
			}
		})
	}
}
