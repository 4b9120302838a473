package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"github.com/l4lb/l4lb/internal/testnet"
)

// A pool's record in Redis that this build cannot read (edited by hand,
// truncated, written by another build) is never taken and never written
// over but by the operator's explicit replacement: every instance keeps the
// list it last read, a change fails as unreadable (not as a conflict a
// client would retry, forever: before, every change answered 409), each
// instance logs it once per value, and ReplaceUnreadableMembers ends it.

// logTo is a logger writing to buf.
func logTo(buf *testnet.LogBuffer) *slog.Logger { return slog.New(slog.NewTextHandler(buf, nil)) }

// checkList is cmd/l4lb's CheckMembers: a JSON list of backends.
func checkList(doc []byte) error {
	var list []struct {
		Addr   string `json:"addr"`
		Weight int    `json:"weight"`
	}
	return json.Unmarshal(doc, &list)
}

const unreadableLog = "record of a pool's API-added backends is unreadable"

// membersPair is two Stores (logging to logA and logB) reading documents
// as cmd/l4lb does; A wrote docOne as pool web's, at version good, and B,
// watched by calls, was told of it.
func (h *fleetHarness) membersPair(t *testing.T, logA, logB *testnet.LogBuffer) (a, b *Store, calls *memberCalls, good uint64) {
	t.Helper()
	a = h.store(nil, Options{Logger: logTo(logA), CheckMembers: checkList})
	b = h.store(nil, Options{Logger: logTo(logB), CheckMembers: checkList})
	calls, _ = watchMembers(t, b)
	put(t, a, "web", docOne)
	calls.told(t, "B", "web", 1, docOne)
	good, _ = h.rawMembers("web")
	return a, b, calls, good
}

func TestUnreadableMembersRecordIsKeptOutAndReplacedOnlyOnRequest(t *testing.T) {
	h := newFleet(t)
	var logA, logB testnet.LogBuffer
	a, b, calls, good := h.membersPair(t, &logA, &logB)
	ctx := context.Background()
	key := keyspace{prefix: testPrefix}.members("web")

	for i, bad := range []string{
		"not a record", // no version
		strconv.FormatUint(good+1000, 10) + ` [{"addr":"10.`, // truncated, at a newer version
		strconv.FormatUint(good+2000, 10) + ` {"v":2}`,       // a document of another shape
		"99999999999999999999 []",                            // a version past uint64
		"0" + strconv.FormatUint(good+3000, 10) + " []",      // a version spelled otherwise
	} {
		if _, err := h.srv.Do("SET", key, bad); err != nil {
			t.Fatal(err)
		}
		testnet.Eventually(t, "B logs the unreadable record "+bad, func() bool { return logB.Count(unreadableLog) == i+1 })
		for range 3 {
			_, _, err := b.MembersAt(ctx, "web")
			if !errors.Is(err, ErrMembersUnreadable) || !strings.Contains(err.Error(), "pool web") || !strings.Contains(err.Error(), key) {
				t.Fatalf("B reads %q: %v, want an unreadable record naming the pool and %s", bad, err, key)
			}
			_, err = a.PutMembers(ctx, "web", []byte(docTwo), good)
			if !errors.Is(err, ErrMembersUnreadable) || errors.Is(err, ErrMembersChanged) {
				t.Fatalf("A writes over %q: %v, want unreadable (and no conflict to retry)", bad, err)
			}
		}
		if v, _ := h.srv.Do("GET", key); v != bad {
			t.Fatalf("redis holds %q, want the unreadable %q untouched", v, bad)
		}
		if n, m := logA.Count(unreadableLog), logB.Count(unreadableLog); n != i+1 || m != i+1 {
			t.Fatalf("logged %d and %d times after %d unreadable values, want once each per value", n, m, i+1)
		}
		if logB.Count("pool=web key="+key+" error=") != i+1 {
			t.Fatal("the log names no pool, key or error")
		}
	}
	if n := calls.count("web"); n != 1 {
		t.Fatalf("B was told of web %d times: an unreadable record reached its watcher", n)
	}
	if d, ok := b.members.known("web"); !ok || string(d.doc) != docOne {
		t.Fatalf("B's copy %q, want the last good %q", d.doc, docOne)
	}

	v, err := a.ReplaceUnreadableMembers(ctx, "web", []byte(docTwo))
	if err != nil {
		t.Fatal(err)
	}
	// Above every copy's version (good): the last value replaced, spelled
	// with a leading zero, has no version at all.
	if rv, doc := h.rawMembers("web"); rv != v || doc != docTwo || v <= good {
		t.Fatalf("redis holds %d %q after the replacement at %d", rv, doc, v)
	}
	calls.told(t, "B", "web", 2, docTwo)
	if _, err := a.ReplaceUnreadableMembers(ctx, "web", []byte(docOne)); !errors.Is(err, ErrMembersReadable) {
		t.Fatalf("a second replacement: %v, want %v", err, ErrMembersReadable)
	}
	put(t, b, "web", docOne) // changes are made as usual again
	calls.told(t, "B", "web", 3, docOne)
}

