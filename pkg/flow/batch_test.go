package flow

import (
	"reflect"
	"testing"
)

// Split moves the refused records with their descriptors, renumbered, and
// leaves the others' descriptors to close; a bad index moves nothing.
func TestSplitMovesRefusedRecordsWithTheirDescriptors(t *testing.T) {
	b := &Batch{}
	rel := func(client string, fds ...int) Relay {
		r := Relay{Client: client, ClientFD: b.AddFD(fds[0]), BackendFD: b.AddFD(fds[1])}
		r.Streams[0].PipeR, r.Streams[0].PipeW = NoFD, NoFD
		r.Streams[1].PipeR, r.Streams[1].PipeW = b.AddFD(fds[2]), b.AddFD(fds[3])
		return r
	}
	b.Relays = append(b.Relays, rel("a", 10, 11, -1, -1), rel("b", 20, 21, 22, 23))
	b.Queued = append(b.Queued, Queued{Client: "q", ClientFD: b.AddFD(30)})
	b.Sessions = append(b.Sessions, Session{Client: "s", FD: b.AddFD(40)})

	refused, taken := b.Split(Refused{Relays: []int{1, 7}, Sessions: []int{0}})
	if !reflect.DeepEqual(taken, []int{10, 11, 30}) {
		t.Errorf("taken descriptors %v, want [10 11 30]", taken)
	}
	if len(refused.Relays) != 1 || len(refused.Sessions) != 1 || len(refused.Queued) != 0 {
		t.Fatalf("refused batch %+v", refused)
	}
	r := refused.Relays[0]
	for _, c := range []struct {
		idx, want int
	}{{r.ClientFD, 20}, {r.BackendFD, 21}, {r.Streams[1].PipeR, 22}, {r.Streams[1].PipeW, 23}, {refused.Sessions[0].FD, 40}} {
		if fd, ok := refused.FD(c.idx); !ok || fd != c.want {
			t.Errorf("index %d names %d (%v), want %d", c.idx, fd, ok, c.want)
		}
	}
	if r.Streams[0].PipeR != NoFD {
		t.Errorf("no pipe became %d", r.Streams[0].PipeR)
	}
	if got := b.FDsOf(Refused{Queued: []int{0}}); !reflect.DeepEqual(got, []int{30}) {
		t.Errorf("FDsOf the queued client: %v", got)
	}
	if n := All(b).Len(); n != b.Len() || n != 4 {
		t.Errorf("All refuses %d of %d", n, b.Len())
	}
	if _, ok := b.FD(99); ok {
		t.Error("an index past the descriptors resolved")
	}
}

// A batch has room until one more record of the largest kind could pass
// a bound.
func TestRoomBounds(t *testing.T) {
	b := &Batch{}
	for b.Room() {
		b.Relays = append(b.Relays, Relay{})
		for range MaxRecordFDs {
			b.AddFD(3)
		}
	}
	if len(b.FDs) > MaxFDs {
		t.Fatalf("%d descriptors in a batch, bound %d", len(b.FDs), MaxFDs)
	}
	b = &Batch{HeldBytes: maxHeld}
	if b.Room() {
		t.Fatal("a batch holding its share of bytes has room")
	}
}

// Halves splits a batch into two whose records and descriptors add up
// to the whole, each record with its own descriptors.
func TestHalvesKeepEveryRecordWithItsDescriptors(t *testing.T) {
	b := &Batch{}
	for i := range 5 {
		r := Relay{Client: string(rune('a' + i)), ClientFD: b.AddFD(100 + i), BackendFD: b.AddFD(200 + i)}
		r.Streams[0].PipeR, r.Streams[0].PipeW, r.Streams[1].PipeR, r.Streams[1].PipeW = NoFD, NoFD, NoFD, NoFD
		b.Relays = append(b.Relays, r)
	}
	b.Sessions = append(b.Sessions, Session{Client: "s", FD: b.AddFD(300)})
	first, second := b.Halves()
	if first.Len()+second.Len() != b.Len() || first.Len() == 0 || second.Len() == 0 {
		t.Fatalf("halves of %d records: %d and %d", b.Len(), first.Len(), second.Len())
	}
	if len(first.FDs)+len(second.FDs) != len(b.FDs) {
		t.Fatalf("descriptors: %d + %d, want %d", len(first.FDs), len(second.FDs), len(b.FDs))
	}
	for _, h := range []*Batch{first, second} {
		for _, r := range h.Relays {
			cl, _ := h.FD(r.ClientFD)
			be, _ := h.FD(r.BackendFD)
			if want := 100 + int(r.Client[0]-'a'); cl != want || be != want+100 {
				t.Errorf("relay %s: descriptors %d, %d; want %d, %d", r.Client, cl, be, want, want+100)
			}
		}
		for _, s := range h.Sessions {
			if fd, _ := h.FD(s.FD); fd != 300 {
				t.Errorf("session: descriptor %d, want 300", fd)
			}
		}
	}
}
