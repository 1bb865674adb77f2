-- Create a group's record in its callback's queue slot.
-- KEYS[1]  the record (`<ns>:{<cbq>}:g:<gid>`)
-- ARGV[1]  members, ARGV[2] the callback's envelope (counts placeholder inside), ARGV[3] byte
--          offset of the placeholder's text (0-based), ARGV[4] the callback's task id,
-- ARGV[5]  the callback's max retry, ARGV[6] its discard flag ('1'/'0'), ARGV[7] collect results
--          ('1'/'0'), ARGV[8] TTL ms of the record (until and after the callback fires),
-- ARGV[9]  fingerprint of the group's definition
-- Returns: 1 created, 2 the same group exists already (a producer's retry), -2 the id holds
-- another group, -3 the record is not a hash. Nothing is written but on 1.
local h = read_hash(KEYS[1], 'fp')
if h == nil then return -3 end
if h[1] then
  if h[1] == ARGV[9] then return 2 end
  return -2
end
redis.call('HSET', KEYS[1], 'n', ARGV[1], 'ok', '0', 'ko', '0', 'cb', ARGV[2], 'off', ARGV[3],
  'cbid', ARGV[4], 'x', ARGV[5], 'dl', ARGV[6], 'col', ARGV[7], 'ttl', ARGV[8], 'fp', ARGV[9])
redis.call('PEXPIRE', KEYS[1], ARGV[8])
return 1
