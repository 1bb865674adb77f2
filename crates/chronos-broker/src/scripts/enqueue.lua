-- Enqueue a batch of tasks into one queue, atomically per batch.
-- KEYS[1]  the queue's stream, KEYS[2] its scheduled set, then 3 keys per task: the task hash,
--          the task's done marker, and its unique lock (the task hash again when not unique)
-- ARGV     9 values per task: id, envelope bytes, run-at ms (0 = none), delay ms, unique TTL ms
--          (0 = not unique), max retry, dead-letter discard ('1'/'0'), fingerprint ('' = none),
--          call token ('' = none)
-- Writes: a ready task as a stream entry `i=<id> e=<envelope>` plus a hash of small fields only
-- (no `e`, so Redis keeps it a compact listpack); a delayed task as a hash with `e` plus its
-- member in the scheduled set. Due means run-at (or now + delay) is after Redis's clock.
-- The fingerprint is what the producer chose (kind, payload, options; not the clock), and the
-- token is random per enqueue call (the same in a re-send of that call); both are given for
-- explicit task ids only and kept in `fp` and `n`. An id still in use is the same task when its
-- fingerprint matches (a producer retrying after a timeout builds a new call). Once the task has
-- run and been deleted, its done marker `<entry id>|<token>` tells a re-send of the call that
-- enqueued it (a no-op) from a new enqueue under the same id (a new task).
-- Returns: four values per task, in order: a code, the run-at ms, 1 when the task waits in the
-- scheduled set (else 0), and its state ('' when this call enqueued it):
--    1  enqueued
--    2  already there, or already ran (a re-send): nothing changed
--   -1  the unique lock is held by another task: nothing written
--   -2  this id holds a different task: nothing written
local now = now_ms()
local out = {}

-- The stored envelope of an existing task: the hash's `e` while it is out of the stream, else
-- the `e` of its stream entry. O(1).
local function stored(h)
  if h[1] then return h[1] end
  if not h[2] then return nil end
  return entry_envelope(KEYS[1], h[2])
end

-- Checks first: every number parses and the queue's keys have their types.
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local n = #ARGV / 9
for t = 0, n - 1 do
  local a = t * 9
  for _, j in ipairs({3, 4, 5, 6}) do
    if not tonumber(ARGV[a + j]) then return redis.error_reply('E_ARGS bad number') end
  end
end

for t = 0, n - 1 do
  local a, k = t * 9, 2 + t * 3
  local id, env = ARGV[a + 1], ARGV[a + 2]
  local at, delay, uttl = tonumber(ARGV[a + 3]), tonumber(ARGV[a + 4]), tonumber(ARGV[a + 5])
  local maxr, discard, fp, token = ARGV[a + 6], ARGV[a + 7], ARGV[a + 8], ARGV[a + 9]
  local tkey, dkey, ukey = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3]
  local run_at = now + delay
  if at > 0 then run_at = at end
  local h = read_hash(tkey, 'e', 'm', 'fp', 's')
  local marker = nil
  if h and not (h[1] or h[2] or h[3]) then
    marker = redis.pcall('GET', dkey)
    if type(marker) ~= 'string' then marker = nil end
  end
  local state = ''
  if h == nil then
    out[#out + 1] = -2
  elseif h[1] or h[2] or h[3] then
    local same
    if fp ~= '' then same = h[3] == fp else same = stored(h) == env end
    if same then
      out[#out + 1] = 2
      state = h[4] or 'pending'
      run_at = now
      if state == 'scheduled' then run_at = tonumber(redis.call('ZSCORE', KEYS[2], id)) or now end
    else
      out[#out + 1] = -2
    end
  elseif marker and (fp == '' or string.match(marker, '|(.*)$') == token) then
    -- A re-send of the call that enqueued a task which has run and been deleted since.
    out[#out + 1] = 2
    state = 'completed'
    run_at = now
  elseif uttl > 0 and not redis.call('SET', ukey, id, 'NX', 'PX', uttl) then
    out[#out + 1] = -1
  else
    -- One HSET per task with every field: the hash is written once.
    local fields = {tkey, 'r', '0', 'x', maxr}
    if uttl > 0 then fields[#fields + 1] = 'u'; fields[#fields + 1] = ukey end
    if discard == '1' then fields[#fields + 1] = 'dl'; fields[#fields + 1] = '1' end
    if fp ~= '' then fields[#fields + 1] = 'fp'; fields[#fields + 1] = fp end
    if token ~= '' then fields[#fields + 1] = 'n'; fields[#fields + 1] = token end
    fields[#fields + 1] = 's'
    if run_at > now then
      fields[#fields + 1] = 'scheduled'
      fields[#fields + 1] = 'e'
      fields[#fields + 1] = env
      redis.call('ZADD', KEYS[2], run_at, id)
    else
      fields[#fields + 1] = 'pending'
      fields[#fields + 1] = 'm'
      fields[#fields + 1] = redis.call('XADD', KEYS[1], '*', 'i', id, 'e', env)
    end
    redis.call('HSET', unpack(fields))
    out[#out + 1] = 1
  end
  out[#out + 1] = math.max(run_at, now)
  if run_at > now then out[#out + 1] = 1 else out[#out + 1] = 0 end
  out[#out + 1] = state
end
return out
