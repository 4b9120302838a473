package e2e

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/l4lb/l4lb/internal/e2eutil"
	"github.com/l4lb/l4lb/internal/testnet"
)

// Issue 27's headline, with the real binary: 1,000 long-lived connections
// sending a sequence-numbered message every 100 ms, and 20 bulk streams
// both ways, across 10 upgrades in a row with shutdown_timeout = "2s". An
// l4lb that drains instead of handing over resets every connection 2 s
// after each upgrade; one that hands over loses, doubles, reorders and
// resets nothing, each old process is gone within 5 s, every connection is
// echoed by the new process once the old one has gone, and every stream
// comes back byte for byte. The longest pause a connection saw is
// reported.
func TestHandoverLongLivedConnections(t *testing.T) {
	const conns, streams, upgrades = 1000, 20, 10
	testnet.CheckLeaks(t)
	// The test holds both ends of every connection.
	needNofile(t, 2*(conns+streams)+512)
	b := testnet.StartBackend(t, "b", "")
	path, listen, _ := e2eutil.WriteConfig(t, "", []string{b.Addr}, "[global]\nshutdown_timeout = \"2s\"")
	chain := startChain(t, l4lbBin, path)

	fleet := startSeqFleet(t, listen, "b", conns, 100*time.Millisecond)
	bulk := startBulkStreams(t, listen, "b", streams)
	fleet.waitEchoedSince(t, time.Now(), "before the upgrades")
	fleet.resetPauses() // the upgrades' pauses, not the start's
	var exits []time.Duration
	for i := 1; i <= upgrades; i++ {
		old, served := chain.upgrade(t)
		gone := waitOldGone(t, old, served)
		exits = append(exits, gone.Sub(served).Round(time.Millisecond))
		what := fmt.Sprintf("after upgrade %d (old pid %d gone)", i, old)
		fleet.waitEchoedSince(t, gone, what)
		bulk.waitFlowingSince(t, gone, what)
	}
	fleet.finish(t)
	bulk.finish(t)
	checkHandedOver(t, chain.logText(), upgrades, conns+streams, 0)
	pause, id := fleet.longestPause()
	t.Logf("%d messages echoed in order over %d connections and %d MB byte-exact over %d streams, across %d upgrades; old processes gone %v after their successors served; longest pause between two echoes during the upgrades %v (connection %d)",
		fleet.messages(), conns, bulk.bytes()>>20, streams, upgrades, exits, pause.Round(time.Millisecond), id)
}

// bulkSet is bulk streams through l4lb to an echo backend: each writes
// random chunks (up to 64 KiB every 100 ms) until told to stop, then
// half-closes; what comes back must be what it sent, byte for byte
// (length and SHA-256), then EOF.
type bulkSet struct {
	streams []*bulkStream
	halt    func()
	fails   failures
}

type bulkStream struct {
	id       int
	c        *net.TCPConn
	sent     atomic.Int64
	got      atomic.Int64
	lastRead atomic.Int64 // UnixNano of the latest read
	sentHash hash.Hash    // the writer's until wrote is closed
	wrote    chan struct{}
	ended    chan struct{}
	failOnce
}

// bulkChunk is the largest write; bulkEvery the time between two.
const (
	bulkChunk = 64 << 10
	bulkEvery = 100 * time.Millisecond
	bulkMax   = 64 << 20 // a stream's bound: it stops writing there
)

func startBulkStreams(t *testing.T, addr, tag string, n int) *bulkSet {
	t.Helper()
	stop := make(chan struct{})
	set := &bulkSet{halt: sync.OnceFunc(func() { close(stop) })}
	t.Cleanup(func() {
		set.halt()
		for _, s := range set.streams {
			s.c.Close()
			<-s.wrote
			<-s.ended
		}
	})
	for i := range n {
		c := dialTCP(t, addr)
		greeting := make([]byte, len(tag)+1)
		if _, err := io.ReadFull(c, greeting); err != nil || string(greeting) != tag+"\n" {
			t.Fatalf("stream %d: greeting %q, %v", i, greeting, err)
		}
		s := &bulkStream{id: i, c: c, sentHash: sha256.New(), wrote: make(chan struct{}), ended: make(chan struct{})}
		set.streams = append(set.streams, s)
		go s.write(stop, &set.fails)
		go s.read(&set.fails)
	}
	return set
}

func (s *bulkStream) write(stop <-chan struct{}, f *failures) {
	defer close(s.wrote)
	rng := rand.New(rand.NewPCG(uint64(s.id), 27))
	src := make([]byte, 1<<20)
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	for s.sent.Load() < bulkMax {
		select {
		case <-stop:
			s.halfClose(f)
			return
		case <-time.After(bulkEvery):
		}
		off := rng.IntN(len(src) - bulkChunk)
		chunk := src[off : off+1+rng.IntN(bulkChunk)]
		if _, err := s.c.Write(chunk); err != nil {
			s.fail(f, failureKind(err), "stream %d: write after %d bytes: %v", s.id, s.sent.Load(), err)
			return
		}
		s.sentHash.Write(chunk)
		s.sent.Add(int64(len(chunk)))
	}
	s.halfClose(f)
}

func (s *bulkStream) halfClose(f *failures) {
	if err := s.c.CloseWrite(); err != nil {
		s.fail(f, failureKind(err), "stream %d: half-close: %v", s.id, err)
	}
}

func (s *bulkStream) read(f *failures) {
	defer close(s.ended)
	got := sha256.New()
	buf := make([]byte, 128<<10)
	for {
		n, err := s.c.Read(buf)
		got.Write(buf[:n])
		s.got.Add(int64(n))
		s.lastRead.Store(time.Now().UnixNano())
		if errors.Is(err, io.EOF) {
			<-s.wrote
			switch sent, back := s.sent.Load(), s.got.Load(); {
			case back != sent:
				s.fail(f, "lost", "stream %d: %d bytes back of %d sent, then EOF", s.id, back, sent)
			case string(got.Sum(nil)) != string(s.sentHash.Sum(nil)):
				s.fail(f, "corrupted", "stream %d: %d bytes back, not the ones sent", s.id, back)
			}
			return
		}
		if err != nil {
			s.fail(f, failureKind(err), "stream %d: read after %d bytes back of %d sent: %v", s.id, s.got.Load(), s.sent.Load(), err)
			return
		}
	}
}

// waitFlowingSince waits until every stream has read bytes after since,
// failing at once when one failed.
func (b *bulkSet) waitFlowingSince(t *testing.T, since time.Time, what string) {
	t.Helper()
	waitHeardSince(t, "every bulk stream to flow "+what, since, b.streams, &b.fails)
}

// finish half-closes every stream and waits for each to end, checked.
func (b *bulkSet) finish(t *testing.T) {
	t.Helper()
	b.halt()
	waitEnded(t, "bulk stream", b.streams, &b.fails)
}

func (s *bulkStream) heard() int64          { return s.lastRead.Load() }
func (s *bulkStream) done() <-chan struct{} { return s.ended }
func (s *bulkStream) progress() string {
	return fmt.Sprintf("%d: %d of %d bytes back", s.id, s.got.Load(), s.sent.Load())
}

// bytes is how many bytes came back over all streams.
func (b *bulkSet) bytes() int64 {
	var n int64
	for _, s := range b.streams {
		n += s.got.Load()
	}
	return n
}
