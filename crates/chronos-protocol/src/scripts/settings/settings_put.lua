-- Change a queue's stored settings in one step, and read them back.
-- KEYS[1]  the queue's settings hash
-- ARGV     pairs of field, value: a value stores the field, an empty value removes it (the
--          servers' configuration applies again)
-- Returns: the hash after the change as a flat field, value list (HGETALL's shape); an error
-- when KEYS[1] holds another type. Every value is absolute, so a re-sent call stores the same
-- and answers the same. Removing the last field leaves no key behind (Redis deletes an empty
-- hash).
if not type_ok(KEYS[1], 'hash') then
  return redis.error_reply('WRONGTYPE the settings key holds another type')
end
for i = 1, #ARGV - 1, 2 do
  if ARGV[i + 1] == '' then
    redis.call('HDEL', KEYS[1], ARGV[i])
  else
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return redis.call('HGETALL', KEYS[1])
