package fleet

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// Go and the scripts must read a record's version alike (the rule above
// memberVersionLimit): where they differ, a record every instance logged
// as unreadable is written over by a plain change, or a change is
// acknowledged that no instance ever takes. These were found in review.

// A version with a leading zero is unreadable to Go; the put script read
// it as a number, so a change whose base was at or above it wrote over a
// record no operator had chosen to replace.
func TestMembersVersionWithALeadingZeroIsUnreadableToTheScriptsToo(t *testing.T) {
	h := newFleet(t)
	var logA testnet.LogBuffer
	a := h.store(nil, Options{Logger: logTo(&logA), CheckMembers: checkList})
	ctx := context.Background()
	put(t, a, "web", docOne)
	good, _ := h.rawMembers("web")
	key := keyspace{prefix: testPrefix}.members("web")
	bad := "0" + strconv.FormatUint(good, 10) + " " + docOne
	if _, err := h.srv.Do("SET", key, bad); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "A logs the unreadable record", func() bool { return logA.Count(unreadableLog) == 1 })
	if _, _, err := a.MembersAt(ctx, "web"); !errors.Is(err, ErrMembersUnreadable) {
		t.Fatalf("MembersAt: %v, want unreadable", err)
	}
	_, err := a.PutMembers(ctx, "web", []byte(docTwo), good)
	if v, _ := h.srv.Do("GET", key); v != bad || !errors.Is(err, ErrMembersUnreadable) {
		t.Fatalf("PutMembers over the unreadable %q: err %v, redis now holds %q (want ErrMembersUnreadable and the record untouched)", bad, err, v)
	}
	if _, err := a.ReplaceUnreadableMembers(ctx, "web", []byte(docTwo)); err != nil {
		t.Fatalf("the replace route over it: %v", err)
	}
}

// A version Go reads (it fits a uint64) but a script cannot count exactly
// (2^53 and past, where Lua's doubles round +1 back): every write over it
// got that same version, which no instance took, and PutMembers answered
// success; the record being readable, the replace route refused too. It
// is unreadable now: a change fails at once, the replace ends it, and the
// other instance follows the replacement.
func TestMembersVersionPastWhatLuaCountsIsUnreadable(t *testing.T) {
	for _, ver := range []string{
		strconv.FormatUint(memberVersionLimit, 10), // 2^53: +1 rounds back to it
		"18000000000000000000",                     // fits a uint64
	} {
		t.Run(ver, func(t *testing.T) {
			h := newFleet(t)
			a, _, calls, good := h.membersPair(t, new(testnet.LogBuffer), new(testnet.LogBuffer))
			ctx := context.Background()
			key := keyspace{prefix: testPrefix}.members("web")
			bad := ver + " " + docOne
			if _, err := h.srv.Do("SET", key, bad); err != nil {
				t.Fatal(err)
			}
			testnet.Eventually(t, "A reads the record as unreadable", func() bool {
				_, _, err := a.MembersAt(ctx, "web")
				return errors.Is(err, ErrMembersUnreadable)
			})
			if _, err := a.PutMembers(ctx, "web", []byte(docTwo), good); !errors.Is(err, ErrMembersUnreadable) {
				t.Fatalf("PutMembers over version %s: %v, want unreadable", ver, err)
			}
			if v, _ := h.srv.Do("GET", key); v != bad {
				t.Fatalf("redis holds %q, want the unreadable %q untouched", v, bad)
			}
			v, err := a.ReplaceUnreadableMembers(ctx, "web", []byte(docTwo))
			if err != nil {
				t.Fatalf("the replace route: %v", err)
			}
			if v >= memberVersionLimit || v <= good {
				t.Fatalf("replaced at version %d, want one above %d and below 2^53", v, good)
			}
			calls.told(t, "B", "web", 2, docTwo)
		})
	}
}

// The last version a script counts exactly (2^53-1, only ever set by
// hand) is readable, but a write over it reaches 2^53, which no instance
// would take: PutMembers does not acknowledge it.
func TestMembersWriteAtTheLastCountableVersionIsNotAcknowledged(t *testing.T) {
	h := newFleet(t)
	a := h.store(nil, Options{CheckMembers: checkList})
	ctx := context.Background()
	key := keyspace{prefix: testPrefix}.members("web")
	last := uint64(memberVersionLimit - 1)
	if _, err := h.srv.Do("SET", key, strconv.FormatUint(last, 10)+" "+docOne); err != nil {
		t.Fatal(err)
	}
	if _, v, err := a.MembersAt(ctx, "web"); err != nil || v != last {
		t.Fatalf("MembersAt: version %d, %v; want %d, readable", v, err, last)
	}
	if v, err := a.PutMembers(ctx, "web", []byte(docTwo), last); !errors.Is(err, ErrMembersUnreadable) {
		t.Fatalf("PutMembers at 2^53-1: version %d, %v; want unreadable", v, err)
	}
	testnet.Eventually(t, "the record it left is unreadable", func() bool {
		_, _, err := a.MembersAt(ctx, "web")
		return errors.Is(err, ErrMembersUnreadable)
	})
}

// cmd/l4lb's base of a change moves only when it reads a record, and an
// unreadable one kept it from reading: a Store that knows a newer copy
// than that base answered "changed meanwhile" before asking Redis, never
// "unreadable", and the change was retried 8 times and refused (409), the
// very behaviour the unreadable rule ends. Now the server is asked, and
// MembersAt hands the caller the copy the Store keeps serving, so its
// base catches up.
func TestMembersStaleBaseOnAnUnreadableRecordFailsAsUnreadable(t *testing.T) {
	h := newFleet(t)
	a := h.store(nil, Options{CheckMembers: checkList})
	ctx := context.Background()
	put(t, a, "web", docOne)
	v1, _ := h.rawMembers("web")
	put(t, a, "web", docTwo) // the store learns v2; the caller's base stays v1
	v2, _ := h.rawMembers("web")
	key := keyspace{prefix: testPrefix}.members("web")
	if _, err := h.srv.Do("SET", key, "another build's record"); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "the record is unreadable", func() bool {
		_, _, err := a.MembersAt(ctx, "web")
		return errors.Is(err, ErrMembersUnreadable)
	})
	_, err := a.PutMembers(ctx, "web", []byte(docOne), v1)
	if !errors.Is(err, ErrMembersUnreadable) || errors.Is(err, ErrMembersChanged) {
		t.Fatalf("PutMembers on a base older than the copy, over an unreadable record: %v, want ErrMembersUnreadable (502), not a conflict to retry", err)
	}
	doc, v, err := a.MembersAt(ctx, "web")
	if !errors.Is(err, ErrMembersUnreadable) || v != v2 || string(doc) != docTwo {
		t.Fatalf("MembersAt of the unreadable record: %q at %d, %v; want the last good copy %q at %d with the error", doc, v, err, docTwo, v2)
	}
}
