-- keyed-backoff: one key's entry, read and changed atomically.
--
-- The same rules as the in-process manager's policy module (src/keyed/policy.rs),
-- for client-go's doubling rule. An entry is a string, "b,t,a" or
-- "b,t,a;record;record...":
--   b  backoff, nanoseconds: decimal digits, below 2^52 (exact in a Lua double)
--   t  time of the last `next`, in time units (see `unit` below): an integer
--   a  attempts since the entry was (re)initialised: 0 to 4095
--   record  the answer to one of the most recent operations that carried an
--      id, newest first, at most RECENT: "id,1,backoff,attempts" or
--      "id,0,remaining" (none until an operation carries an id)
-- One GET reads it and one SET (with its time to live) writes it.
--
-- Entries written by earlier versions are hashes with the fields b, t, a,
-- r (the records, ";"-separated) and o (the id of the last advance). They
-- are read, held to the same checks, and rewritten as strings.
--
-- Before anything else the key is checked: anything but a missing key or an
-- entry as above is not ours, and every operation (reset included) answers
-- {-1, what is wrong} and leaves it exactly as it was.
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

local tonumber, match, format, sub = tonumber, string.match, string.format, string.sub
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

-- A value as shown in an error: quoted, cut short.
local function shown(v)
  if v == false or v == nil then return 'missing' end
  if #v > 24 then v = sub(v, 1, 24) .. '...' end
  return format('%q', v)
end

local function corrupt(detail)
  return {-1, detail}
end

-- The entry's raw parts: nil when there is none.
local fb, ft, fa, fr, legacy_id
local raw = redis.pcall('GET', key)
if type(raw) == 'table' then
  -- Not a string: a hash of an earlier version, or not ours.
  local kind = redis.call('TYPE', key)['ok']
  if kind ~= 'hash' then
    return corrupt('a ' .. kind .. ', not a keyed-backoff entry')
  end
  local f = redis.call('HMGET', key, 'b', 't', 'a', 'r', 'o')
  fb, ft, fa, fr, legacy_id = f[1], f[2], f[3], f[4], f[5]
elseif raw then
  local rest
  fb, ft, fa, rest = match(raw, '^([^,;]*),([^,;]*),([^,;]*)(.*)$')
  if fb == nil or (rest ~= '' and sub(rest, 1, 1) ~= ';') then
    return corrupt('the value ' .. shown(raw) .. ' is not "backoff,last update,attempts[;records]"')
  end
  if rest ~= '' then fr = sub(rest, 2) end
end

local present = fb ~= nil
local b, t, a = 0, 0, 0
local recent = {}
if present then
  if fb == false or not match(fb, '^%d+$') or #fb > 16 or tonumber(fb) > MASK then
    return corrupt('the backoff (ns) is ' .. shown(fb) .. ', not an integer in [0, 2^52)')
  end
  if ft == false or not match(ft, '^%-?%d+$') or #ft > 19 then
    return corrupt('the last update is ' .. shown(ft) .. ', not an integer of at most 19 digits')
  end
  if fa == false or not match(fa, '^%d+$') or #fa > 4 or tonumber(fa) > MAX_ATTEMPTS then
    return corrupt('the attempt count is ' .. shown(fa) .. ', not an integer in [0, 4095]')
  end
  b, t, a = tonumber(fb), tonumber(ft), tonumber(fa)
  if (t - now) * unit > window_ns then
    return corrupt('the last update is ' .. shown(ft) .. ', more than the expiry window in the future')
  end
  if fr ~= nil and fr ~= false then
    -- Each record ends at a ";" (one is added after the last), so an
    -- empty record is seen as one.
    for record in string.gmatch(fr .. ';', '([^;]*);') do
      local id, flag, value, attempts = match(record, '^(%d+),([01]),(%d+),?(%d*)$')
      if id == nil or #recent >= RECENT or (flag == '1') ~= (attempts ~= '') then
        return corrupt('the records of recent operations are ' .. shown(fr) .. ', not up to 4 "id,flag,value[,attempts]"')
      end
      recent[#recent + 1] = {id = id, flag = tonumber(flag), value = value, attempts = attempts}
    end
  end
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

-- The records, with `record` in front when there is one, the oldest
-- dropped: "" or ";record;record...".
local function records(record)
  local kept = {}
  if record ~= nil then kept[1] = record end
  for i = 1, #recent do
    if #kept >= RECENT then break end
    local r = recent[i]
    local s = r.id .. ',' .. r.flag .. ',' .. r.value
    if r.flag == 1 then s = s .. ',' .. r.attempts end
    kept[#kept + 1] = s
  end
  if #kept == 0 then return '' end
  return ';' .. table.concat(kept, ';')
end

-- Integers as strings: tostring would print a large double in exponent form.
local function int(n)
  return format('%.0f', n)
end

if op == 'gate' then
  local left = remaining(event)
  if left ~= nil then
    left = math.ceil(left)
    if op_id ~= '' then
      -- Remembered without touching the backoff or the time to live.
      redis.call('SET', key, fb .. ',' .. ft .. ',' .. fa .. records(op_id .. ',0,' .. int(left)), 'KEEPTTL')
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
local bs = int(b)
local record = nil
if op_id ~= '' then record = op_id .. ',1,' .. bs .. ',' .. a end
redis.call('SET', key, bs .. ',' .. int(now) .. ',' .. a .. records(record), 'PX', ARGV[10])
return {1, b, a}
