package fleet

import "strings"

// The Redis keys of one breaker key K (a pool and a backend identity), with
// the configured prefix P. K sits in a hash tag so that every key of one
// backend lands in one Redis Cluster slot and one script can touch them all.
//
//	P{K}:gen       generation; INCR only, no TTL, never deleted
//	P{K}:open      the open entry "GEN COOLDOWN_MS"; absent while closed
//	P{K}:cool      "1" with a PX TTL: the cooldown left
//	P{K}:disabled  "1" while an operator has the backend disabled
//	P{K}:probe     the probe lock: the owner's token, PX TTL
//	P{K}:votes     the trip quorum's votes: a sorted set of instance names
//	               scored by the Redis server's clock (ms), PX TTL of the window
//	P{K}:drain     the fleet's drain record, "VERSION FLAG DEADLINE_MS TIMEOUT_MS"
//	P{K}:weight    the fleet's weight record, "VERSION FLAG WEIGHT CONFIGURED"
//
// (drainsredis.go has the records' rules.)
const (
	fieldGen      = "gen"
	fieldOpen     = "open"
	fieldCool     = "cool"
	fieldDisabled = "disabled"
	fieldProbe    = "probe"
	fieldVotes    = "votes"
	fieldDrain    = "drain"
	fieldWeight   = "weight"
)

// keyspace builds and parses the Redis keys under one prefix.
type keyspace struct{ prefix string }

func (ks keyspace) key(k, field string) string {
	return ks.prefix + "{" + k + "}:" + field
}

// state are the keys a state script reads and writes, in the order the
// scripts expect them (KEYS[1..4]).
func (ks keyspace) state(k string) []string {
	return []string{ks.key(k, fieldGen), ks.key(k, fieldOpen), ks.key(k, fieldCool), ks.key(k, fieldDisabled)}
}

// voting are state's keys and the votes (KEYS[5]): the keys of the scripts
// that count votes or end them (voteScript, closeScript, mergeScript).
func (ks keyspace) voting(k string) []string {
	return append(ks.state(k), ks.key(k, fieldVotes))
}

// breakerField is the breaker key a Redis key belongs to and the key's
// field, and whether it is one of ours at all. The field follows the last
// "}:", so a breaker key holding braces of its own still parses.
func (ks keyspace) breakerField(redisKey string) (key, field string, ok bool) {
	rest, ok := strings.CutPrefix(redisKey, ks.prefix+"{")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndex(rest, "}:")
	if i < 0 {
		return "", "", false
	}
	return rest[:i], rest[i+2:], true
}

// The Redis keys of the backends operators added through the admin API
// (members.go), one document per pool, with the same prefix P:
//
//	P{members}        a set: the pools that have a document
//	P{members}:POOL   the pool's document, "VERSION DOC"
//
// The hash tag puts the index and every document in one Redis Cluster
// slot, so that one script writes a document and its index entry. A
// breaker key always holds a "/" (pool/backend), so "members" is none.
const membersTag = "{members}"

// membersIndex is the set of the pools that have a document.
func (ks keyspace) membersIndex() string { return ks.prefix + membersTag }

// members is one pool's document.
func (ks keyspace) members(pool string) string { return ks.membersIndex() + ":" + pool }

// membersKey says what a Redis key is to the membership documents: the
// index, a pool's document, or neither.
func (ks keyspace) membersKey(redisKey string) (pool string, index, ok bool) {
	rest, ok := strings.CutPrefix(redisKey, ks.membersIndex())
	switch {
	case !ok:
		return "", false, false
	case rest == "":
		return "", true, true
	}
	if pool, ok = strings.CutPrefix(rest, ":"); !ok {
		return "", false, false
	}
	return pool, false, true
}
