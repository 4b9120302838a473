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

// putMembersScript: KEYS document, index; ARGV pool, floor, document.
// The new version is above both the one Redis holds and floor (the
// highest this instance knows: Redis may have lost its data), and at
// least the server's clock in milliseconds, so that a write made after
// Redis was emptied still orders after every write made before it, which
// instances may write back (restoreMembersScript). Answers the version.
var putMembersScript = rueidis.NewLuaScript(membersLua + `
local v = math.max(version(redis.call('GET', KEYS[1])), tonumber(ARGV[2])) + 1
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
	v, err := r.client.DoCache(ctx, r.client.B().Get().Key(key).Cache(), r.cacheTTL).ToString()
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
func (r *redisStore) putMembers(ctx context.Context, pool string, doc []byte, floor uint64) (uint64, error) {
	key := r.ks.members(pool)
	v, err := putMembersScript.Exec(ctx, r.client, []string{key, r.ks.membersIndex()},
		[]string{pool, strconv.FormatUint(floor, 10), string(doc)}).ToString()
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: the version of %s: %q", errBadReply, key, v)
	}
	return n, nil
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
