-- Run a schedule now: enqueue one task of it, once per request id, counted as fired.
-- KEYS[1]  the queue's stream, KEYS[2] sched:metrics (hash: fired, missed, suppressed)
-- KEYS[3]  this request's marker (string, expiring: `<call token>:<outcome>`), KEYS[4] the task
--          hash, KEYS[5] sched:fires (hash: schedule id -> its last fires), KEYS[6] the task's
--          unique lock (only when ARGV[5] > 0); all share the queue's hash tag; last, the
--          queue's event stream (lib.lua: `EVENTS`: the task enqueued writes its `enqueued`)
-- ARGV[1]  task id, ARGV[2] envelope bytes, ARGV[3] max retry, ARGV[4] dead-letter discard
--          ('1'/'0'), ARGV[5] unique lock TTL ms (0 = not unique), ARGV[6] marker TTL ms,
-- ARGV[7]  this call's token (random per call, the same in a re-send of the call), ARGV[8] when
--          the unique lock is let go (lib.lua `lock_record`: '' when the task ends),
-- ARGV[9]  the schedule id (its fire history takes the run)
-- Returns: 1 enqueued, -1 this request already ran in another call (marker or task present),
-- -3 a key has the wrong type (nothing written), -4 another task holds the unique lock
-- (counted as suppressed). A re-sent call (a lost reply) finds its own token in the marker and
-- answers its first run's outcome, writing nothing. Every check runs before the first write.
if #ARGV ~= 9 then return redis.error_reply('ERR sched_run: bad argument count') end
local id, env, maxr, discard, token, sid = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[7], ARGV[9]
local uttl, ttl = tonumber(ARGV[5]), tonumber(ARGV[6])
if not uttl or not ttl or not tonumber(maxr) then
  return redis.error_reply('ERR sched_run: bad TTL or max retry')
end
if token == '' then return redis.error_reply('ERR sched_run: empty call token') end
if uttl > 0 and not KEYS[6] then return redis.error_reply('ERR sched_run: unique key missing') end
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'hash')
    or not type_ok(KEYS[3], 'string') or (uttl > 0 and not type_ok(KEYS[6], 'string')) then
  return -3
end
local mark = redis.call('GET', KEYS[3])
if mark then
  if string.sub(mark, 1, #token + 1) == token .. ':' then
    return tonumber(string.sub(mark, #token + 2)) or -1
  end
  return -1
end
if redis.call('EXISTS', KEYS[4]) == 1 then return -1 end
if uttl > 0 and redis.call('EXISTS', KEYS[6]) == 1 then
  redis.call('SET', KEYS[3], token .. ':-4', 'PX', ttl)
  -- pcall: a counter holding a non-number must not fail the script after its first write.
  redis.pcall('HINCRBY', KEYS[2], 'suppressed', 1)
  record_fire(KEYS[5], sid, now_ms(), -4, id, true)
  return -4
end
redis.call('SET', KEYS[3], token .. ':1', 'PX', ttl)
if uttl > 0 then redis.call('SET', KEYS[6], id, 'PX', uttl) end
-- Same layout as enqueue.lua: the envelope in the stream entry, small fields in the hash.
local mid = add_entry(KEYS[1], id, env)
local rkey, extra = lock_record(uttl > 0 and KEYS[6], ARGV[8], {})
new_record(KEYS[4], maxr, rkey, discard, nil, 'pending', F_DELIVERY, mid, nil, nil, nil, extra)
transition(EV.ENQUEUED, id, env)
redis.pcall('HINCRBY', KEYS[2], 'fired', 1)
record_fire(KEYS[5], sid, now_ms(), 1, id, true)
return 1
