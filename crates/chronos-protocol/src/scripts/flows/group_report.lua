-- Count one member of a group and, when it is the last, enqueue the group's callback.
-- KEYS[1]  the record (`<ns>:{<cbq>}:g:<gid>`), KEYS[2] its members hash (`<ns>:{<cbq>}:gm:<gid>`),
--          KEYS[3] the callback queue's stream, KEYS[4] the callback's task hash; last, the
--          callback queue's event stream (lib.lua: `EVENTS`: the callback writes its `enqueued`)
-- ARGV[1]  member index, ARGV[2] 'o' succeeded / 'f' dead-lettered, ARGV[3] its result (kept
--          only when the group collects) or error
-- Idempotent by member: the members hash (field: index, value: outcome code then result or
-- error) is the set of members already counted, so a member that ran twice, or a re-sent call,
-- counts once. The record's `fired` flag makes the callback's enqueue happen once: it is set
-- in the same step as the callback's stream entry. The callback's envelope gets the counts
-- written over its placeholder (fixed width, so no re-encoding). Once fired, the record and the
-- results live for the group's TTL again.
-- Returns: {code, succeeded, failed, fired}: code 1 counted now, 2 counted before, 0 no such
-- group (nothing written), -3 corrupt record or callback queue, -4 index out of range (both:
-- nothing written).
local h = read_hash(KEYS[1], 'n', 'ok', 'ko', 'fired', 'cb', 'off', 'cbid', 'x', 'dl', 'col', 'ttl')
if h == nil then return {-3, 0, 0, 0} end
if not h[1] then return {0, 0, 0, 0} end
local n, ok, ko = count_of(h[1]), count_of(h[2]), count_of(h[3])
local off, ttl = count_of(h[6]), count_of(h[11])
if not (n and ok and ko and off and ttl and h[5] and h[7]) or off + 21 > #h[5] then
  return {-3, 0, 0, 0}
end
local idx = count_of(tonumber(ARGV[1]))
if not idx or idx >= n then return {-4, ok, ko, 0} end
local fired = 0
if h[4] == '1' then fired = 1 end
local seen = redis.pcall('HEXISTS', KEYS[2], ARGV[1])
if type(seen) == 'table' then return {-3, ok, ko, fired} end
if seen == 1 then return {2, ok, ko, fired} end
if not type_ok(KEYS[3], 'stream') or not type_ok(KEYS[4], 'hash') then return {-3, ok, ko, fired} end
local value = ARGV[2]
if ARGV[2] == 'f' or h[10] == '1' then value = value .. ARGV[3] end
redis.call('HSET', KEYS[2], ARGV[1], value)
if ARGV[2] == 'o' then
  ok = ok + 1
  redis.call('HSET', KEYS[1], 'ok', ok)
else
  ko = ko + 1
  redis.call('HSET', KEYS[1], 'ko', ko)
end
if ok + ko >= n and fired == 0 then
  local env = h[5]
  local counts = string.format('%010d:%010d', ok, ko)
  env = string.sub(env, 1, off) .. counts .. string.sub(env, off + 22)
  local mid = add_entry(KEYS[3], h[7], env)
  new_record(KEYS[4], h[8] or '0', false, h[9], nil, 'pending', F_DELIVERY, mid)
  transition(EV.ENQUEUED, h[7], env)
  redis.call('HSET', KEYS[1], 'fired', '1')
  fired = 1
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[2], ttl)
  return {1, ok, ko, fired}
end
-- Results live as long as the record.
local left = redis.call('PTTL', KEYS[1])
if left > 0 then redis.call('PEXPIRE', KEYS[2], left) end
return {1, ok, ko, fired}
