package fleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/rueidis"
)

// memberDoc is one version of a pool's membership document; version 0
// with a nil doc is "none recorded".
type memberDoc struct {
	version uint64
	doc     []byte
}

// A document key's value is "VERSION DOCUMENT", and Go (decodeMemberDoc)
// and the scripts (membersLua's version) must read it alike, or a record
// every instance logs as unreadable is written over by a plain change, or
// a change is acknowledged that no instance takes. The rule, in both:
// VERSION is the decimal digits before the first space, from 1 and without
// leading zeros (so one number has one spelling, and a script's compare
// of values is a compare of versions), and below memberVersionLimit;
// anything else is unreadable.
//
// memberVersionLimit is 2^53: Lua's numbers are doubles, exact up to it,
// so at or past it a script's +1 rounds back to the version it was made
// on. Instances' writes stay far below it (versions are the server's
// clock in ms, or one above the last); only a hand edit gets near it, and
// a record hand-set to exactly 2^53-1 is readable but outranks every
// later write (the next one lands at 2^53, and instances that read it
// write it back over a replacement): DEL the key and restart the
// instances (docs/fleet.md).
const memberVersionLimit = 1 << 53

// decodeMemberDoc reads "VERSION DOC", the value of a document key; a value
// that is not is an unreadableMembers.
func decodeMemberDoc(pool, key, v string) (memberDoc, error) {
	if v == wrongTypeValue {
		return memberDoc{}, &unreadableMembers{pool: pool, key: key, raw: v,
			err: errors.New("it is not a string (Redis answers WRONGTYPE: a hash, list, set or other key was written there)")}
	}
	ver, doc, ok := strings.Cut(v, " ")
	n, err := strconv.ParseUint(ver, 10, 64)
	if !ok || err != nil || n == 0 || ver != strconv.FormatUint(n, 10) || n >= memberVersionLimit {
		return memberDoc{}, &unreadableMembers{pool: pool, key: key, raw: v,
			err: fmt.Errorf("it holds %.40q, not \"VERSION DOCUMENT\" (VERSION a number from 1 to 2^53-1, without leading zeros)", v)}
	}
	return memberDoc{version: n, doc: []byte(doc)}, nil
}

// wrongTypeValue stands, in Go and in the scripts (membersLua's get), for
// the value of a document key that holds another type than a string: a
// record as unreadable as a string of another shape, and replaced the
// same way (SET writes over a key of any type). No readable value starts
// with a NUL. The replacement's compare-and-set is then one of "still of
// another type", whatever the key now holds: no instance writes such a
// key, so it cannot be another instance's replacement.
const wrongTypeValue = "\x00WRONGTYPE"

// ErrMembersUnreadable is wrapped by the error of a read or a write of a
// pool's document when the record Redis holds is one this build cannot
// read: not "VERSION DOCUMENT", or a document Options.CheckMembers
// refuses (edited by hand, truncated, written by another build). No
// write but ReplaceUnreadableMembers goes over it, and the instances keep
// what they last read (members.go).
var ErrMembersUnreadable = errors.New("the fleet's record of the pool's backends is unreadable")

// unreadableMembers is ErrMembersUnreadable for one record: the pool, its
// key, the value Redis holds and why it cannot be read.
type unreadableMembers struct {
	pool, key, raw string
	err            error
}

func (e *unreadableMembers) Error() string {
	return fmt.Sprintf("the fleet's record of pool %s's backends (Redis key %s) is unreadable: %v", e.pool, e.key, e.err)
}

// Unwrap: errBadReply too, so that the Store stays with the fleet
// (unreachable is false): Redis answered.
func (e *unreadableMembers) Unwrap() []error {
	return []error{ErrMembersUnreadable, errBadReply, e.err}
}

