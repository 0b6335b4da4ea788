package redislock

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// The scripts. Release and extend compare the token and act in one atomic
// step (the seed's bare DELETE removed whoever held the key by then). Redis
// 8.4's DELEX IFEQ and SET IFEQ would do the compare-and-delete without Lua,
// but a release here also hands the key to the longest waiter and mints its
// fence in the same step, which no single command does; and Redis 7 has
// neither. Every script touches only the keys of one lock (keysFor), which
// share a hash slot, so they run unchanged on Redis Cluster.
//
// The hold is a hash: t token, p its first 6 characters, f fence, o owner,
// s granted at (server ms), c the holder's Locker channel (for hand-over and
// revocation notices), e when its TTL runs out (server ms, set with every
// PEXPIRE): a monitor reads a hold with one HMGET in a pipeline, without a
// PTTL and without the whole token (a capability) leaving Redis.

// prelude defines what the scripts that take KEYS = keyset.all() share.
// Every redis.call costs a script a few µs (more than the command itself
// costs a client), and the release's call count is the hand-over's Redis
// time: so the clock is read only when a grant or a waiter needs it, the
// queue's head is popped (ZPOPMIN) rather than read and removed, the fence
// counter is swapped in one SET ... GET, and a hand-over overwrites the
// hold's fields in place (grant writes every one) instead of deleting it.
var prelude = `
local K, Q, W, F = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local claimms = ` + strconv.FormatInt(ms(HandOverTTL), 10) + `
local nowus, nowms
local function clock()
  if not nowus then
    local t = redis.call('TIME')
    nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
    nowms = math.floor(nowus / 1000)
  end
end

-- A fence is strictly above the slot's last one and never below the
-- server clock in microseconds: a counter lost to a failover or a flush
-- does not hand out old numbers again. The clock is almost always ahead
-- of the counter, so one SET ... GET both reads the last fence and writes
-- the new one; a second SET corrects it when it was not.
local function nextfence()
  clock()
  local f = nowus
  local last = tonumber(redis.call('SET', F, string.format('%d', f), 'GET') or '0')
  if last >= f then
    f = last + 1
    redis.call('SET', F, string.format('%d', f))
  end
  return string.format('%d', f)
end

-- grant writes every field of the hold (so it may overwrite another
-- token's hold in place) and sets its expiry.
local function grant(tok, ttl, owner, ch)
  local f = nextfence()
  redis.call('HSET', K, 't', tok, 'p', string.sub(tok, 1, 6), 'f', f, 'o', owner,
    's', string.format('%d', nowms), 'c', ch, 'e', string.format('%d', nowms + ttl))
  redis.call('PEXPIRE', K, ttl)
  return f
end

local function dequeue(tok)
  redis.call('ZREM', Q, tok)
  redis.call('HDEL', W, tok)
end

-- pophead takes the longest-waiting registration still alive off the
-- queue; dead ones (their waiter stopped renewing) are dropped on the way,
-- at most 100 a run (a script blocks Redis while it runs). When it stops
-- there with registrations left, it returns nil and sets cut: one of them
-- may be alive, so the key is the queue's, and only a waiter's own poll,
-- which drops 100 more, takes it.
local cut = false
local function pophead()
  for _ = 1, 100 do
    local h = redis.call('ZPOPMIN', Q)[1]
    if not h then return nil end
    local reg = redis.call('HGET', W, h)
    redis.call('HDEL', W, h)
    if reg then
      local dl, ttl, ch, owner = string.match(reg, '^(%d+) (%d+) (%S+) (.*)$')
      clock()
      if dl and tonumber(dl) >= nowms then return h, ttl, ch, owner end
    end
  end
  cut = redis.call('EXISTS', Q) == 1
  return nil
end

-- handover gives the key to the popped head h, tells it at once, and
-- returns the grant's fence. The grant lasts only the claim (HandOverTTL,
-- or the waiter's TTL if shorter): the waiter takes it up, which extends
-- it to its TTL, so a waiter that died while queued keeps the key no
-- longer.
local function handover(h, ttl, ch, owner)
  local claim = math.min(tonumber(ttl), claimms)
  local f = grant(h, claim, owner, ch)
  redis.call('PUBLISH', ch, 'g ' .. h .. ' ' .. f .. ' ' .. claim)
  return f
end

-- free ends the current hold: the key goes to the longest live waiter
-- (returns 1), or is deleted (returns 0).
local function free()
  local h, ttl, ch, owner = pophead()
  if not h then
    redis.call('DEL', K)
    return 0
  end
  handover(h, ttl, ch, owner)
  return 1
end
`

