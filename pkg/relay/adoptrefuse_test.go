package relay

import (
	"testing"

	"golang.org/x/sys/unix"

	"github.com/l4lb/l4lb/internal/testnet"
	"github.com/l4lb/l4lb/pkg/flow"
)

// A relay record whose stream 0 carries a pipe with bytes and whose stream
// 1 names a pipe descriptor the batch does not carry: AdoptRelay refuses it
// (ErrAdoptRecord), and must leave nothing of it counted on this loop.
func TestARefusedAdoptionLeavesNoPipeCounted(t *testing.T) {
	k := testnet.StartTaker(t)
	h := newHarness(t, harnessOpts{fronts: []frontSpec{{name: "p", backends: []string{k.Addr}}}})
	l := h.loops[0]
	cl, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	be, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	var pfd [2]int
	if err := unix.Pipe2(pfd[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	if _, err := unix.Write(pfd[1], []byte("held")); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, fd := range []int{cl, be, pfd[0], pfd[1]} {
			unix.Close(fd)
		}
	}()
	b := &flow.Batch{}
	f := h.front("p").Front
	p := f.Pool()
	bk := p.At(0)
	r := flow.Relay{Listener: "p", Pool: p.Name, Backend: bk.ID, Client: "127.0.0.1:1000",
		ClientFD: b.AddFD(cl), BackendFD: b.AddFD(be)}
	r.Streams[0] = flow.Stream{PipeR: b.AddFD(pfd[0]), PipeW: b.AddFD(pfd[1]), InPipe: 4}
	r.Streams[1] = flow.Stream{PipeR: 99, PipeW: 98, InPipe: 4}
	before := h.pipes.Stats().Open
	var aerr error
	h.on(l, func() { _, aerr = l.AdoptRelay(&r, b, f, p, bk) })
	if aerr == nil {
		t.Fatal("adopted a record with a missing pipe")
	}
	if after := h.pipes.Stats().Open; after != before {
		t.Errorf("pipes open %d before the refused adoption, %d after: stream 0's pipe stays counted", before, after)
	}
}
