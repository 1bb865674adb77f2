-- Grant a worker permits to start tasks of one queue under its limits: a rate (starts per
-- period, cluster-wide) and a concurrency (tasks held at once, cluster-wide). The fetcher asks
-- before it reads and fetches at most what was granted.
-- The rate is a generic cell rate algorithm (GCRA) on Redis' clock: starts are spaced one
-- emission interval T = period / rate apart, with up to `burst` granted at once, so any
-- window of one period holds at most rate + burst grants (never the 2 x rate a fixed window
-- allows across its boundary), and a steady demand is granted evenly over the period.
-- The tolerance has half an interval (at most 10 ms) of slack beyond the burst: a waiting
-- caller is told to come back that much before its slot, so a caller woken a little late
-- still finds its slot ahead instead of losing it (GCRA never gives back time that passed
-- unused), and a saturated queue gets its full rate.
-- KEYS[1]  the queue's rate state (hash: t theoretical arrival time of the next start, ms),
-- KEYS[2]  its concurrency permits (zset: token -> expiry ms), KEYS[3] the caller's receipt
-- ARGV[1]  permits wanted, ARGV[2] rate (0: none), ARGV[3] period ms, ARGV[4] burst,
-- ARGV[5]  concurrency (0: none), ARGV[6] token TTL ms, ARGV[7] token prefix
--          (`<consumer>:<nonce>:`), ARGV[8] this call's nonce, ARGV[9] receipt TTL ms,
-- ARGV[10] wait ms to suggest when only the concurrency limit is full
-- Returns: {granted, wait ms (when nothing was granted: until the rate has room again, or
-- ARGV[10])}. The tokens granted are `<prefix>1` .. `<prefix><granted>` (concurrency only),
-- each expiring after the TTL unless refreshed (permit_keep.lua) or released.
-- A re-sent call (same nonce) answers its first run's grant from the receipt and writes nothing.
local want, rate, period = tonumber(ARGV[1]) or 0, tonumber(ARGV[2]) or 0, tonumber(ARGV[3]) or 1000
local burst, conc, ttl = tonumber(ARGV[4]) or 1, tonumber(ARGV[5]) or 0, tonumber(ARGV[6]) or 30000
local prefix, nonce = ARGV[7], ARGV[8]
if period < 1 then period = 1 end
if burst < 1 then burst = 1 end
local receipt = redis.pcall('GET', KEYS[3])
if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
  local g = string.match(string.sub(receipt, #nonce + 2), '^(%d+):')
  return {tonumber(g) or 0, 0}
end
if not type_ok(KEYS[1], 'hash') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT limiter keys of the wrong type')
end
local now = now_ms()
local room, wait = want, 0
local tat, step = now, 0
if rate > 0 then
  step = period / rate
  local tau = (burst - 1) * step + math.min(step / 2, 10)
  tat = math.max(tonumber(redis.call('HGET', KEYS[1], 't')) or now, now)
  -- Under one rate the state never runs further ahead than now + tau + step (a grant needs
  -- tat - now <= tau first). A state beyond that was left by a slower rate, which the queue's
  -- stored settings replaced at run time: the new rate starts from its own bound instead of
  -- inheriting the old one's wait (an hour under 1/1h). The bound is stored, so that time
  -- runs down from it even while nothing is granted.
  if tat > now + tau + step then
    tat = now + tau + step
    redis.call('HSET', KEYS[1], 't', string.format('%.3f', tat))
    redis.call('PEXPIRE', KEYS[1], math.ceil(tat - now + period))
  end
  -- The k-th start conforms while tat + (k - 1) * step - now <= tau.
  local allowed = math.floor((now + tau - tat) / step) + 1
  if allowed < room then room = allowed end
  if room <= 0 then wait = math.ceil(tat - tau - now) end
end
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local held = redis.call('ZCARD', KEYS[2])
  if conc - held < room then room = conc - held end
  if conc - held <= 0 and wait <= 0 then wait = tonumber(ARGV[10]) or 100 end
end
if room <= 0 then return {0, math.max(wait, 1)} end
if rate > 0 then
  tat = tat + room * step
  redis.call('HSET', KEYS[1], 't', string.format('%.3f', tat))
  redis.call('PEXPIRE', KEYS[1], math.ceil(tat - now + period))
end
if conc > 0 then
  local args = {KEYS[2]}
  for i = 1, room do
    args[#args + 1] = now + ttl
    args[#args + 1] = prefix .. i
  end
  redis.call('ZADD', unpack(args))
  expire_with_last(KEYS[2])
end
redis.call('SET', KEYS[3], nonce .. ':' .. room .. ':0', 'PX', ARGV[9])
return {room, 0}
