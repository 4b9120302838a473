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
const (
	fieldGen      = "gen"
	fieldOpen     = "open"
	fieldCool     = "cool"
	fieldDisabled = "disabled"
	fieldProbe    = "probe"
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

// breakerKey is the breaker key a Redis key belongs to, and whether it is
// one of ours at all. The field follows the last "}:", so a breaker key
// holding braces of its own still parses.
func (ks keyspace) breakerKey(redisKey string) (string, bool) {
	rest, ok := strings.CutPrefix(redisKey, ks.prefix+"{")
	if !ok {
		return "", false
	}
	i := strings.LastIndex(rest, "}:")
	if i < 0 {
		return "", false
	}
	return rest[:i], true
}