// The replacement is conditional on the very value found unreadable, and
// a write-back never goes over one.
func TestUnreadableMembersScriptsTouchOnlyWhatTheyWereToldOf(t *testing.T) {
	h := newFleet(t)
	s := h.store(nil, Options{})
	r := s.remote.Load()
	ctx := context.Background()
	key := keyspace{prefix: testPrefix}.members("web")
	if _, err := h.srv.Do("SET", key, "another build's record"); err != nil {
		t.Fatal(err)
	}
	if _, err := r.replaceMembers(ctx, "web", "an earlier value", []byte(docOne), 0); err == nil {
		t.Fatal("replaced a value other than the one found unreadable")
	}
	now, wrote, err := r.restoreMembers(ctx, "web", memberDoc{version: 5, doc: []byte(docOne)})
	if wrote || !errors.Is(err, ErrMembersUnreadable) {
		t.Fatalf("write-back over an unreadable value: wrote %v, %+v, %v", wrote, now, err)
	}
	if v, _ := h.srv.Do("GET", key); v != "another build's record" {
		t.Fatalf("redis holds %q", v)
	}
}

// A document key of another type than a string (a hash written there by
// hand or by another program) is an unreadable record like any other:
// kept out, refused to plain writes and write-backs as unreadable (before,
// every read and write failed with Redis's WRONGTYPE, which the API
// answered as the store being unavailable, and no replacement could end
// it), and replaced on request.
func TestMembersKeyOfAnotherTypeIsAnUnreadableRecord(t *testing.T) {
	h := newFleet(t)
	var logA, logB testnet.LogBuffer
	a, b, calls, good := h.membersPair(t, &logA, &logB)
	ctx := context.Background()
	key := keyspace{prefix: testPrefix}.members("web")
	// At once: between a DEL and an HSET, an instance would write its
	// copy back (Redis looks emptied).
	if _, err := h.srv.Do("EVAL", "redis.call('DEL', KEYS[1]); return redis.call('HSET', KEYS[1], 'addr', '10.0.0.1:80')", "1", key); err != nil {
		t.Fatal(err)
	}
	testnet.Eventually(t, "B logs the record of another type", func() bool { return logB.Count(unreadableLog) == 1 })
	if !strings.Contains(logB.String(), "WRONGTYPE") {
		t.Errorf("the log does not say the key is of another type:\n%s", logB.String())
	}
	_, _, err := b.MembersAt(ctx, "web")
	if !errors.Is(err, ErrMembersUnreadable) || !strings.Contains(err.Error(), key) || !strings.Contains(err.Error(), "not a string") {
		t.Fatalf("B reads a hash: %v, want an unreadable record naming %s and what it holds", err, key)
	}
	if _, err := a.PutMembers(ctx, "web", []byte(docTwo), good); !errors.Is(err, ErrMembersUnreadable) {
		t.Fatalf("A writes over a hash: %v, want unreadable", err)
	}
	r := a.remote.Load()
	if _, wrote, err := r.restoreMembers(ctx, "web", memberDoc{version: good + 1, doc: []byte(docOne)}); wrote || !errors.Is(err, ErrMembersUnreadable) {
		t.Fatalf("write-back over a hash: wrote %v, %v", wrote, err)
	}
	if typ, _ := h.srv.Do("TYPE", key); typ != "hash" {
		t.Fatalf("the key is a %v after refused writes, want the hash untouched", typ)
	}
	if d, ok := b.members.known("web"); !ok || string(d.doc) != docOne {
		t.Fatalf("B's copy %q, want the last good %q", d.doc, docOne)
	}

	v, err := a.ReplaceUnreadableMembers(ctx, "web", []byte(docTwo))
	if err != nil {
		t.Fatal(err)
	}
	if rv, doc := h.rawMembers("web"); rv != v || doc != docTwo {
		t.Fatalf("redis holds %d %q after the replacement at %d", rv, doc, v)
	}
	calls.told(t, "B", "web", 2, docTwo)
}
