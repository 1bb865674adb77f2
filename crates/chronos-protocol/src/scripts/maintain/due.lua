-- List what is due in one queue, by Redis's clock (read only).
-- KEYS[1]  scheduled set, KEYS[2] retry set, KEYS[3] completed set, KEYS[4] archive,
-- KEYS[5]  cancelled set (kept by the archive's rules)
-- ARGV[1]  most ids per list, ARGV[2] archive max age ms, ARGV[3] archive max length,
-- ARGV[4]  which lists: 'f' (forward: scheduled and retry) or 'j' (janitor: completed, archive)
-- Returns: for 'f' {ids, ids, next}: the due scheduled and retry ids, and the ms until the
-- earliest task left in either set is due (0: more are due now; -1: both sets are empty), so
-- an idle forwarder sleeps until then; for 'j' {ids, ids, ids}: the expired retained ids, the
-- archived ids past their age or beyond the length cap (oldest first), and the cancelled ids
-- by the same rules.
-- The writing scripts check each id again, so what changes in between is never acted on wrongly.
local limit = tonumber(ARGV[1]) or 100
if ARGV[4] == 'f' then
  -- An empty set costs one ZRANGE and no TIME; the range query runs only when the set's first
  -- task is due.
  local out, next, now = {}, -1, nil
  local function sooner(ms)
    if next < 0 or ms < next then next = ms end
  end
  for i = 1, 2 do
    out[i] = {}
    local first = redis.call('ZRANGE', KEYS[i], 0, 0, 'WITHSCORES')
    local at = tonumber(first[2])
    if at and not now then now = now_ms() end
    if at and at > now then
      sooner(at - now)
    elseif at then
      out[i] = redis.call('ZRANGEBYSCORE', KEYS[i], '-inf', now, 'LIMIT', 0, limit)
      if #out[i] >= limit then
        sooner(0)
      else
        local after = redis.call('ZRANGEBYSCORE', KEYS[i], '(' .. now, '+inf', 'WITHSCORES',
          'LIMIT', 0, 1)
        if after[2] then sooner(tonumber(after[2]) - now) end
      end
    end
  end
  return {out[1], out[2], next}
end
local now = now_ms()
local maxage, maxlen = tonumber(ARGV[2]) or 0, tonumber(ARGV[3]) or 0
-- The oldest ids of `zset` past the age, then beyond the length cap.
local function aged(zset)
  local old = redis.call('ZRANGEBYSCORE', zset, '-inf', now - maxage, 'LIMIT', 0, limit)
  local over = redis.call('ZCARD', zset) - maxlen - #old
  if over > 0 and #old < limit then
    local extra = redis.call('ZRANGE', zset, #old, #old + math.min(over, limit - #old) - 1)
    for _, id in ipairs(extra) do old[#old + 1] = id end
  end
  return old
end
local cancelled = {}
if KEYS[5] then cancelled = aged(KEYS[5]) end
return {redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, limit), aged(KEYS[4]),
  cancelled}
