-- Inspector action "delete": removes tasks in any state but active (unless forced, for a queue
-- being deleted), releasing their unique lock. A task a worker holds (lib.lua:
-- `held_by_worker`: fetched, whether or not its start was marked, or completed with its ack
-- still carried) is active: its handler may be running, or have run to the end already.
-- KEYS[1]  the queue's stream, KEYS[2..5] its scheduled, retry, archived and completed sets, then
--          2 keys per task: task hash, unique lock (the task hash again when it has none), then
--          the queue's lanes (lib.lua: `lane`), then its tenants block (lib.lua: "Tenants"), then
--          its cancelled set; last, the queue's event stream (lib.lua: `EVENTS`: each task
--          deleted writes `deleted`)
-- ARGV[1]  consumer group, ARGV[2] '1' to delete active tasks too, then task ids
-- Returns: {codes, states}, one each per task, in order:
--    1  deleted
--    0  no such task (also a re-sent call whose first run deleted it)
--   -1  active (also when a worker holds it), and not forced: nothing changed
-- A key of the wrong type where a task hash belongs is junk and is deleted.
if not type_ok(KEYS[1], 'stream') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
for j = 2, 5 do
  if not type_ok(KEYS[j], 'zset') then
    return redis.error_reply('E_CORRUPT queue keys of the wrong type')
  end
end
local group, force = ARGV[1], ARGV[2] == '1'
local X = #KEYS
if not type_ok(KEYS[X], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local T = X - TENANTS_LEN
local LANES = T - LANES_LEN
local sets = {scheduled = KEYS[2], retry = KEYS[3], archived = KEYS[4], completed = KEYS[5],
  cancelled = KEYS[X]}
local codes, states, todo = {}, {}, {}
for i = 3, #ARGV do
  local id, tkey, ukey = ARGV[i], KEYS[2 * i], KEYS[2 * i + 1]
  local h = read_hash(tkey, F_STATE, F_DELIVERY, F_UNIQUE, F_PRIORITY, F_TENANT)
  -- A plain task (lib.lua) has no hash: its entry, whose id is the task's, is all there is. A
  -- hash that answered no state is none (every record has one), so its EXISTS is not asked
  -- again; the task's last field says whether a group holds its entry (what to ack).
  local ps, _, delivered = plain_state(KEYS[1], group, tkey, id, type(h) == 'table' and not h[1])
  if ps then h = {ps, id, nil, nil, nil, delivered and 1 or 0} end
  local s, code = '', 1
  if h == nil then
    h = {}
  elseif not h[1] then
    code = 0
  else
    s = h[1]
    if ps and delivered then
      s = 'active'
    elseif s == 'pending' and h[2] then
      local stream = lane_key(KEYS[1], LANES, h[4])
      if h[5] then stream = KEYS[T] end
      if held_by_worker(stream, group, h[2]) then s = 'active' end
    end
    if s == 'active' and not force then code = -1 end
  end
  codes[#codes + 1] = code
  states[#states + 1] = s
  if code == 1 then todo[#todo + 1] = {id, tkey, ukey, h} end
end
for _, t in ipairs(todo) do
  local id, tkey, ukey, h = unpack(t)
  local env = kept_envelope(tkey)
  if h[5] then tenant_forget(T, tkey, id, h[2]) end
  if h[2] then
    local stream = lane_key(KEYS[1], LANES, h[4])
    if h[5] then stream = KEYS[T] end
    if not env and events_on() then env = entry_envelope(stream, h[2]) end
    -- A plain task never delivered is in no pending list: nothing to ack.
    if h[6] ~= 0 then redis.call('XACK', stream, group, h[2]) end
    redis.call('XDEL', stream, h[2])
  end
  if sets[h[1] or ''] then
    redis.call('ZREM', sets[h[1]], id)
  elseif not h[1] then
    for j = 2, 5 do redis.call('ZREM', KEYS[j], id) end
    redis.call('ZREM', KEYS[X], id)
  end
  if h[3] and h[3] == ukey then release_unique(ukey, id) end
  -- A plain task has no hash to delete.
  if not h[6] then redis.call('DEL', tkey) end
  transition(EV.DELETED, id, env)
end
return {codes, states}
