-- Counts of one queue for the inspector (read only).
-- KEYS[1]  the queue's stream, KEYS[2..5] its scheduled, retry, archived and completed sets,
-- KEYS[6]  processed counter, KEYS[7] failed counter, KEYS[8..18] its lanes (lib.lua: `lane`),
--          then its tenants block (lib.lua: "Tenants")
-- ARGV[1]  consumer group
-- Returns: {stream length, active (pending in the group), scheduled, retry, archived, completed,
--           processed total, failed total, levels}, where the first two sum every level's stream
-- and `levels` is, for a queue with levels in use, one row per level (the default's included)
-- in order of urgency: {level, stream length, active, ms the oldest waiting entry has waited
-- (-1: none waits)}; empty otherwise. Tenant tasks count in the first two: the tenant stream's
-- entries parked for their turn are waiting, the others active.
local group = ARGV[1]
local function counts(stream)
  local len = redis.call('XLEN', stream)
  local active = 0
  if len > 0 or redis.call('EXISTS', stream) == 1 then
    local ok, p = pcall(redis.call, 'XPENDING', stream, group)
    if ok then active = p[1] end
  end
  return len, active
end
local len, active = counts(KEYS[1])
local rows = {}
local levels, has_tenants = levels_of(KEYS[8 + LEVELS])
if #levels == 0 and has_tenants then
  -- The entry the first tenant task left on the main stream is no task.
  len = len - markers_in(KEYS[1], KEYS[8 + LEVELS])
end
if #levels > 0 then
  -- The entries new levels left on the main stream are no tasks.
  len = len - markers_in(KEYS[1], KEYS[8 + LEVELS])
  local main_len, main_active = len, active
  local now = now_ms()
  for l = 0, LEVELS - 1 do
    local key = KEYS[8 + l]
    if key == KEYS[1] or redis.call('EXISTS', key) == 1 then
      local n, a = main_len, main_active
      if key ~= KEYS[1] then
        n, a = counts(key)
        len, active = len + n, active + a
      end
      local oldest = oldest_waiting(key)
      rows[#rows + 1] = {l, n, a, oldest and math.max(0, now - oldest[1]) or -1}
    end
  end
end
local T = 19
if #KEYS >= 18 + TENANTS_LEN and redis.call('EXISTS', KEYS[T]) == 1 then
  local n, held = counts(KEYS[T])
  local parked = redis.call('ZCARD', KEYS[T + 2])
  len, active = len + n, active + math.max(0, held - parked)
end
return {len, active,
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]),
  redis.call('ZCARD', KEYS[4]), redis.call('ZCARD', KEYS[5]),
  tonumber(redis.call('GET', KEYS[6]) or '0') or 0,
  tonumber(redis.call('GET', KEYS[7]) or '0') or 0,
  rows}
