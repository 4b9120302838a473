package fleet

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"
)

// The Redis side of the drains and weights the fleet shares (drains.go).
// Each is one key beside the backend's breaker keys (keys.go: P{K}:drain,
// P{K}:weight), holding "VERSION FLAG A B":
//
//	drain   FLAG 1: drained, A the deadline in Redis's clock (ms since the
//	        epoch, TIME), B the timeout asked for (ms); FLAG 0: undrained
//	weight  FLAG 1: set, A the weight, B the file's weight it replaced;
//	        FLAG 0: reset to the file's weight
//
// No instance deletes one: an undrain and a reset are records too, so a
// key that is absent, or older than an instance's copy, means Redis lost
// it, and the copy is written back (restoreSharedScript). Versions are
// above the one before and at least the server's clock in milliseconds
// when written, as the membership documents' are (putMembersScript), so a
// change made after a loss orders after every copy from before it.
const sharedLua = `
local function version(v)
  if not v then return 0 end
  return tonumber(string.match(v, '^(%d+) ')) or 0
end
local function nowms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function newversion(floor, now)
  local v = math.max(version(redis.call('GET', KEYS[1])), tonumber(floor)) + 1
  if now > v then v = now end
  return string.format('%.0f', v)
end
local function record(flag, a, b, now, isdrain)
  if isdrain == '1' and flag == '1' then a = string.format('%.0f', now + tonumber(a)) end
  return flag .. ' ' .. a .. ' ' .. b
end
`

// writeSharedScript: KEYS record; ARGV floor, flag, a, b, isdrain (for a
// drain, a is the time left to the deadline in ms). Writes a new version;
// answers {value, now_ms}.
var writeSharedScript = rueidis.NewLuaScript(sharedLua + `
local now = nowms()
local v = newversion(ARGV[1], now) .. ' ' .. record(ARGV[2], ARGV[3], ARGV[4], now, ARGV[5])
redis.call('SET', KEYS[1], v)
return {v, string.format('%.0f', now)}
`)

// restoreSharedScript: KEYS record; ARGV version, flag, a, b, isdrain.
// Writes the copy back at its version if Redis holds an older one (or
// none); answers {value held after, now_ms}.
var restoreSharedScript = rueidis.NewLuaScript(sharedLua + `
local now = nowms()
local cur = redis.call('GET', KEYS[1])
if version(cur) < tonumber(ARGV[1]) then
  cur = ARGV[1] .. ' ' .. record(ARGV[2], ARGV[3], ARGV[4], now, ARGV[5])
  redis.call('SET', KEYS[1], cur)
end
return {cur or '', string.format('%.0f', now)}
`)

// mergeDrainScript: KEYS drain record; ARGV floor, left_ms, timeout_ms. A
// drain made while apart, merged back: drained wins, so a record that is
// drained already stays as it is (its deadline too), and any other gets a
// new drained version with the local deadline's time left. Answers
// {value held after, now_ms}.
var mergeDrainScript = rueidis.NewLuaScript(sharedLua + `
local now = nowms()
local cur = redis.call('GET', KEYS[1])
if not cur or not string.match(cur, '^%d+ 1 ') then
  cur = newversion(ARGV[1], now) .. ' ' .. record('1', ARGV[2], ARGV[3], now, '1')
  redis.call('SET', KEYS[1], cur)
end
return {cur, string.format('%.0f', now)}
`)

// rawShared is one record as Redis holds it: its clock is Redis's.
type rawShared struct {
	version uint64
	set     bool
	a, b    int64
}

// decodeShared reads "VERSION FLAG A B"; "" is no record.
func decodeShared(key, v string) (rawShared, error) {
	if v == "" {
		return rawShared{}, nil
	}
	f := strings.Fields(v)
	var n [4]int64
	ok := len(f) == 4
	for i := 0; ok && i < 4; i++ {
		var err error
		n[i], err = strconv.ParseInt(f[i], 10, 64)
		ok = err == nil && n[i] >= 0
	}
	if !ok || n[0] == 0 || n[1] > 1 {
		return rawShared{}, fmt.Errorf("%w: %s holds %.40q, not \"VERSION FLAG A B\"", errBadReply, key, v)
	}
	return rawShared{version: uint64(n[0]), set: n[1] == 1, a: n[2], b: n[3]}, nil
}

