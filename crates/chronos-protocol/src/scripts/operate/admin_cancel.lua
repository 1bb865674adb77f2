-- Inspector action "cancel": asks the worker running an active task to cancel it. The request is
-- the task's current delivery in the queue's cancel set (its stream entry id, `<level>/<entry id>`
-- for a level's stream, `<TENANT_LANE>/<entry id>` for a tenant task's, as the worker's lease
-- names it: see src/redis/lane.rs) (scored by when it was asked); a
-- worker polls that set for the deliveries it runs and fires their handlers' cancellation.
-- KEYS[1]  the queue's cancel set, KEYS[2] its stream, then one task hash per task; last, the
--          queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  how long requests are kept (ms), ARGV[2] consumer group, then task ids
-- Returns: {codes, states}, one each per task, in order:
--    1  requested (also when it already was: a re-sent call changes nothing)
--    0  no such task
--   -1  not active (only a running task can be cancelled; a main-stream task a worker has
--       fetched counts as running, marked or not)
--   -2  corrupt record
-- Requests older than the keep time are trimmed here, and the set expires after it. A new
-- request writes the task's `cancel_requested` event (a re-sent call writes none).
if not type_ok(KEYS[1], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local keep = tonumber(ARGV[1]) or 60000
local codes, states, todo = {}, {}, {}
for i = 3, #ARGV do
  local h = read_hash(KEYS[i], F_STATE, F_DELIVERY, F_PRIORITY, F_TENANT)
  -- A plain task (lib.lua) has no hash: its delivery is its entry, whose id is the task's.
  local ps = plain_state(KEYS[2], ARGV[2], KEYS[i], ARGV[i])
  if ps then h = {ps, ARGV[i]} end
  local s, code = '', 1
  if h == nil then
    code = -2
  elseif not h[1] then
    code = 0
  else
    s = h[1]
    -- Fetched by a worker and not yet marked started (the mark is skipped for short handlers
    -- and sent a moment after the start): running for the operator, as the listings show it.
    -- Only a main-stream delivery can be checked here (a level's or a tenant's stream is not
    -- declared).
    local main = not h[4] and not (level_index(h[3]) and h[3] ~= NORMAL_LEVEL)
    if s == 'pending' and h[2] and main and held_by_worker(KEYS[2], ARGV[2], h[2]) then
      s = 'active'
    end
    if s ~= 'active' then code = -1 elseif not h[2] then code = -2 end
  end
  codes[#codes + 1] = code
  states[#states + 1] = s
  if code == 1 then
    local mid = h[2]
    if h[4] then
      mid = TENANT_LANE .. '/' .. mid
    elseif level_index(h[3]) and h[3] ~= NORMAL_LEVEL then
      mid = h[3] .. '/' .. mid
    end
    todo[#todo + 1] = {mid, ARGV[i], mid == h[2] and h[2]}
  end
end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - keep)
for _, t in ipairs(todo) do
  if redis.call('ZADD', KEYS[1], 'NX', now, t[1]) == 1 and events_on() then
    -- A delivery of the main stream has its envelope at hand (a level's or a tenant's stream is
    -- not declared here: its event has no kind).
    transition(EV.CANCEL_REQUESTED, t[2], t[3] and entry_envelope(KEYS[2], t[3]) or nil)
  end
end
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], keep) end
return {codes, states}
