-- Enqueue a batch of tasks into one queue, atomically per batch.
-- KEYS[1]  the queue's stream. Every other key is derived from ARGV[1] and carries the same
--          hash tag, so the script touches one cluster slot.
-- ARGV[1]  key prefix of the queue, "<ns>:{<queue>}:"
-- ARGV[2]  now, unix ms
-- then 7 values per task:
--   id, envelope bytes, run-at ms, unique hash ('' = not unique), unique TTL ms, max retry,
--   dead-letter discard ('1' or '0')
-- Writes: a ready task as a stream entry `i=<id> e=<envelope>` plus a hash of small fields only
-- (no `e`, so Redis keeps it a compact listpack); a delayed task as a hash with `e` plus its
-- member in the scheduled set.
-- Returns: one integer per task, in order:
--    1  enqueued
--    2  this id already holds these exact bytes (a re-sent call): nothing changed
--   -1  the unique lock is held by another task: nothing written
--   -2  this id holds a different task (or one whose envelope cannot be read): nothing written
local prefix = ARGV[1]
local now = tonumber(ARGV[2])
local out = {}

-- The stored envelope of an existing task: the hash's `e` when it is out of the stream (or was
-- written before envelopes moved into the stream), else the `e` of its stream entry. O(1).
local function stored(tkey)
  local h = redis.call('HMGET', tkey, 'e', 'm')
  if h[1] then return h[1] end
  if not h[2] then return nil end
  return entry_envelope(KEYS[1], h[2])
end

for i = 3, #ARGV, 7 do
  local id, env, run_at = ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2])
  local uhash, uttl, maxr, discard = ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local tkey = prefix .. 't:' .. id
  local ukey = nil
  if uhash ~= '' then ukey = prefix .. 'u:' .. uhash end
  if redis.call('EXISTS', tkey) == 1 then
    if stored(tkey) == env then out[#out + 1] = 2 else out[#out + 1] = -2 end
  elseif ukey and not redis.call('SET', ukey, id, 'NX', 'PX', uttl) then
    out[#out + 1] = -1
  else
    -- One HSET per task with every field: the hash is written once.
    local fields = {tkey, 'r', '0', 'x', maxr}
    if ukey then fields[#fields + 1] = 'u'; fields[#fields + 1] = ukey end
    if discard == '1' then fields[#fields + 1] = 'dl'; fields[#fields + 1] = '1' end
    fields[#fields + 1] = 's'
    if run_at > now then
      fields[#fields + 1] = 'scheduled'
      fields[#fields + 1] = 'e'
      fields[#fields + 1] = env
      redis.call('ZADD', prefix .. 'scheduled', run_at, id)
    else
      fields[#fields + 1] = 'pending'
      fields[#fields + 1] = 'm'
      fields[#fields + 1] = redis.call('XADD', KEYS[1], '*', 'i', id, 'e', env)
    end
    redis.call('HSET', unpack(fields))
    out[#out + 1] = 1
  end
end
return out
