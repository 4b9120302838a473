package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/config"
	"github.com/l4lb/l4lb/pkg/dialer"
	"github.com/l4lb/l4lb/pkg/pool"
)

// reloadConfig renders the test's configuration: listener "front" always,
// "extra" when withExtra; pool p over backends.
func reloadConfig(front, extra string, withExtra bool, backends []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[admin]\nlisten = \"\"\n[[listener]]\nname = \"front\"\nbind = %q\npool = \"p\"\n", front)
	if withExtra {
		fmt.Fprintf(&b, "[[listener]]\nname = \"extra\"\nbind = %q\npool = \"p\"\n", extra)
	}
	b.WriteString("[pool.p]\nalgorithm = \"least-conn\"\nretries = 2\n")
	b.WriteString("[pool.p.health]\ninterval = \"200ms\"\ntimeout = \"100ms\"\nrise = 1\n")
	b.WriteString("[pool.p.breaker]\nfailures = 1\ncooldown = \"1h\"\nmax_cooldown = \"1h\"\n")
	for _, a := range backends {
		fmt.Fprintf(&b, "[[pool.p.backend]]\naddr = %q\n", a)
	}
	return b.String()
}

// Twenty reloads under a steady load of new connections and long streams,
// adding and removing a listener and a backend each time: no client is
// refused or fails, every stream comes back byte for byte, and what the
// backends' state was (a manual disable, an open breaker) stays.
func TestReloadUnderLoadLosesNothing(t *testing.T) {
	testnet.CheckLeaks(t)
	b1 := testnet.StartBackend(t, "b1", "")
	b3 := testnet.StartBackend(t, "b3", "")
	b4 := testnet.StartBackend(t, "b4", "")
	// Three free ports (distinct: FreePort never hands one out twice
	// while a test holds it); dead refuses, its breaker opens on the
	// first dial.
	front, extra, dead := testnet.FreeAddr(t), testnet.FreeAddr(t), testnet.FreeAddr(t)
	base := []string{b1.Addr, dead, b3.Addr}
	var path string // set by startFile below
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, path := startFile(t, reloadConfig(front, extra, false, base))

	// State to carry: b1 disabled by an operator, the dead backend's
	// breaker open.
	p := in.livePools()[0]
	if err := p.Disable(context.Background(), p.Backends()[0]); err != nil {
		t.Fatal(err)
	}
	deadB := p.Backends()[1]
	p.EndDial(p.BeginDial(deadB, false), dialer.Failure)
	testnet.Eventually(t, "the dead backend's breaker to open", func() bool { return deadB.Breaker().Open })
	openGen := deadB.Breaker().Generation

	var failures atomic.Int64
	var firstErr atomic.Value
	fail := func(err error) {
		if failures.Add(1) == 1 {
			firstErr.Store(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	// New connections, one after another, on two clients.
	var hellos atomic.Int64
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := testnet.Hello(front, ""); err != nil {
					fail(fmt.Errorf("new connection: %w", err))
					return
				}
				hellos.Add(1)
			}
		})
	}
	// Long streams: each sends 4 MiB in pieces across reloads and checks
	// the echo.
	var streams atomic.Int64
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := echoStream(front, 4<<20); err != nil {
					fail(err)
					return
				}
				streams.Add(1)
			}
		})
	}

	for i := range 20 {
		backends := base
		if i%2 == 0 {
			backends = append(append([]string(nil), base...), b4.Addr)
		}
		write(reloadConfig(front, extra, i%2 == 0, backends))
		res, errs := in.reload()
		if len(errs) > 0 {
			t.Fatalf("reload %d: %v", i, errs)
		}
		if want := map[bool]int{true: 1, false: 0}[i%2 == 0]; res.Added != want {
			t.Fatalf("reload %d added %d listeners, want %d", i, res.Added, want)
		}
		if i%2 == 0 {
			if tag, err := testnet.Hello(extra, ""); err != nil || (tag != "b3" && tag != "b4") {
				t.Fatalf("reload %d: the added listener answered %q, %v", i, tag, err)
			}
		}
		time.Sleep(50 * time.Millisecond) // let the load run between reloads
	}
	testnet.Eventually(t, "a few long streams to complete", func() bool { return streams.Load() >= 3 || failures.Load() > 0 })
	close(stop)
	wg.Wait()
	if n := failures.Load(); n > 0 {
		t.Fatalf("%d clients failed across reloads; first: %v", n, firstErr.Load())
	}
	t.Logf("%d new connections and %d 4 MiB streams across 20 reloads", hellos.Load(), streams.Load())

	p = in.livePools()[0]
	byAddr := map[string]*pool.Backend{}
	for _, b := range p.Backends() {
		byAddr[b.Addr] = b
	}
	if !byAddr[b1.Addr].Breaker().Disabled {
		t.Error("the disabled backend was enabled by the reloads")
	}
	if st := byAddr[dead].Breaker(); !st.Open || st.Generation != openGen {
		t.Errorf("the dead backend's breaker after 20 reloads: %+v, want open at generation %d", st, openGen)
	}
	if _, err := net.DialTimeout("tcp", extra, time.Second); err == nil {
		t.Error("the removed listener still accepts")
	}
}

// echoStream sends n random bytes through addr to an echo backend in
// pieces while reading the echo, and checks every byte.
func echoStream(addr string, n int) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("stream dial: %w", err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		return fmt.Errorf("stream tag: %w", err)
	}
	data := make([]byte, n)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		for off := 0; off < n; off += 64 << 10 {
			if _, err := c.Write(data[off:min(off+64<<10, n)]); err != nil {
				errc <- err
				return
			}
			time.Sleep(time.Millisecond) // spread the stream over the reloads
		}
		errc <- c.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(r)
	if werr := <-errc; werr != nil {
		return fmt.Errorf("stream write: %w", werr)
	}
	if err != nil {
		return fmt.Errorf("stream read after %d bytes: %w", len(got), err)
	}
	if !bytes.Equal(got, data) {
		return fmt.Errorf("stream came back as %d bytes, different from the %d sent", len(got), n)
	}
	return nil
}

// startFile starts an instance on the configuration text written to a
// file of its own, as l4lb run does, and shuts it down at the end.
func startFile(t *testing.T, text string) (*instance, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "l4lb.toml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	in, err := start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	in.useFile(path)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		in.shutdown(ctx)
	})
	return in, path
}
