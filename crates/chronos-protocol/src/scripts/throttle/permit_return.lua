-- Give back permits: starts of the caller's last grant it did not use (it fetched fewer tasks
-- than granted, or deferred some), and the concurrency tokens of tasks that ended.
-- KEYS[1]  the queue's rate state, KEYS[2] its concurrency permits, KEYS[3] the caller's receipt
-- ARGV[1]  nonce of the grant to give back from ('' for none), ARGV[2] how many of its starts
--          to give back, ARGV[3] rate, ARGV[4] period ms, ARGV[5] receipt TTL ms, then
--          concurrency tokens to release
-- Returns: how many starts went back (whole intervals). A start goes back by moving the rate's next arrival
-- time one interval earlier, never before now (a slot already past is gone), and only once
-- per grant (the receipt records it), so a re-sent call gives nothing back twice; releasing a
-- token twice is a no-op.
local nonce, back = ARGV[1], tonumber(ARGV[2]) or 0
local rate, period = tonumber(ARGV[3]) or 0, tonumber(ARGV[4]) or 1000
local returned = 0
if nonce ~= '' and back > 0 and rate > 0 then
  local receipt = redis.pcall('GET', KEYS[3])
  if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
    local g, done = string.match(string.sub(receipt, #nonce + 2), '^(%d+):(%d+)')
    local h = read_hash(KEYS[1], 't')
    local tat = h and tonumber(h[1])
    if done == '0' then
      if tat then
        local now = now_ms()
        local step = math.max(period, 1) / rate
        local earlier = math.max(tat - math.min(back, tonumber(g) or 0) * step, now)
        returned = math.floor((tat - earlier) / step + 0.5)
        redis.call('HSET', KEYS[1], 't', string.format('%.3f', earlier))
      end
      redis.call('SET', KEYS[3], nonce .. ':' .. g .. ':1', 'PX', ARGV[5])
    end
  end
end
if #ARGV > 5 and type_ok(KEYS[2], 'zset') then
  for i = 6, #ARGV, 1000 do
    local part = {}
    for j = i, math.min(i + 999, #ARGV) do part[#part + 1] = ARGV[j] end
    redis.call('ZREM', KEYS[2], unpack(part))
  end
end
return returned