// sharedAnswer decodes a script's {value, now_ms}.
func sharedAnswer(key string, rr rueidis.RedisResult) (rawShared, int64, error) {
	arr, err := rr.ToArray()
	if err != nil {
		return rawShared{}, 0, err
	}
	if len(arr) != 2 {
		return rawShared{}, 0, fmt.Errorf("%w: script on %s answered %d values, want 2", errBadReply, key, len(arr))
	}
	v, err := arr[0].ToString()
	if err != nil {
		return rawShared{}, 0, fmt.Errorf("%w: script on %s: %w", errBadReply, key, err)
	}
	nowStr, err := arr[1].ToString()
	if err != nil {
		return rawShared{}, 0, fmt.Errorf("%w: script on %s: %w", errBadReply, key, err)
	}
	now, err := strconv.ParseInt(nowStr, 10, 64)
	if err != nil {
		return rawShared{}, 0, fmt.Errorf("%w: script on %s: time %q", errBadReply, key, nowStr)
	}
	rec, err := decodeShared(key, v)
	return rec, now, err
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

func decimal(n int64) string { return strconv.FormatInt(n, 10) }

// readShared reads a backend's drain and weight records through the
// client-side cache, so the server tells this instance when another one
// writes them; now is Redis's clock in ms, read (uncached) only when the
// deadline of a drain at another version than known needs it.
func (r *redisStore) readShared(ctx context.Context, key string, known uint64) (drain, weight rawShared, now int64, err error) {
	keys := [2]string{r.ks.key(key, fieldDrain), r.ks.key(key, fieldWeight)}
	res := r.client.DoMultiCache(ctx,
		rueidis.CT(r.client.B().Get().Key(keys[0]).Cache(), r.cacheTTL),
		rueidis.CT(r.client.B().Get().Key(keys[1]).Cache(), r.cacheTTL))
	var recs [2]rawShared
	for i, rr := range res {
		v, err := rr.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return rawShared{}, rawShared{}, 0, err
		}
		if recs[i], err = decodeShared(keys[i], v); err != nil {
			return rawShared{}, rawShared{}, 0, err
		}
	}
	if recs[0].set && recs[0].version != known {
		if now, err = r.serverTime(ctx); err != nil {
			return rawShared{}, rawShared{}, 0, err
		}
	}
	return recs[0], recs[1], now, nil
}

// serverTime is Redis's clock, in ms since the epoch.
func (r *redisStore) serverTime(ctx context.Context) (int64, error) {
	t, err := r.client.Do(ctx, r.client.B().Time().Build()).AsStrSlice()
	if err != nil {
		return 0, err
	}
	if len(t) != 2 {
		return 0, fmt.Errorf("%w: TIME answered %d values", errBadReply, len(t))
	}
	s, err1 := strconv.ParseInt(t[0], 10, 64)
	us, err2 := strconv.ParseInt(t[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%w: TIME answered %q", errBadReply, t)
	}
	return s*1000 + us/1000, nil
}

// writeShared writes a new version of one record (field fieldDrain or
// fieldWeight) above floor; for a drain, a is the timeout in ms.
func (r *redisStore) writeShared(ctx context.Context, key, field string, floor uint64, set bool, a, b int64) (rawShared, int64, error) {
	k := r.ks.key(key, field)
	return sharedAnswer(k, writeSharedScript.Exec(ctx, r.client, []string{k},
		[]string{strconv.FormatUint(floor, 10), flag(set), decimal(a), decimal(b), flag(field == fieldDrain)}))
}

// restoreShared writes a copy back where Redis holds an older version;
// for a drain, a is the time left to its deadline in ms.
func (r *redisStore) restoreShared(ctx context.Context, key, field string, rec rawShared) (rawShared, int64, error) {
	k := r.ks.key(key, field)
	return sharedAnswer(k, restoreSharedScript.Exec(ctx, r.client, []string{k},
		[]string{strconv.FormatUint(rec.version, 10), flag(rec.set), decimal(rec.a), decimal(rec.b), flag(field == fieldDrain)}))
}

// mergeDrain writes back a drain made while apart (mergeDrainScript).
func (r *redisStore) mergeDrain(ctx context.Context, key string, floor uint64, left, timeout time.Duration) (rawShared, int64, error) {
	k := r.ks.key(key, fieldDrain)
	return sharedAnswer(k, mergeDrainScript.Exec(ctx, r.client, []string{k},
		[]string{strconv.FormatUint(floor, 10), decimal(max(0, left.Milliseconds())), decimal(timeout.Milliseconds())}))
}