// membersLua reads a document key's value (get: wrongTypeValue for a key
// of another type, spelled '\0WRONGTYPE' there, which the replacement
// test's compare of the two proves; any other error is handed back, for
// the script to return as its error reply) and its version (0: absent, or
// not "VERSION DOCUMENT": unreadable, by the rule above memberVersionLimit,
// which decodeMemberDoc follows too), and gives the version of a write
// over one at cur by an instance that knows floor: above both, and at
// least the server's clock in milliseconds, so that a write made after
// Redis was emptied still orders after every write made before it, which
// instances may write back (restoreMembersScript). A floor past the limit
// (no readable version is) counts as none, as an unreadable cur does.
var membersLua = `
local limit = ` + strconv.FormatUint(memberVersionLimit, 10) + `
local function get(key)
  local v = redis.pcall('GET', key)
  if type(v) == 'table' and v.err then
    if string.sub(v.err, 1, 9) == 'WRONGTYPE' then return '\0WRONGTYPE' end
    return nil, v
  end
  return v
end
local function version(v)
  if not v then return 0 end
  local n = tonumber(string.match(v, '^([1-9]%d*) '))
  if not n or n >= limit then return 0 end
  return n
end
local function unreadable(v)
  return v and version(v) == 0
end
local function after(cur, floor)
  if floor >= limit then floor = 0 end
  local v = math.max(cur, floor) + 1
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  if now > v then v = now end
  return string.format('%.0f', v)
end
`

// putMembersScript: KEYS document, index; ARGV pool, floor, document,
// base. A document Redis holds at a version above base (the one the new
// document was made from) was written by another instance meanwhile: the
// write is refused with "CHANGED <version>", so that no change made on an
// older list undoes it. Below base, Redis lost its data and is behind. A
// value that is not "VERSION DOCUMENT" is refused with "UNREADABLE": only
// ReplaceUnreadableMembers writes over it. The new version is after()'s,
// with floor the highest this instance knows (Redis may have lost its
// data). Answers the version.
var putMembersScript = rueidis.NewLuaScript(membersLua + `
local raw, err = get(KEYS[1])
if err then return err end
if unreadable(raw) then
  return redis.error_reply('UNREADABLE')
end
local cur = version(raw)
if cur > tonumber(ARGV[4]) then
  return redis.error_reply('CHANGED ' .. string.format('%.0f', cur))
end
local v = after(cur, tonumber(ARGV[2]))
redis.call('SET', KEYS[1], v .. ' ' .. ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
return v
`)

// replaceMembersScript: KEYS document, index; ARGV pool, the value found
// unreadable, floor, document. Writes the document over that value, and
// only over it: anything else is "CHANGED" (another instance replaced it,
// or wrote a record this build reads). The new version is after()'s.
// Answers the version.
var replaceMembersScript = rueidis.NewLuaScript(membersLua + `
local raw, err = get(KEYS[1])
if err then return err end
if raw ~= ARGV[2] then
  return redis.error_reply('CHANGED ' .. string.format('%.0f', version(raw)))
end
local v = after(version(raw), tonumber(ARGV[3]))
redis.call('SET', KEYS[1], v .. ' ' .. ARGV[4])
redis.call('SADD', KEYS[2], ARGV[1])
return v
`)

// restoreMembersScript: KEYS document, index; ARGV pool, version,
// document. Writes the document back at its version if Redis holds an
// older one (or none: it lost its data), but never over an unreadable
// value; answers {wrote (0/1), what Redis holds after}.
var restoreMembersScript = rueidis.NewLuaScript(membersLua + `
local cur, err = get(KEYS[1])
if err then return err end
local wrote = 0
if not unreadable(cur) and version(cur) < tonumber(ARGV[2]) then
  cur = ARGV[2] .. ' ' .. ARGV[3]
  redis.call('SET', KEYS[1], cur)
  wrote = 1
end
redis.call('SADD', KEYS[2], ARGV[1])
return {wrote, cur}
`)

// readMembers reads a pool's document through the client-side cache: the
// server then tells this instance when another one writes it.
func (r *redisStore) readMembers(ctx context.Context, pool string) (memberDoc, error) {
	key := r.ks.members(pool)
	return decodeMembersReply(pool, key, r.client.DoCache(ctx, r.client.B().Get().Key(key).Cache(), r.cacheTTL))
}

// readMembersFresh reads a pool's document from the server, past the
// client-side cache, whose copy may not have been invalidated yet: after
// a write refused because the document changed, the next change must be
// made on what the server holds.
func (r *redisStore) readMembersFresh(ctx context.Context, pool string) (memberDoc, error) {
	key := r.ks.members(pool)
	return decodeMembersReply(pool, key, r.client.Do(ctx, r.client.B().Get().Key(key).Build()))
}

