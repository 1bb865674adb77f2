-- Deliveries a blocking read handed out while their queue, or their rate key, is blocked by a
-- handler (a block set after the read began waiting, or a key block: the blocking read cannot
-- check keys; lib.lua `queue_block_end`, `key_block_end`): each leaves the stream for the
-- queue's scheduled set, due at the block's end plus a jitter (lib.lua `backoff_due`), without
-- an attempt and without an error, as admit.lua defers a delivery of a full key. With no
-- block at all nothing changes (one EXISTS) and every delivery is answered "run".
-- KEYS[1]  the stream the deliveries came from, KEYS[2] the scheduled set, KEYS[3] the
--          queue's block, KEYS[4] its blocked keys, then one task hash per delivery; then, for
--          deliveries of the tenant stream, the tenants block (lib.lua: "Tenants"); last, the
--          queue's event stream (lib.lua: `EVENTS`)
-- ARGV[1]  consumer group, then triples: task id, stream entry id, rate key ('' for none)
-- Returns: one row per delivery: {1} run it, {0, due ms} held back, {-1} no longer current
-- (settled or deleted: its entry is acked and removed). A re-sent call answers the same: a
-- held delivery is recorded in the hash's `d` with state `scheduled`. Each delivery held back
-- writes its `deferred` event (once: a re-sent call writes none).
local group = ARGV[1]
local n = (#ARGV - 1) / 3
local out = {}
if redis.call('EXISTS', KEYS[3], KEYS[4]) == 0 then
  for t = 1, n do out[t] = {1} end
  return out
end
if not type_ok(KEYS[1], 'stream') or not type_ok(KEYS[2], 'zset') then
  return redis.error_reply('E_CORRUPT queue keys of the wrong type')
end
local now = now_ms()
local qends = queue_block_end(KEYS[3], now)
local T = nil
if #KEYS >= 4 + n + TENANTS_LEN then T = 5 + n end
for t = 0, n - 1 do
  local id, mid, rk = ARGV[2 + t * 3], ARGV[3 + t * 3], ARGV[4 + t * 3]
  local tkey = KEYS[5 + t]
  local ends = qends
  if ends == 0 and rk ~= '' then ends = key_block_end(KEYS[4], rk, now) end
  if ends == 0 then
    out[#out + 1] = {1}
  else
    materialize_if_plain(KEYS[1], group, tkey, id, mid)
    local h = read_hash(tkey, F_DELIVERY, F_SETTLED, F_STATE)
    if h == nil then
      out[#out + 1] = {1}
    elseif h[1] == mid then
      local due = backoff_due(id, ends, now)
      local env = set_aside(KEYS[1], group, tkey, id, mid, {F_STATE, 'scheduled', F_SETTLED, mid},
        KEYS[2], due, T)
      transition(EV.DEFERRED, id, env, E.AT, due, E.REASON,
        qends > 0 and 'queue blocked' or 'rate key blocked')
      out[#out + 1] = {0, due}
    elseif h[2] == mid and h[3] == 'scheduled' then
      out[#out + 1] = {0, tonumber(redis.call('ZSCORE', KEYS[2], id)) or ends}
    else
      settle_entries(KEYS[1], group, {mid})
      out[#out + 1] = {-1}
    end
  end
end
return out
