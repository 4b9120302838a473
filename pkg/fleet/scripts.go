package fleet

import "github.com/redis/rueidis"

// Every transition is one script, so the compare and the set are one atomic
// step on the server and one round trip. KEYS are keyspace.state's: gen,
// open, cool, disabled. Each script answers with the state after it ran,
// as {ok, generation, open, cooldown_ms, cooldown_left_ms, disabled}.
//
// The open entry carries its own generation, so a close or re-open names
// exactly the trip it ends: "compare-and-delete by generation".
const stateLua = `
local function opengen(o)
  if not o then return nil end
  return tonumber(string.match(o, '^(%d+) '))
end
local function state(ok)
  local g = tonumber(redis.call('GET', KEYS[1]) or '0')
  local o = redis.call('GET', KEYS[2])
  local open, cd, left = 0, 0, 0
  if o then
    open = 1
    cd = tonumber(string.match(o, ' (%d+)$'))
    local p = redis.call('PTTL', KEYS[3])
    if p > 0 then left = p end
  end
  return {ok, g, open, cd, left, redis.call('EXISTS', KEYS[4])}
end
local function setcool(ttl)
  if tonumber(ttl) > 0 then
    redis.call('SET', KEYS[3], '1', 'PX', ttl)
  else
    redis.call('DEL', KEYS[3])
  end
end
`

// tripScript: ARGV seen, cooldown_ms, ttl_ms. Opens if closed and the
// generation is still the one the failures were counted in.
var tripScript = rueidis.NewLuaScript(stateLua + `
local g = tonumber(redis.call('GET', KEYS[1]) or '0')
if redis.call('EXISTS', KEYS[2]) == 1 or g ~= tonumber(ARGV[1]) then return state(0) end
g = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], g .. ' ' .. ARGV[2])
setcool(ARGV[3])
return state(1)
`)

// voteScript: KEYS keyspace.voting's (state's and the votes); ARGV seen,
// cooldown_ms, ttl_ms, quorum, window_ms, instance. The trip of a fleet
// with a trip quorum: if the breaker is closed at generation seen, the
// instance's vote is added (or renewed) at the server's time, votes older
// than the window are dropped, and once quorum instances' votes are left
// the breaker opens as tripScript opens it, the votes spent. Below the
// quorum it answers ok 2: voted, nothing opened. Every time is the Redis
// server's clock, the only one that reads it (rule 7); TIME in a script
// needs Redis 5 or later (effects replication).
var voteScript = rueidis.NewLuaScript(stateLua + `
local g = tonumber(redis.call('GET', KEYS[1]) or '0')
if redis.call('EXISTS', KEYS[2]) == 1 or g ~= tonumber(ARGV[1]) then return state(0) end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local window = tonumber(ARGV[5])
redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now - window)
redis.call('ZADD', KEYS[5], now, ARGV[6])
if redis.call('ZCARD', KEYS[5]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[5], window)
  return state(2)
end
redis.call('DEL', KEYS[5])
g = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], g .. ' ' .. ARGV[2])
setcool(ARGV[3])
return state(1)
`)

// closeScript: KEYS keyspace.voting's; ARGV gen. Deletes the open entry
// of exactly that generation and raises the generation. Votes are of one
// closed generation: none are left from before (voteScript spends them at
// the trip), and any that are go with the close.
var closeScript = rueidis.NewLuaScript(stateLua + `
if opengen(redis.call('GET', KEYS[2])) ~= tonumber(ARGV[1]) then return state(0) end
redis.call('INCR', KEYS[1])
redis.call('DEL', KEYS[2], KEYS[3], KEYS[5])
return state(1)
`)

// reopenScript: ARGV gen, cooldown_ms, ttl_ms. Replaces the open entry of
// exactly that generation with the next one.
var reopenScript = rueidis.NewLuaScript(stateLua + `
if opengen(redis.call('GET', KEYS[2])) ~= tonumber(ARGV[1]) then return state(0) end
local g = redis.call('INCR', KEYS[1])
redis.call('SET', KEYS[2], g .. ' ' .. ARGV[2])
setcool(ARGV[3])
return state(1)
`)

// releaseScript: KEYS probe lock, ARGV owner. Only the owner drops it.
var releaseScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// retakeScript: KEYS probe lock, ARGV owner, ttl in ms. Takes the lock
// if it is free or already the owner's (an earlier probe's, under the
// same token), for ttl from now; answers 1 if the owner holds it after.
var retakeScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if v and v ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
`)

// markScript: KEYS the fleet's marker, ARGV a fresh token. Sets the
// marker to the token if it is absent; answers the marker's value.
var markScript = rueidis.NewLuaScript(`
local v = redis.call('GET', KEYS[1])
if v then return v end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
`)

// mergeScript: ARGV local generation, local open (0/1), local cooldown_ms,
// local cooldown_left_ms, local disabled (0/1), mode (mergeMode: apart,
// lost, behind). The reconcile rule (reconcile.go): the generation becomes
// one above both sides; an open entry on either side stays or becomes
// open (Redis's own cooldown is kept when Redis had one); a local disable
// is added, never an enable. A key not decided on locally is merged only
// where Redis is behind the local copy (lost: or lacks its disable).
// KEYS are keyspace.voting's: a merge raises the generation, so the votes
// of the one before go.
var mergeScript = rueidis.NewLuaScript(stateLua + `
local rg = tonumber(redis.call('GET', KEYS[1]) or '0')
local lg = tonumber(ARGV[1])
if ARGV[6] == 'behind' and rg >= lg then
  return state(0)
end
if ARGV[6] == 'lost' and rg >= lg and (ARGV[5] == '0' or redis.call('EXISTS', KEYS[4]) == 1) then
  return state(0)
end
local g = math.max(rg, lg) + 1
redis.call('SET', KEYS[1], g)
redis.call('DEL', KEYS[5])
local o = redis.call('GET', KEYS[2])
if o then
  redis.call('SET', KEYS[2], g .. ' ' .. string.match(o, ' (%d+)$'))
elseif ARGV[2] == '1' then
  redis.call('SET', KEYS[2], g .. ' ' .. ARGV[3])
  setcool(ARGV[4])
end
if ARGV[5] == '1' then redis.call('SET', KEYS[4], '1') end
return state(1)
`)