func decodeMembersReply(pool, key string, res rueidis.RedisResult) (memberDoc, error) {
	v, err := res.ToString()
	if rueidis.IsRedisNil(err) {
		return memberDoc{}, nil
	}
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "WRONGTYPE") {
		v, err = wrongTypeValue, nil
	}
	if err != nil {
		return memberDoc{}, err
	}
	return decodeMemberDoc(pool, key, v)
}

// readMemberPools reads the index through the client-side cache, so that
// a pool's first document anywhere in the fleet is told to this instance.
func (r *redisStore) readMemberPools(ctx context.Context) ([]string, error) {
	return r.client.DoCache(ctx, r.client.B().Smembers().Key(r.ks.membersIndex()).Cache(), r.cacheTTL).AsStrSlice()
}

// putMembers replaces a pool's document and answers its new version.
func (r *redisStore) putMembers(ctx context.Context, pool string, doc []byte, floor, base uint64) (uint64, error) {
	// A CHANGED or UNREADABLE reply is the error, which PutMembers reads:
	// as an error reply it keeps the Store with the fleet (unreachable is
	// false).
	return r.writeMembers(ctx, putMembersScript, pool, doc, strconv.FormatUint(floor, 10), string(doc), strconv.FormatUint(base, 10))
}

// replaceMembers writes doc over raw, the unreadable value of pool's
// document, and answers its version.
func (r *redisStore) replaceMembers(ctx context.Context, pool, raw string, doc []byte, floor uint64) (uint64, error) {
	return r.writeMembers(ctx, replaceMembersScript, pool, doc, raw, strconv.FormatUint(floor, 10), string(doc))
}

// writeMembers runs a script that writes doc as pool's document (KEYS
// document, index; ARGV pool, then args) and answers the version it wrote.
func (r *redisStore) writeMembers(ctx context.Context, script *rueidis.Lua, pool string, doc []byte, args ...string) (uint64, error) {
	key := r.ks.members(pool)
	v, err := script.Exec(ctx, r.client, []string{key, r.ks.membersIndex()}, append([]string{pool}, args...)).ToString()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the version of %s: %q", errBadReply, key, v)
	}
	if n >= memberVersionLimit {
		// Written over a hand-edited record at 2^53-1: no instance takes
		// it, so the change is not acknowledged, and the record is one to
		// replace.
		return 0, &unreadableMembers{pool: pool, key: key, raw: v + " " + string(doc),
			err: fmt.Errorf("the change was written at version %s, past the last one instances read (2^53-1): the record or copy it was made on was at 2^53-1, which no instance writes", v)}
	}
	return n, nil
}

// changedMembers turns the putMembersScript's CHANGED reply into
// ErrMembersChanged; other errors are as they are.
func changedMembers(err error, base uint64) error {
	if ver, changed := scriptRefusal(err, "CHANGED "); changed {
		return fmt.Errorf("%w (it is at version %s, the change was made on %d)", ErrMembersChanged, ver, base)
	}
	return err
}

// scriptRefusal reports whether err is a script's error reply that begins
// with code, and what follows it.
func scriptRefusal(err error, code string) (rest string, ok bool) {
	rerr, isRedis := rueidis.IsRedisErr(err)
	if !isRedis {
		return "", false
	}
	return strings.CutPrefix(rerr.Error(), code)
}

// restoreMembers writes d back where Redis holds an older version of the
// pool's document, and answers the one it holds after and whether it was
// d's write.
func (r *redisStore) restoreMembers(ctx context.Context, pool string, d memberDoc) (memberDoc, bool, error) {
	key := r.ks.members(pool)
	arr, err := restoreMembersScript.Exec(ctx, r.client, []string{key, r.ks.membersIndex()},
		[]string{pool, strconv.FormatUint(d.version, 10), string(d.doc)}).ToArray()
	if err != nil {
		return memberDoc{}, false, err
	}
	if len(arr) != 2 {
		return memberDoc{}, false, fmt.Errorf("%w: restore of %s answered %d values, want 2", errBadReply, key, len(arr))
	}
	wrote, err := arr[0].AsInt64()
	if err != nil {
		return memberDoc{}, false, fmt.Errorf("%w: restore of %s: %w", errBadReply, key, err)
	}
	v, err := arr[1].ToString()
	if err != nil {
		return memberDoc{}, false, fmt.Errorf("%w: restore of %s: %w", errBadReply, key, err)
	}
	now, err := decodeMemberDoc(pool, key, v)
	return now, wrote == 1, err
}
