package splice

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
)

// A stream detached with bytes held (in its pipe, or copied) and adopted
// by another loop's scratch delivers them first, then the rest, in order;
// its pipe leaves one pool's count and joins the other's.
func TestDetachedStreamDeliversWhatItHeldWhereAdopted(t *testing.T) {
	for _, pooled := range []bool{true, false} {
		name := map[bool]string{true: "spliced", false: "copied"}[pooled]
		t.Run(name, func(t *testing.T) {
			var pool, other *PipePool
			if pooled {
				pool, other = newPool(), newPool()
			}
			r := newRig(t, pool)
			unix.SetsockoptInt(r.dst, unix.SOL_SOCKET, unix.SO_SNDBUF, 64<<10)
			unix.SetsockoptInt(r.out, unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10)
			payload := randomBytes(t, 2<<20)
			writer := r.feed(payload)
			testnet.Eventually(t, "bytes held for a full destination", func() bool {
				r.readable = true
				st, err := r.move(1 << 30)
				if err != nil {
					t.Fatal(err)
				}
				return st == Blocked && r.s.Pending()
			})
			st := r.s.Detach(r.sc)
			if r.s.Pending() || st.Delivered == 0 {
				t.Fatalf("after Detach: pending %v, record %+v", r.s.Pending(), st)
			}
			if pooled {
				r.sc.Pipes.Publish()
				if st.InPipe == 0 || pool.Stats().Busy() != 0 {
					t.Fatalf("detached pipe: %d bytes in it, %d pipes still counted busy", st.InPipe, pool.Stats().Busy())
				}
			} else if len(st.Held) == 0 {
				t.Fatal("copied stream detached with nothing held")
			}

			// The adopting loop.
			sc := NewScratch(other)
			defer sc.Close()
			var s Stream
			if err := s.Adopt(st, sc); err != nil {
				t.Fatal(err)
			}
			if other != nil && other.Stats().Open != 1 {
				t.Fatalf("the adopting pool counts %d pipes, want the adopted one", other.Stats().Open)
			}
			got := make(chan []byte, 1)
			go func() { got <- readAllQuiet(r.out, len(payload)) }()
			for s.Delivered < int64(len(payload)) {
				readable, writable := true, true
				if st, err := s.Move(r.src, r.dst, &readable, &writable, 1<<30, sc); st > Budget || err != nil {
					t.Fatalf("Move: %v, %v", st, err)
				}
				time.Sleep(100 * time.Microsecond)
			}
			s.Release(sc)
			if err := <-writer; err != nil {
				t.Fatal(err)
			}
			if b := <-got; !bytes.Equal(b, payload) {
				t.Fatalf("received %d bytes that differ from the %d sent", len(b), len(payload))
			}
		})
	}
}

// Adopt refuses what Detach never makes, taking nothing.
func TestAdoptRefusesImpossibleStreams(t *testing.T) {
	sc := NewScratch(nil)
	defer sc.Close()
	for _, st := range []flow.Stream{
		{Held: make([]byte, bufferSize+1), PipeR: flow.NoFD, PipeW: flow.NoFD},
		{Held: []byte("x"), InPipe: 3, PipeR: 5, PipeW: 6},
		{InPipe: 3, PipeR: flow.NoFD, PipeW: flow.NoFD},
	} {
		var s Stream
		if err := s.Adopt(st, sc); err == nil {
			t.Errorf("Adopt(%+v) took it", st)
		}
	}
}
