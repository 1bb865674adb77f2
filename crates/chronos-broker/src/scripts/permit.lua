-- Grant a worker permits to start tasks of one queue under its limits: a rate (starts per
-- period, cluster-wide, in fixed windows aligned to the period by Redis' clock) and a
-- concurrency (tasks held at once, cluster-wide). The fetcher asks before it reads and fetches
-- at most what was granted.
-- KEYS[1]  the queue's rate window (hash: w window start ms, n starts granted in it),
-- KEYS[2]  its concurrency permits (zset: token -> expiry ms), KEYS[3] the caller's receipt
-- ARGV[1]  permits wanted, ARGV[2] rate (0: none), ARGV[3] period ms, ARGV[4] concurrency
--          (0: none), ARGV[5] token TTL ms, ARGV[6] token prefix (`<consumer>:<nonce>:`),
--          ARGV[7] this call's nonce, ARGV[8] receipt TTL ms, ARGV[9] wait ms to suggest when
--          only the concurrency limit is full
-- Returns: {granted, wait ms (when nothing was granted: until the next window, or ARGV[9]),
-- window start ms}. The tokens granted are `<prefix>1` .. `<prefix><granted>` (concurrency
-- only), each expiring after the TTL unless refreshed (permit_keep.lua) or released.
-- A re-sent call (same nonce) answers its first run's grant from the receipt and writes nothing.
local want, rate, period = tonumber(ARGV[1]) or 0, tonumber(ARGV[2]) or 0, tonumber(ARGV[3]) or 1000
local conc, ttl, prefix, nonce = tonumber(ARGV[4]) or 0, tonumber(ARGV[5]) or 30000, ARGV[6], ARGV[7]
if period < 1 then period = 1 end
local receipt = redis.pcall('GET', KEYS[3])
if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
  local g, w = string.match(string.sub(receipt, #nonce + 2), '^(%d+):(%-?%d+)')
  return {tonumber(g) or 0, 0, tonumber(w) or 0}
end
if not type_ok(KEYS[1], 'hash') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT limiter keys of the wrong type')
end
local now = now_ms()
local room, wait = want, 0
local w = now - now % period
local used = 0
if rate > 0 then
  local h = redis.call('HMGET', KEYS[1], 'w', 'n')
  if tonumber(h[1]) == w then used = tonumber(h[2]) or 0 end
  if rate - used < room then room = rate - used end
  if room <= 0 then wait = w + period - now end
end
if conc > 0 then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  local held = redis.call('ZCARD', KEYS[2])
  if conc - held < room then room = conc - held end
  if conc - held <= 0 and wait == 0 then wait = tonumber(ARGV[9]) or 100 end
end
if room <= 0 then return {0, math.max(wait, 1), w} end
if rate > 0 then
  redis.call('HSET', KEYS[1], 'w', w, 'n', used + room)
  redis.call('PEXPIRE', KEYS[1], 2 * period)
end
if conc > 0 then
  local args = {KEYS[2]}
  for i = 1, room do
    args[#args + 1] = now + ttl
    args[#args + 1] = prefix .. i
  end
  redis.call('ZADD', unpack(args))
  redis.call('PEXPIRE', KEYS[2], ttl)
end
redis.call('SET', KEYS[3], nonce .. ':' .. room .. ':' .. w .. ':0', 'PX', ARGV[8])
return {room, 0, w}
