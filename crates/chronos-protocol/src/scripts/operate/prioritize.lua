-- Operator action "prioritize": gives one task a priority level. A pending task's entry moves
-- to the end of its new level's stream; one a worker has fetched (started or not) is refused
-- as active, since a new entry would run it again; a scheduled, retry or archived task only
-- records the level, which the forwarder and run-now honour.
-- KEYS[1]  the queue's stream, KEYS[2] the task hash, KEYS[3..13] the queue's lanes (lib.lua:
--          `lane`), KEYS[14] its settings hash, then its tenants block (lib.lua: "Tenants": a
--          waiting tenant task moves to its new place inside its tenant, keeping its time);
--          last, the queue's event stream (lib.lua: `EVENTS`: a change writes `prioritized`)
-- ARGV[1]  consumer group, ARGV[2] task id, ARGV[3] the level ('0'..'9')
-- Returns: {code, state} (ActionCode): 1 done, 2 it already had the level (also a re-sent
-- call), 0 no such task, -1 its state (active, completed) refuses it, -2 corrupt record.
local group, id, level = ARGV[1], ARGV[2], ARGV[3]
if not level_index(level) then return redis.error_reply('E_ARGS bad level') end
local LANES = 3
local tkey = KEYS[2]
-- A plain task (lib.lua) has no hash: a pending one gets it first, from its entry.
local ps, pf, delivered = plain_state(KEYS[1], group, tkey, id)
-- A delivered task is a worker's, started or not: a new entry would run it again.
if ps == 'active' or (ps and delivered) then return {-1, 'active'} end
local h = read_hash(tkey, F_STATE, F_DELIVERY, F_PRIORITY, F_TENANT, F_TENANT_ORDER)
if ps then h = {ps, id, false} end
if h == nil then return {-2, ''} end
local s = h[1]
if not s then return {0, ''} end
if s == 'active' or s == 'completed' then return {-1, s} end
if h[4] then
  local T = 4 + LANES_LEN
  if (h[3] or NORMAL_LEVEL) == level then return {2, s} end
  -- A LIFO task without a tenant moves to its new level's front, keeping its place there.
  local tn = h[4]
  if is_front(tn) then
    tn = front_of(level)
    redis.call('HSET', tkey, F_TENANT, tn)
  end
  if s == 'pending' and h[2] and h[5] then
    local old = h[4] .. '\0' .. h[5] .. '\0' .. h[2]
    if redis.call('ZREM', KEYS[T + 2], old) == 1 then
      local place = h[5]
      if string.sub(place, 1, 1) ~= '-' then
        local aging = tonumber(redis.pcall('HGET', KEYS[T - 1], S_AGING)) or DEFAULT_AGING_MS
        local ms = tonumber(string.match(h[2], '^(%d+)')) or now_ms()
        place = tenant_place(tenant_order(level, ms, aging), h[2])
      end
      redis.call('ZADD', KEYS[T + 2], 0, tn .. '\0' .. place .. '\0' .. h[2])
      redis.call('HSET', tkey, F_TENANT_ORDER, place)
    end
  elseif s ~= 'pending' and s ~= 'scheduled' and s ~= 'retry' and s ~= 'archived' then
    return {-1, s}
  end
  if level == NORMAL_LEVEL then
    redis.call('HDEL', tkey, F_PRIORITY)
  else
    redis.call('HSET', tkey, F_PRIORITY, level)
  end
  local env = kept_envelope(tkey)
  if not env and s == 'pending' and h[2] and events_on() then
    env = entry_envelope(KEYS[T], h[2])
  end
  transition(EV.PRIORITIZED, id, env, E.LEVEL, level)
  return {1, s}
end
local now_stream = lane_key(KEYS[1], LANES, h[3])
local new_stream = lane_key(KEYS[1], LANES, level)
if now_stream == new_stream then return {2, s} end
local env = nil
if s == 'pending' then
  if not h[2] then return {-2, s} end
  if held_by_worker(now_stream, group, h[2]) then return {-1, 'active'} end
  local r = redis.call('XRANGE', now_stream, h[2], h[2])
  local fields = r[1] and r[1][2]
  env = field_of(fields, F_ENVELOPE)
  if not env then return {-2, s} end
  if pf then materialize(tkey, id, 'pending', pf) end
  settle_entries(now_stream, group, {h[2]})
  local mid = add_entry(lane(KEYS[1], LANES, level), id, env, field_of(fields, F_RETRIED),
    field_of(fields, F_ERROR), field_of(fields, F_FAILED_AT))
  redis.call('HSET', tkey, F_DELIVERY, mid)
elseif s ~= 'scheduled' and s ~= 'retry' and s ~= 'archived' then
  return {-1, s}
end
if new_stream == KEYS[1] then
  redis.call('HDEL', tkey, F_PRIORITY)
else
  redis.call('HSET', tkey, F_PRIORITY, level)
end
transition(EV.PRIORITIZED, id, env or kept_envelope(tkey), E.LEVEL, level)
return {1, s}
