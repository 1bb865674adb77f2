-- Forget instances not seen for a while, then the registry entries no remaining instance
-- registers (entries of older versions, which name no instance, by their own last-seen mark).
-- KEYS[1]  registry hash, KEYS[2] liveness zset, KEYS[3] definitions of code schedules (hash:
--          id -> definition), KEYS[4..] the id sets of the instances the caller read from the
--          zset, in the order of ARGV[3..]; one hash tag
-- ARGV[1]  forget instances last seen more than this many ms ago (Redis' clock)
-- ARGV[2]  '1': check every entry even when no instance was forgotten
-- ARGV[3..] the instance ids the caller read from the zset
-- Returns: {'retry'} (nothing written) when the zset names an instance the caller did not
-- declare; else a flat list of the removed entries: id, entry bytes, id, entry bytes, ...
-- A definition goes with its entry, and so does one that no live instance registers (its entry
-- was removed by an older version).
local age = tonumber(ARGV[1])
if not age then return redis.error_reply('ERR registry_prune: bad age') end
local set_of = {}
for i = 3, #ARGV do set_of[ARGV[i]] = KEYS[i + 1] end
local members = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES')
for i = 1, #members, 2 do
  if not set_of[members[i]] then return {'retry'} end
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local alive, forgot = {}, false
for i = 1, #members, 2 do
  if tonumber(members[i + 1]) < now - age then
    redis.call('DEL', set_of[members[i]])
    redis.call('ZREM', KEYS[2], members[i])
    forgot = true
  else
    alive[#alive + 1] = set_of[members[i]]
  end
end
if not forgot and ARGV[2] ~= '1' then return {} end
local registered = {}
for _, k in ipairs(alive) do
  for _, id in ipairs(redis.call('SMEMBERS', k)) do registered[id] = true end
end
-- An entry that no instance set names was written by an older version, which refreshed the
-- entry itself: it stays while its own last-seen mark is recent (its writer still runs).
local function fresh(bytes)
  local ok, e = pcall(cmsgpack.unpack, bytes)
  if not ok or type(e) ~= 'table' then return false end
  local seen = tonumber(e['last_seen_ms'])
  return seen ~= nil and seen >= now - age
end
local out = {}
local all = redis.call('HGETALL', KEYS[1])
for i = 1, #all, 2 do
  if not registered[all[i]] and not fresh(all[i + 1]) then
    out[#out + 1] = all[i]
    out[#out + 1] = all[i + 1]
    redis.call('HDEL', KEYS[1], all[i])
  end
end
-- A definition is only ever read for a registered id, so dropping one that no live instance
-- registers is safe; an entry of an older version kept by its own mark has none.
for _, id in ipairs(redis.call('HKEYS', KEYS[3])) do
  if not registered[id] then redis.call('HDEL', KEYS[3], id) end
end
return out
