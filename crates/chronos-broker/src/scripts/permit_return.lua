-- Give back permits: those of the caller's last grant it did not use (it fetched fewer tasks
-- than granted, or deferred some), and the concurrency tokens of tasks that ended.
-- KEYS[1]  the queue's rate window, KEYS[2] its concurrency permits, KEYS[3] the caller's receipt
-- ARGV[1]  nonce of the grant to give back from ('' for none), ARGV[2] how many of its starts
--          to give back, ARGV[3] receipt TTL ms, then concurrency tokens to release
-- Returns: how many starts went back to the rate window. Starts go back only to the window they
-- were granted in, while it lasts, and only once per grant (the receipt records it), so a
-- re-sent call gives nothing back twice; releasing a token twice is a no-op.
local nonce, back = ARGV[1], tonumber(ARGV[2]) or 0
local returned = 0
if nonce ~= '' and back > 0 then
  local receipt = redis.pcall('GET', KEYS[3])
  if type(receipt) == 'string' and string.sub(receipt, 1, #nonce + 1) == nonce .. ':' then
    local g, w, done = string.match(string.sub(receipt, #nonce + 2), '^(%d+):(%-?%d+):(%d+)')
    local h = read_hash(KEYS[1], 'w', 'n')
    if done == '0' and h and h[1] == w then
      local n = tonumber(h[2]) or 0
      returned = math.min(back, tonumber(g) or 0, n)
      if returned > 0 then redis.call('HSET', KEYS[1], 'n', n - returned) end
    end
    if done == '0' then
      redis.call('SET', KEYS[3], nonce .. ':' .. g .. ':' .. w .. ':1', 'PX', ARGV[3])
    end
  end
end
if #ARGV > 3 and type_ok(KEYS[2], 'zset') then
  for i = 4, #ARGV, 1000 do
    local part = {}
    for j = i, math.min(i + 999, #ARGV) do part[#part + 1] = ARGV[j] end
    redis.call('ZREM', KEYS[2], unpack(part))
  end
end
return returned
