-- Inspector action "archive": pending, scheduled or retry tasks move to the archive (dead
-- letters kept for inspection), releasing their unique lock. A task a worker holds (lib.lua:
-- `held_by_worker`: fetched, whether or not its start was marked, or completed with its ack
-- still carried) is refused as active: its handler may have run to the end already.
-- KEYS[1]  the queue's stream, KEYS[2..4] its scheduled, retry and archived sets, then 2 keys per
--          task: task hash, unique lock (the task hash again when it has none), then the
--          queue's lanes (lib.lua: `lane`), then its tenants block (lib.lua: "Tenants"); last,
--          the queue's event stream (lib.lua: `EVENTS`: each task archived writes `archived`)
-- ARGV[1]  consumer group, then task ids
-- Returns: {codes, states}, one each per task, in order:
--    1  archived
--    2  already archived (a re-sent call whose first run archived it): nothing changed
--    0  no such task
--   -1  its state cannot be archived (active, also when a worker holds it, or completed)
--   -2  corrupt record: nothing changed
-- The envelope of a pending task moves from its stream entry into the hash's `e`.
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') or not type_ok(KEYS[3], 'zset')
  or not type_ok(KEYS[4], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local group = ARGV[1]
local T = #KEYS - TENANTS_LEN + 1
local LANES = T - LANES_LEN
-- The stream a pending task's entry is in: its tenant's, or its level's.
local function stream_of(h)
  if h[6] then return KEYS[T] end
  return lane_key(KEYS[1], LANES, h[4])
end
local sets = {scheduled = KEYS[2], retry = KEYS[3]}
local codes, states, todo = {}, {}, {}
for i = 2, #ARGV do
  local id, tkey, ukey = ARGV[i], KEYS[2 * i + 1], KEYS[2 * i + 2]
  local h = read_hash(tkey, F_STATE, F_DELIVERY, F_UNIQUE, F_PRIORITY, F_TENANT)
  if h then h = {h[1], h[2], h[3], h[4], false, h[5]} end
  -- A plain task (lib.lua) has no hash yet: archiving writes it, from its entry's fields.
  local ps, pf, delivered = plain_state(KEYS[1], group, tkey, id)
  if ps then h = {delivered and 'active' or ps, id, false, false, pf} end
  local s, code = '', 1
  local env = false
  if h == nil then
    code = -2
  elseif not h[1] then
    code = 0
  else
    s = h[1]
    if s == 'archived' then
      code = 2
    elseif s == 'pending' and h[2] and held_by_worker(stream_of(h), group, h[2]) then
      s, code = 'active', -1
    elseif s == 'pending' then
      env = h[2] and entry_envelope(stream_of(h), h[2])
      if not env then code = -2 end
    elseif sets[s] == nil then
      code = -1
    end
  end
  codes[#codes + 1] = code
  states[#states + 1] = s
  if code == 1 then todo[#todo + 1] = {id, tkey, ukey, h, env} end
end
local now = now_ms()
for _, t in ipairs(todo) do
  local id, tkey, ukey, h, env = unpack(t)
  if h[1] == 'pending' then
    local stream = stream_of(h)
    if h[6] then tenant_forget(T, tkey, id, h[2]) end
    redis.call('XACK', stream, group, h[2])
    redis.call('XDEL', stream, h[2])
    if h[5] then materialize(tkey, id, 'pending', h[5]) end
    redis.call('HSET', tkey, F_STATE, 'archived', F_ENVELOPE, env)
    redis.call('HDEL', tkey, F_DELIVERY)
  else
    redis.call('ZREM', sets[h[1]], id)
    redis.call('HSET', tkey, F_STATE, 'archived')
  end
  if h[3] and h[3] == ukey then release_unique(ukey, id) end
  redis.call('ZADD', KEYS[4], now, id)
  transition(EV.ARCHIVED, id, kept_envelope(tkey))
end
return {codes, states}
