-- keyed-backoff: one key's entry, read and changed atomically.
--
-- The same rules as the in-process manager's policy module (src/keyed/policy.rs),
-- for client-go's doubling rule. An entry is a hash with fields
--   b  backoff, nanoseconds (an integer below 2^52, exact in a Lua double)
--   t  time of the last `next`, in time units (see `unit` below)
--   a  attempts since the entry was (re)initialised, at most 4095
--   o  the operation id of the last `next`/`gate` that advanced it
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
-- get/attempts/remaining an integer (0: none); since/since_update/reset 0 or 1.

local MASK = 4503599627370495 -- 2^52 - 1, the largest backoff
local MAX_ATTEMPTS = 4095

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

if op == 'reset' then
  return redis.call('DEL', key)
end

local fields = redis.call('HMGET', key, 'b', 't', 'a', 'o')
local present = fields[1] ~= false
local b = tonumber(fields[1]) or 0
local t = tonumber(fields[2]) or 0
local a = tonumber(fields[3]) or 0

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

-- next and gate write. A retried operation id returns the entry it made.
local op_id = ARGV[11]
if op_id ~= '' and fields[4] == op_id then
  return {1, b, a}
end
if op == 'gate' then
  local left = remaining(event)
  if left ~= nil then return {0, math.ceil(left)} end
elseif op ~= 'next' then
  return redis.error_reply('keyed-backoff: unknown op ' .. op)
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
redis.call('HSET', key, 'b', string.format('%.0f', b), 't', string.format('%.0f', now),
  'a', a, 'o', op_id)
redis.call('PEXPIRE', key, ARGV[10])
return {1, b, a}
