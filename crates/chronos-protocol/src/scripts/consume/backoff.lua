-- A running task's handler said "rate limited" (TaskError::rate_limited): block its rate key,
-- or its whole queue, cluster-wide until now + delay, and put the task itself back as
-- scheduled, due at the block's end plus a jitter (lib.lua `backoff_due`), in one step. Like a
-- snooze, no attempt is spent and no error recorded; unlike one, it is not counted as a snooze.
-- A block only extends: an end already later than now + delay is kept (two workers blocking
-- at once keep the later end). Ended key blocks are trimmed here, and the key-block set
-- expires at its latest end, so neither key outlives its blocks.
-- KEYS[1]  the queue's stream, KEYS[2] its scheduled set, KEYS[3] the task hash, KEYS[4] the
--          queue's block, KEYS[5] its blocked keys, KEYS[6] its level hash (field
--          LEVELS_BLOCKED tells claim.lua to look at the block keys), KEYS[7] today's
--          throttle counter (keys.rs `throttled_day`); then, for a delivery of the tenant stream, the tenants block (lib.lua: "Tenants": the task's hold on its
--          tenant's cap ends); last, the queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] stream entry id, ARGV[4] delay ms (from
--          Redis's clock), ARGV[5] scope: 'q' the queue, 'k' the rate key ARGV[6], ARGV[7] how
--          long the handler ran (ms; '' when unknown), ARGV[8] its log lines ('' for none), for
--          the attempt history
-- Returns: {1, block end ms, task due ms} blocked (also for a re-sent call whose first run did
-- it: the hash's `d` records the settled delivery; it answers the block's end now and the
-- task's due time), {0, 0, 0} the lease no longer matches (reclaimed or deleted task):
-- nothing changed, no block set.
-- Its `throttled` event comes after a `started` for an attempt never marked (lib.lua
-- `attempt_ended`).
local group, id, mid = ARGV[1], ARGV[2], ARGV[3]
local delay = tonumber(ARGV[4]) or 0
local scope, rk = ARGV[5], ARGV[6]
local tkey = KEYS[3]
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset')
  or not type_ok(KEYS[4], 'string') or not type_ok(KEYS[5], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local now = now_ms()
local function block_end()
  if scope == 'q' then return queue_block_end(KEYS[4], now) end
  return key_block_end(KEYS[5], rk, now)
end
materialize_if_plain(KEYS[1], group, tkey, id, mid)
local h = read_hash(tkey, F_DELIVERY, F_SETTLED, F_STATE, F_RETRIED)
if h == nil then return {0, 0, 0} end
if h[1] ~= mid then
  if h[2] == mid and h[3] == 'scheduled' then
    local due = tonumber(redis.call('ZSCORE', KEYS[2], id)) or 0
    local e = block_end()
    if e == 0 then e = due end
    return {1, e, due}
  end
  return {0, 0, 0}
end
local ends = math.max(block_end(), now + delay)
if scope == 'q' then
  redis.call('SET', KEYS[4], ends, 'PXAT', ends)
else
  redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
  redis.call('ZADD', KEYS[5], ends, rk)
  local last = redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')
  redis.call('PEXPIREAT', KEYS[5], tonumber(last[2]) or ends)
end
redis.call('HSET', KEYS[6], LEVELS_BLOCKED, 1)
if redis.call('INCR', KEYS[7]) == 1 then redis.call('PEXPIRE', KEYS[7], 2 * 86400000) end
local due = backoff_due(id, ends, now)
local T = nil
if #KEYS >= 7 + TENANTS_LEN then T = 8 end
local attempt, worker = (count_of(h[4]) or 0) + 1, holder(KEYS[1], group, mid)
local row = attempt_row(tkey, attempt, worker, 'throttled', '', ARGV[7], now, ARGV[8])
local env = set_aside(KEYS[1], group, tkey, id, mid, {F_STATE, 'scheduled', F_SETTLED, mid,
  F_ATTEMPTS, row}, KEYS[2], due, T)
attempt_ended(h[3] == 'active', attempt, worker, EV.THROTTLED, id, env, E.AT, due)
return {1, ends, due}
