-- keyed-backoff: one key's entry, read and changed atomically.
--
-- The same rules as the in-process manager's policy module (src/keyed/policy.rs),
-- for client-go's doubling rule. An entry is a hash with fields
--   b  backoff, nanoseconds: decimal digits, below 2^52 (exact in a Lua double)
--   t  time of the last `next`, in time units (see `unit` below): an integer
--   a  attempts since the entry was (re)initialised: 0 to 4095
--   r  the answers to the most recent operations that carried an id, newest
--      first, at most RECENT: "id,1,backoff,attempts" or "id,0,remaining",
--      separated by ";" (absent until an operation carries an id)
-- Entries written by earlier versions may also hold `o` (the id of the last
-- advance), which is still honoured.
--
-- Before anything else the key is checked: anything but a missing key or a
-- hash whose fields are as above is not ours, and every operation (reset
-- included) answers {-1, what is wrong} and leaves it exactly as it was.
--
-- KEYS[1]  the entry's key
-- ARGV[1]  op: next | gate | get | attempts | since | since_update | remaining | reset | collect
-- ARGV[2]  now in time units, or "" to read Redis TIME (microseconds)
-- ARGV[3]  unit: nanoseconds per time unit (1 for a caller's clock, 1000 for TIME)
-- ARGV[4]  the event's age in nanoseconds: now - event (negative: in the future)
-- ARGV[5]  initial backoff, ns        ARGV[6]  max backoff, ns
-- ARGV[7]  jitter factor              ARGV[8]  a uniform draw in [0, 1)
-- ARGV[9]  expiry window, ns          ARGV[10] time to live of a written entry, ms
-- ARGV[11] operation id ("" for none)
--
-- Replies: next/gate {1, backoff_ns, attempts} or, refused, {0, remaining_ns};
-- get/attempts/remaining an integer (0: none); since/since_update/reset/collect
-- 0 or 1; anything not ours {-1, detail}.

local MASK = 4503599627370495 -- 2^52 - 1, the largest backoff
local MAX_ATTEMPTS = 4095
local RECENT = 4 -- operation ids remembered per key

local key = KEYS[1]
local op = ARGV[1]
local unit = tonumber(ARGV[3])
local now
if ARGV[2] == '' then
  local time = redis.call('TIME')
  now = tonumber(time[1]) * 1000000 + tonumber(time[2])
else
  now = tonumber(ARGV[2])
end
local age_ns = tonumber(ARGV[4])
local event = now - age_ns / unit
local window_ns = tonumber(ARGV[9])
local op_id = ARGV[11]

-- A field's value as shown in an error: quoted, cut short.
local function shown(v)
  if v == false then return 'missing' end
  if #v > 24 then v = string.sub(v, 1, 24) .. '...' end
  return string.format('%q', v)
end

local function corrupt(detail)
  return {-1, detail}
end

local kind = redis.call('TYPE', key)['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return corrupt('a ' .. kind .. ', not a keyed-backoff entry')
end
local present = kind == 'hash'
local b, t, a, legacy_id = 0, 0, 0, false
local recent = {}
if present then
  local f = redis.call('HMGET', key, 'b', 't', 'a', 'r', 'o')
  if f[1] == false or not string.match(f[1], '^%d+$') or #f[1] > 16 or tonumber(f[1]) > MASK then
    return corrupt('field b (backoff, ns) is ' .. shown(f[1]) .. ', not an integer in [0, 2^52)')
  end
  if f[2] == false or not string.match(f[2], '^%-?%d+$') or #f[2] > 19 then
    return corrupt('field t (last update) is ' .. shown(f[2]) .. ', not an integer of at most 19 digits')
  end
  if f[3] == false or not string.match(f[3], '^%d+$') or #f[3] > 4 or tonumber(f[3]) > MAX_ATTEMPTS then
    return corrupt('field a (attempts) is ' .. shown(f[3]) .. ', not an integer in [0, 4095]')
  end
  b, t, a = tonumber(f[1]), tonumber(f[2]), tonumber(f[3])
  if (t - now) * unit > window_ns then
    return corrupt('field t (last update) is ' .. shown(f[2]) .. ', more than the expiry window in the future')
  end
  if f[4] ~= false then
    for record in string.gmatch(f[4], '[^;]+') do
      local id, flag, value, attempts = string.match(record, '^(%d+),([01]),(%d+),?(%d*)$')
      if id == nil or #recent >= RECENT or (flag == '1') ~= (attempts ~= '') then
        return corrupt('field r (recent operations) is ' .. shown(f[4]) .. ', not up to 4 "id,flag,value[,attempts]" records')
      end
      recent[#recent + 1] = {id = id, flag = tonumber(flag), value = value, attempts = attempts}
    end
  end
  legacy_id = f[5]
end

if op == 'reset' then
  return redis.call('DEL', key)
end

-- Stale as of `at`: more than the window has passed since the last update.
local function expired(at)
  return (at - t) * unit > window_ns
end

-- The wait left at `at` (ns), or nil when stale or past the window.
local function remaining(at)
  if not present or expired(at) then return nil end
  local left = b - (at - t) * unit
  if left > 0 then return left end
  return nil
end

if op == 'collect' then
  if present and expired(now) then return redis.call('DEL', key) end
  return 0
end
if op == 'get' then return b end
if op == 'attempts' then return a end
if op == 'remaining' then
  local left = remaining(event)
  if left == nil then return 0 end
  return math.ceil(left)
end
if op == 'since_update' then
  if remaining(event) ~= nil then return 1 end
  return 0
end
if op == 'since' then
  if present and not expired(event) and age_ns < b then return 1 end
  return 0
end
if op ~= 'gate' and op ~= 'next' then
  return redis.error_reply('keyed-backoff: unknown op ' .. op)
end

-- next and gate. A retried operation id gets the answer it got first.
if op_id ~= '' then
  for _, r in ipairs(recent) do
    if r.id == op_id then
      if r.flag == 1 then return {1, tonumber(r.value), tonumber(r.attempts)} end
      return {0, tonumber(r.value)}
    end
  end
  if legacy_id == op_id then return {1, b, a} end
end

-- The `r` field with `record` in front, the oldest dropped.
local function remembered(record)
  local kept = {record}
  for i = 1, math.min(#recent, RECENT - 1) do
    local r = recent[i]
    local s = r.id .. ',' .. r.flag .. ',' .. r.value
    if r.flag == 1 then s = s .. ',' .. r.attempts end
    kept[#kept + 1] = s
  end
  return table.concat(kept, ';')
end

if op == 'gate' then
  local left = remaining(event)
  if left ~= nil then
    left = math.ceil(left)
    if op_id ~= '' then
      -- Remembered without touching the backoff or the time to live.
      redis.call('HSET', key, 'r', remembered(op_id .. ',0,' .. string.format('%.0f', left)))
    end
    return {0, left}
  end
end

local initial = tonumber(ARGV[5])
local cap = tonumber(ARGV[6])
local factor = tonumber(ARGV[7])
local u = tonumber(ARGV[8])
-- client-go's jitter: truncated toward zero, drawn from the previous backoff.
local function jitter(of)
  if factor == 0 then return 0 end
  return math.floor(u * factor * of)
end
if present and not expired(event) then
  b = math.min(2 * b + jitter(b), cap)
  a = math.min(a + 1, MAX_ATTEMPTS)
else
  b = initial + jitter(initial)
  a = 1
end
b = math.min(b, MASK)
-- Integers as strings: HSET would print a large double in exponent form.
local bs = string.format('%.0f', b)
if op_id ~= '' then
  redis.call('HSET', key, 'b', bs, 't', string.format('%.0f', now), 'a', a,
    'r', remembered(op_id .. ',1,' .. bs .. ',' .. a))
else
  redis.call('HSET', key, 'b', bs, 't', string.format('%.0f', now), 'a', a)
end
if legacy_id ~= false then redis.call('HDEL', key, 'o') end
redis.call('PEXPIRE', key, ARGV[10])
return {1, b, a}
