-- Helpers shared by the scripts: scripts.rs prepends this file to every script (Redis gives
-- scripts no way to share functions at run time). Functions only; nothing here touches a key.

-- The value of `name` in a flat field list {k1, v1, k2, v2, ...}; nil when absent, or when the
-- list itself is missing (an entry deleted while pending comes back with no fields).
local function field_of(fields, name)
  if not fields then return nil end
  for j = 1, #fields, 2 do
    if fields[j] == name then return fields[j + 1] end
  end
  return nil
end

-- The envelope (`e` field) of entry `mid` of `stream`, or nil.
local function entry_envelope(stream, mid)
  local r = redis.call('XRANGE', stream, mid, mid)
  return field_of(r[1] and r[1][2], 'e')
end

-- Puts task `id` (hash `tkey`) back at the end of `stream` as a new delivery, with its envelope
-- in the entry; `env_in_hash` says the hash still holds a copy (older layout) to drop.
-- Returns the new entry id.
local function back_to_stream(stream, tkey, id, env, env_in_hash)
  local new
  if env then
    new = redis.call('XADD', stream, '*', 'i', id, 'e', env)
  else
    new = redis.call('XADD', stream, '*', 'i', id)
  end
  redis.call('HSET', tkey, 's', 'pending', 'm', new)
  if env_in_hash then redis.call('HDEL', tkey, 'e') end
  return new
end
