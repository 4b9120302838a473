package main

import (
	"log/slog"
	"os"
	"syscall"
	"testing"
	"time"
)

// An upgrade asked for while connections still come from the previous
// process waits for them; a stop signal meanwhile wins over the upgrade,
// and other signals are ignored until the connections are here.
func TestAdoptionOverBeforeAnUpgrade(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	over := make(chan struct{})
	close(over)
	if s := adoptionOver(over, nil, log); s != nil {
		t.Fatalf("nothing coming: %v, want no wait and no stop", s)
	}

	coming := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	sigs <- syscall.SIGHUP
	sigs <- syscall.SIGTERM
	if s := adoptionOver(coming, sigs, log); s != syscall.SIGTERM {
		t.Fatalf("a SIGTERM while waiting: %v, want it returned", s)
	}
	if len(sigs) != 0 {
		t.Fatalf("%d signals left unread", len(sigs))
	}

	sigs <- syscall.SIGUSR2
	go func() {
		for len(sigs) > 0 { // until adoptionOver has read (and ignored) it
			time.Sleep(time.Millisecond)
		}
		close(coming)
	}()
	if s := adoptionOver(coming, sigs, log); s != nil {
		t.Fatalf("a SIGUSR2 while waiting, then the connections: %v, want no stop", s)
	}
}