// acquireScript: ARGV token, ttl ms, owner, channel, mode ("t" try once,
// "w" wait: register or renew as a waiter), waiter registration ttl ms.
// Returns {1, fence, ttl} when the token holds the key (now, or by an
// earlier hand-over, whose claim it extends to ttl here), else {0, pttl,
// owner, fence} of the holder (no owner, no fence and pttl -2 while a free
// key's queue still has registrations past the dead ones this run dropped:
// the caller polls again at once). A free key goes to the longest live
// waiter first. The holder's fence lets a waiter tell a hand-over notice
// sent after this answer (a higher fence) from a stale one.
var acquireScript = redis.NewScript(prelude + `
local tok, ttl, owner, ch, mode, wttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5], tonumber(ARGV[6])
local held = redis.call('HMGET', K, 't', 'o', 'f')
local cur = held[1]
if cur == tok then
  dequeue(tok)
  clock()
  redis.call('HSET', K, 'e', string.format('%d', nowms + ttl))
  redis.call('PEXPIRE', K, ttl)
  return {1, held[3], tonumber(ttl)}
end
if not cur then
  local h, httl, hch, howner = pophead()
  if h == tok or not (h or cut) then
    return {1, grant(tok, ttl, owner, ch), tonumber(ttl)}
  end
  if h then held = {h, howner, handover(h, httl, hch, howner)} end
end
if mode == 'w' then
  clock()
  redis.call('ZADD', Q, 'NX', string.format('%d', nowus), tok)
  redis.call('HSET', W, tok, string.format('%d', nowms + wttl) .. ' ' .. ttl .. ' ' .. ch .. ' ' .. owner)
  for _, k in ipairs({Q, W}) do
    if redis.call('PTTL', k) < wttl then redis.call('PEXPIRE', k, wttl) end
  end
end
return {0, redis.call('PTTL', K), held[2] or '', held[3]}
`)

// releaseScript: ARGV token. Returns -1 when the token does not hold the
// key (nothing is deleted), 0 when released, 1 when handed to a waiter.
var releaseScript = redis.NewScript(prelude + `
if redis.call('HGET', K, 't') ~= ARGV[1] then return -1 end
return free()
`)

// withdrawScript: ARGV token. Takes back what an acquire that failed or was
// cancelled may have left: its waiter registration, and the key itself if
// it was granted meanwhile (which then goes to the next waiter).
var withdrawScript = redis.NewScript(prelude + `
dequeue(ARGV[1])
if redis.call('HGET', K, 't') == ARGV[1] then
  free()
  return 1
end
return 0
`)

// forceScript: KEYS[5] the call's record (keyset.forced); no ARGV. Deletes
// the hold whoever has it, tells the victim's Locker ("r token fence"), hands the key to the
// longest waiter, and returns the victim's {token prefix, fence, owner}, or
// nil when the key was free. The answer is kept a minute under the call's
// record, and a second run of the call (go-redis retries a command whose
// reply was lost) returns it and does nothing: it would force-release the
// waiter the first run handed the key to.
var forceScript = redis.NewScript(prelude + `
local done = redis.call('GET', KEYS[5])
if done then
  if done == '' then return false end
  local t, f, o = string.match(done, '^(%S*) (%S*) (.*)$')
  return {t, f, o}
end
local v = redis.call('HMGET', K, 't', 'f', 'o', 'c')
if not v[1] then
  redis.call('SET', KEYS[5], '', 'PX', 60000)
  return false
end
if v[4] then redis.call('PUBLISH', v[4], 'r ' .. v[1] .. ' ' .. (v[2] or '0')) end
free()
local r = {string.sub(v[1], 1, 6), v[2] or '0', v[3] or ''}
redis.call('SET', KEYS[5], r[1] .. ' ' .. r[2] .. ' ' .. r[3], 'PX', 60000)
return r
`)

// extendScript: KEYS hold; ARGV token, ttl ms. Sets the time left to ttl if
// the token holds the key. Returns 1, or 0 when it does not.
var extendScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
local clock = redis.call('TIME')
local nowms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
redis.call('HSET', KEYS[1], 'e', string.format('%d', nowms + tonumber(ARGV[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// checkScript: KEYS hold; ARGV token. Returns {fence, pttl, owner} if the
// token holds the key, else nil.
var checkScript = redis.NewScript(`
local v = redis.call('HMGET', KEYS[1], 't', 'f', 'o')
if v[1] ~= ARGV[1] then return false end
return {v[2], redis.call('PTTL', KEYS[1]), v[3] or ''}
`)
