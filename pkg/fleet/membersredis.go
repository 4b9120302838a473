package fleet

import (
	"context"
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

// decodeMemberDoc reads "VERSION DOC", the value of a document key.
func decodeMemberDoc(key, v string) (memberDoc, error) {
	ver, doc, ok := strings.Cut(v, " ")
	n, err := strconv.ParseUint(ver, 10, 64)
	if !ok || err != nil || n == 0 {
		return memberDoc{}, fmt.Errorf("%w: %s holds %.40q, not \"VERSION DOCUMENT\"", errBadReply, key, v)
	}
	return memberDoc{version: n, doc: []byte(doc)}, nil
}

// membersLua reads the version of a document key's value (0: absent).
const membersLua = `
local function version(v)
  if not v then return 0 end
  return tonumber(string.match(v, '^(%d+) ')) or 0
end
`

// putMembersScript: KEYS document, index; ARGV pool, floor, document,
// base. A document Redis holds at a version above base (the one the new
// document was made from) was written by another instance meanwhile: the
// write is refused with "CHANGED <version>", so that no change made on an
// older list undoes it. Below base, Redis lost its data and is behind.
// The new version is above both the one Redis holds and floor (the
// highest this instance knows: Redis may have lost its data), and at
// least the server's clock in milliseconds, so that a write made after
// Redis was emptied still orders after every write made before it, which
// instances may write back (restoreMembersScript). Answers the version.
var putMembersScript = rueidis.NewLuaScript(membersLua + `
local cur = version(redis.call('GET', KEYS[1]))
if cur > tonumber(ARGV[4]) then
  return redis.error_reply('CHANGED ' .. string.format('%.0f', cur))
end
local v = math.max(cur, tonumber(ARGV[2])) + 1
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if now > v then v = now end
v = string.format('%.0f', v)
redis.call('SET', KEYS[1], v .. ' ' .. ARGV[3])
redis.call('SADD', KEYS[2], ARGV[1])
return v
`)

// restoreMembersScript: KEYS document, index; ARGV pool, version,
// document. Writes the document back at its version if Redis holds an
// older one (or none: it lost its data); answers {wrote (0/1), what Redis
// holds after}.
var restoreMembersScript = rueidis.NewLuaScript(membersLua + `
local cur = redis.call('GET', KEYS[1])
local wrote = 0
if version(cur) < tonumber(ARGV[2]) then
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
	return decodeMembersReply(key, r.client.DoCache(ctx, r.client.B().Get().Key(key).Cache(), r.cacheTTL))
}

// readMembersFresh reads a pool's document from the server, past the
// client-side cache, whose copy may not have been invalidated yet: after
// a write refused because the document changed, the next change must be
// made on what the server holds.
func (r *redisStore) readMembersFresh(ctx context.Context, pool string) (memberDoc, error) {
	key := r.ks.members(pool)
	return decodeMembersReply(key, r.client.Do(ctx, r.client.B().Get().Key(key).Build()))
}

func decodeMembersReply(key string, res rueidis.RedisResult) (memberDoc, error) {
	v, err := res.ToString()
	if rueidis.IsRedisNil(err) {
		return memberDoc{}, nil
	}
	if err != nil {
		return memberDoc{}, err
	}
	return decodeMemberDoc(key, v)
}

// readMemberPools reads the index through the client-side cache, so that
// a pool's first document anywhere in the fleet is told to this instance.
func (r *redisStore) readMemberPools(ctx context.Context) ([]string, error) {
	return r.client.DoCache(ctx, r.client.B().Smembers().Key(r.ks.membersIndex()).Cache(), r.cacheTTL).AsStrSlice()
}

// putMembers replaces a pool's document and answers its new version.
func (r *redisStore) putMembers(ctx context.Context, pool string, doc []byte, floor, base uint64) (uint64, error) {
	key := r.ks.members(pool)
	v, err := putMembersScript.Exec(ctx, r.client, []string{key, r.ks.membersIndex()},
		[]string{pool, strconv.FormatUint(floor, 10), string(doc), strconv.FormatUint(base, 10)}).ToString()
	if err != nil {
		// A CHANGED reply too, which PutMembers reads: as an error reply
		// it keeps the Store with the fleet (unreachable is false).
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the version of %s: %q", errBadReply, key, v)
	}
	return n, nil
}

// changedMembers turns the putMembersScript's CHANGED reply into
// ErrMembersChanged; other errors are as they are.
func changedMembers(err error, base uint64) error {
	rerr, ok := rueidis.IsRedisErr(err)
	if !ok {
		return err
	}
	if ver, changed := strings.CutPrefix(rerr.Error(), "CHANGED "); changed {
		return fmt.Errorf("%w (it is at version %s, the change was made on %d)", ErrMembersChanged, ver, base)
	}
	return err
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
	now, err := decodeMemberDoc(key, v)
	return now, wrote == 1, err
}
