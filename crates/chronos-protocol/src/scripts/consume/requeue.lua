-- Put fetched but unstarted tasks back at the end of their queue without counting an attempt
-- (graceful shutdown).
-- KEYS[1]  the queue's stream, then one task hash per task, then, for deliveries of the tenant
--          stream, the tenants block (lib.lua: "Tenants": a tenant task goes back to its place
--          in its tenant, its entry parked again, and its hold on the cap ends); last, the
--          queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, then pairs: task id, stream entry id
-- Returns: how many tasks were re-queued; a pair whose lease no longer matches is skipped (so a
-- re-sent call re-queues nothing twice).
-- The new entry carries the envelope of the old one (`i=<id> e=<envelope>`). Each task re-queued
-- writes its `requeued` event.
local group = ARGV[1]
if not type_ok(KEYS[1], 'stream') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local todo = {}
local n = (#ARGV - 1) / 2
local T = nil
if #KEYS >= 1 + n + TENANTS_LEN then T = 2 + n end
for t = 0, n - 1 do
  local id, mid, tkey = ARGV[2 + t * 2], ARGV[3 + t * 2], KEYS[2 + t]
  materialize_if_plain(KEYS[1], group, tkey, id, mid)
  local h = read_hash(tkey, F_DELIVERY)
  if h and h[1] == mid then todo[#todo + 1] = {id, mid, tkey} end
end
for _, t in ipairs(todo) do
  local id, mid, tkey = unpack(t)
  local env = entry_envelope(KEYS[1], mid)
  if not (T and tenant_back(T, tkey, id, mid)) then
    settle_entries(KEYS[1], group, {mid})
    back_to_stream(KEYS[1], tkey, id, env)
  end
  transition(EV.REQUEUED, id, env)
end
return #todo
