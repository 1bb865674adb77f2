-- List what is due in one queue, by Redis's clock (read only).
-- KEYS[1]  scheduled set, KEYS[2] retry set, KEYS[3] completed set, KEYS[4] archive
-- ARGV[1]  most ids per list, ARGV[2] archive max age ms, ARGV[3] archive max length,
-- ARGV[4]  which lists: 'f' (forward: scheduled and retry) or 'j' (janitor: completed, archive)
-- Returns: {ids, ids}: for 'f' the due scheduled and retry ids; for 'j' the expired retained
-- ids, and the archived ids past their age or beyond the length cap (oldest first).
-- The writing scripts check each id again, so what changes in between is never acted on wrongly.
local now, limit = now_ms(), tonumber(ARGV[1]) or 100
if ARGV[4] == 'f' then
  return {redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, limit),
          redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, limit)}
end
local maxage, maxlen = tonumber(ARGV[2]) or 0, tonumber(ARGV[3]) or 0
local old = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now - maxage, 'LIMIT', 0, limit)
local over = redis.call('ZCARD', KEYS[4]) - maxlen - #old
if over > 0 and #old < limit then
  local extra = redis.call('ZRANGE', KEYS[4], #old, #old + math.min(over, limit - #old) - 1)
  for _, id in ipairs(extra) do old[#old + 1] = id end
end
return {redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit), old}
