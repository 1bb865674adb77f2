-- Change the stored settings of one tenant of a queue, or the queue's default for all its
-- tenants, in one step, and put the tenants it concerns in or out of the rotation.
-- KEYS     the queue's tenants block (lib.lua: "Tenants")
-- ARGV[1]  the tenant ('' for the default), then its weight, concurrency cap, backlog cap and
--          paused flag ('1'/'0'), each '' to leave it as stored or '-' to unset it
-- Returns: the settings stored after the change (`<weight> <concurrency> <backlog> <paused>`,
-- '-' where unset; '' when none is left). Every value is absolute, so a re-sent call stores
-- the same and answers the same. A paused tenant leaves the rotation at once (its turn is
-- kept); a resumed one, or one whose cap was raised, comes back if it has work. A change of
-- the default re-checks every tenant with work.
local T, tn = 1, ARGV[1]
if not type_ok(KEYS[T + 5], 'hash') then
  return redis.error_reply('WRONGTYPE the tenant settings key holds another type')
end
local cur = {}
local stored = redis.call('HGET', KEYS[T + 5], tn)
if type(stored) == 'string' then
  for f in string.gmatch(stored, '%S+') do cur[#cur + 1] = f end
end
local any = false
for i = 1, 4 do
  local v = ARGV[1 + i]
  if v ~= '' then cur[i] = v end
  if cur[i] == nil or cur[i] == '' then cur[i] = '-' end
  if cur[i] ~= '-' then any = true end
end
local value = ''
if any then
  value = table.concat(cur, ' ', 1, 4)
  redis.call('HSET', KEYS[T + 5], tn, value)
else
  redis.call('HDEL', KEYS[T + 5], tn)
end
-- Who to re-check: the tenant, or for the default every tenant with work.
local who = {tn}
if tn == '' then
  who = {}
  for _, f in ipairs(redis.call('HKEYS', KEYS[T + 6])) do
    if f ~= '' then who[#who + 1] = f end
  end
end
for _, t in ipairs(who) do
  if tenant_conf(T, t)[4] then
    redis.call('ZREM', KEYS[T + 3], t)
  else
    tenant_activate(T, t)
  end
end
return value
