-- Enqueue a batch of tasks into one queue, atomically per batch.
-- KEYS[1]  the queue's stream. Every other key is derived from ARGV[1] and carries the same
--          hash tag, so the script touches one cluster slot.
-- ARGV[1]  key prefix of the queue, "<ns>:{<queue>}:"
-- ARGV[2]  now, unix ms
-- then 7 values per task:
--   id, envelope bytes, run-at ms, unique hash ('' = not unique), unique TTL ms, max retry,
--   dead-letter discard ('1' or '0')
-- Returns: one integer per task, in order:
--    1  enqueued
--    2  this id already holds these exact bytes (a re-sent call): nothing changed
--   -1  the unique lock is held by another task: nothing written
--   -2  this id holds a different task: nothing written
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local out = {}
for i = 3, #ARGV, 7 do
  local id, env, run_at = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local uhash, uttl, maxr, discard = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local tkey = prefix .. 't:' .. id
  local existing = redis.call('HGET', tkey, 'e')
  local ukey = nil
  if uhash ~= '' then ukey = prefix .. 'u:' .. uhash end
  if existing then
    if existing == env then out[#out + 1] = 2 else out[#out + 1] = -2 end
  elseif ukey and not redis.call('SET', ukey, id, 'NX', 'PX', uttl) then
    out[#out + 1] = -1
  else
    -- One HSET per task with every field: the hash is written once.
    local fields = {tkey, 'e', env, 'r', 0, 'x', maxr}
    if ukey then fields[#fields + 1] = 'u'; fields[#fields + 1] = ukey end
    if discard == '1' then fields[#fields + 1] = 'dl'; fields[#fields + 1] = '1' end
    fields[#fields + 1] = 's'
    if run_at > now then
      fields[#fields + 1] = 'scheduled'
      redis.call('ZADD', prefix .. 'scheduled', run_at, id)
    else
      fields[#fields + 1] = 'pending'
      fields[#fields + 1] = 'm'
      fields[#fields + 1] = redis.call('XADD', KEYS[1], '*', 'i', id)
    end
    redis.call('HSET', unpack(fields))
    out[#out + 1] = 1
  end
end
return out
