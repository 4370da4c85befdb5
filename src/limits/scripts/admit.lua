-- admit.lua: one atomic admission (version check, budgets, parallel caps, rpm, tpm; then counts).
-- Key layout and argument order: src/limits/redis.ts. The logic mirrors src/limits/memory.ts.
--
-- KEYS[1] key version, KEYS[2] team version,
-- KEYS[3..5] base names of team, key, key+model (every key derived from them shares their hash tag),
-- KEYS[6] the scope's in-flight set, KEYS[7] its reservation records.
-- ARGV[1] windowMs  [2] leaseMs  [3] requestId  [4] estimated tokens  [5] estimated cost
-- ARGV[6] key version  [7] team version  [8] tracked ('1': settling counts something; enter the
-- request in the in-flight set)  [9] provisional seeds ('1': answer unseeded rather than create a
-- spend counter from them)
-- then per subject (team, key, model), 7 each: rpm, tpm, maxParallel, spend window id, budget limit
-- ('' with a window id: spend tracked, never blocking), window end (ms, 0 = never), seed. '' = absent.
--
-- Reply: {1, now, rate...} admitted | {2, 'key'|'team'} stale | {3} unseeded |
--        {0, now, rate..., kind, scope, limit, retryAfterMs} refused
-- where rate... = requests limit, remaining, resetMs, tokens limit, remaining, resetMs (-1: none).

local W = tonumber(ARGV[1])
local LEASE = tonumber(ARGV[2])
local rid = ARGV[3]
local tokens = tonumber(ARGV[4])
local cost = tonumber(ARGV[5])
local tracked = ARGV[8] == '1'
local provisional = ARGV[9] == '1'
local LIVE = KEYS[6]
local LRES = KEYS[7]

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local BUDGET_IDLE_MS = 2592000000 -- 30 days: an untouched budget counter is re-seeded from the store
local BUDGET_MARGIN_MS = 3600000
local LIVE_TTL_MS = BUDGET_IDLE_MS + BUDGET_MARGIN_MS
local PURGE_BATCH = 100
local bucket = math.floor(now / W)
local elapsed = now - bucket * W
local frac = elapsed / W
local resetMs = W - elapsed
local cur = string.format('%.0f', bucket)
local prev = string.format('%.0f', bucket - 1)

local function arg(i)
  local a = ARGV[i]
  if a == '' then return nil end
  return tonumber(a)
end

local function fmt(x) return string.format('%.17g', x) end

-- Every read in one MGET: versions, window buckets, budget counters.
local SCOPES = {'team', 'key', 'model'}
local S = {}
local names = {KEYS[1], KEYS[2]}
for i = 1, 3 do
  local o = 9 + (i - 1) * 7
  local base = KEYS[2 + i]
  local s = {base = base, scope = SCOPES[i], rpm = arg(o + 1), tpm = arg(o + 2), par = arg(o + 3),
    wid = ARGV[o + 4], blimit = arg(o + 5), ends = tonumber(ARGV[o + 6]), seed = tonumber(ARGV[o + 7])}
  if s.rpm then
    s.ri = #names + 1
    names[s.ri] = base .. ':rpm:' .. cur
    names[s.ri + 1] = base .. ':rpm:' .. prev
  end
  if s.tpm then
    s.ti = #names + 1
    names[s.ti] = base .. ':tpm:' .. cur
    names[s.ti + 1] = base .. ':tpm:' .. prev
  end
  if s.wid ~= '' then
    s.si = #names + 1
    s.sk = base .. ':b:' .. s.wid .. ':spent'
    names[s.si] = s.sk
    if s.blimit then
      s.bi = s.si
      s.rk = base .. ':b:' .. s.wid .. ':res'
      names[s.bi + 1] = s.rk
    end
  end
  S[i] = s
end
local vals = redis.call('MGET', unpack(names))

if vals[1] and tonumber(vals[1]) > tonumber(ARGV[6]) then return {2, 'key'} end
if vals[2] and tonumber(vals[2]) > tonumber(ARGV[7]) then return {2, 'team'} end

-- A spend counter to create from seeds read from a cache: ask for fresh ones first.
if provisional then
  for i = 1, 3 do
    if S[i].si and not vals[S[i].si] then return {3} end
  end
end

-- Requests whose lease expired without a settlement (their instance died): release their
-- reservations, a bounded number per call.
if tracked then
  local expired = redis.call('ZRANGEBYSCORE', LIVE, '-inf', fmt(now), 'LIMIT', 0, PURGE_BATCH)
  if #expired > 0 then
    local recs = redis.call('HMGET', LRES, unpack(expired))
    for j = 1, #expired do
      local rec = recs[j]
      if rec then
        local amount
        for part in string.gmatch(rec, '[^\n]+') do
          if not amount then
            amount = tonumber(part)
          else
            local v = tonumber(redis.call('GET', part))
            if v then
              v = v - amount
              if v <= 1e-12 then redis.call('DEL', part) else redis.call('SET', part, fmt(v), 'KEEPTTL') end
            end
          end
        end
      end
    end
    redis.call('HDEL', LRES, unpack(expired))
    redis.call('ZREM', LIVE, unpack(expired))
    -- Re-read this request's reservation sums, which may just have dropped.
    for i = 1, 3 do
      local s = S[i]
      if s.bi then vals[s.bi + 1] = redis.call('GET', s.rk) end
    end
  end
end

for i = 1, 3 do
  local s = S[i]
  if s.ri then
    s.rc = tonumber(vals[s.ri]) or 0
    s.rp = tonumber(vals[s.ri + 1]) or 0
    s.re = s.rp * (1 - frac) + s.rc
  end
  if s.ti then
    s.tc = tonumber(vals[s.ti]) or 0
    s.tp = tonumber(vals[s.ti + 1]) or 0
    s.te = s.tp * (1 - frac) + s.tc
  end
end

-- The tightest limit of one kind: least remaining after this request (not counted when refused).
local function tightest(limitField, estField, amount)
  local bl, br = -1, -1
  for i = 1, 3 do
    local s = S[i]
    local l = s[limitField]
    if l then
      local rem = math.floor(l - s[estField] - amount)
      if rem < 0 then rem = 0 end
      if bl == -1 or rem < br or (rem == br and l < bl) then
        bl, br = l, rem
      end
    end
  end
  return bl, br
end

local function reply(status, admitted)
  local rl, rr = tightest('rpm', 're', admitted and 1 or 0)
  local tl, tr = tightest('tpm', 'te', admitted and tokens or 0)
  return {status, now, rl, rr, rl == -1 and -1 or resetMs, tl, tr, tl == -1 and -1 or resetMs}
end

local function refuse(kind, scope, limit, retry)
  local r = reply(0, false)
  r[9] = kind
  r[10] = scope
  r[11] = fmt(limit)
  r[12] = retry
  return r
end

-- Wait until the sliding estimate leaves room for `amount`, assuming no other traffic.
local function retryAfter(c, p, amount, limit)
  local wait
  if amount > limit then
    -- Larger than the whole limit: admitted only once the window is empty (both buckets zero).
    if c > 0 then wait = resetMs + W else wait = resetMs end
  elseif c + amount <= limit then
    wait = (1 - (limit - amount - c) / p) * W - elapsed
  else
    wait = resetMs + (1 - (limit - amount) / c) * W
  end
  wait = math.ceil(wait)
  if wait < 1 then wait = 1 end
  return wait
end

local function budgetTtl(ends)
  local ttl = BUDGET_IDLE_MS
  if ends > 0 and ends - now < ttl then ttl = math.max(ends - now, 0) end
  return string.format('%.0f', ttl + BUDGET_MARGIN_MS)
end

-- Budgets: team, key, model.
for i = 1, 3 do
  local s = S[i]
  if s.si then
    s.missing = not vals[s.si]
    s.spent = tonumber(vals[s.si]) or s.seed
  end
  if s.bi then
    s.res = tonumber(vals[s.bi + 1]) or 0
    if s.spent + s.res >= s.blimit then
      local retry = 0
      if s.ends > 0 then retry = math.max(0, s.ends - now) end
      return refuse('budget', s.scope, s.blimit, retry)
    end
  end
end

-- Parallel caps: team, key.
for i = 1, 2 do
  local s = S[i]
  if s.par then
    s.pk = s.base .. ':par'
    redis.call('ZREMRANGEBYSCORE', s.pk, '-inf', fmt(now))
    if redis.call('ZCARD', s.pk) >= s.par then return refuse('parallel', s.scope, s.par, 1000) end
  end
end

for i = 1, 3 do
  local s = S[i]
  if s.rpm and s.re + 1 > s.rpm then return refuse('rpm', s.scope, s.rpm, retryAfter(s.rc, s.rp, 1, s.rpm)) end
end

-- A request larger than the whole tpm limit would never fit: it is admitted when the window is
-- empty, so such requests are not blocked forever (at most one per window and a half).
for i = 1, 3 do
  local s = S[i]
  if s.tpm and s.te + tokens > s.tpm and not (tokens > s.tpm and s.te == 0) then
    return refuse('tpm', s.scope, s.tpm, retryAfter(s.tc, s.tp, tokens, s.tpm))
  end
end

-- Everything passed: count.
local ttlW = fmt(2 * W)
local exp = fmt(now + LEASE)
local resKeys = {}
for i = 1, 3 do
  local s = S[i]
  if s.ri then redis.call('SET', names[s.ri], fmt(s.rc + 1), 'PX', ttlW) end
  if s.ti and tokens > 0 then redis.call('SET', names[s.ti], fmt(s.tc + tokens), 'PX', ttlW) end
  if s.pk then
    redis.call('ZADD', s.pk, exp, rid)
    redis.call('PEXPIRE', s.pk, LEASE)
  end
  if s.si then
    local ttl = budgetTtl(s.ends)
    if s.missing then
      redis.call('SET', s.sk, fmt(s.spent), 'PX', ttl)
      redis.call('SET', s.base .. ':b:' .. s.wid .. ':born', fmt(now), 'PX', ttl)
    end
    if s.bi and cost > 0 then
      redis.call('SET', s.rk, fmt(s.res + cost), 'PX', ttl)
      resKeys[#resKeys + 1] = s.rk
    end
  end
end
if tracked then
  redis.call('ZADD', LIVE, exp, rid)
  redis.call('PEXPIRE', LIVE, LIVE_TTL_MS)
  if #resKeys > 0 then
    redis.call('HSET', LRES, rid, ARGV[5] .. '\n' .. table.concat(resKeys, '\n'))
    redis.call('PEXPIRE', LRES, LIVE_TTL_MS)
  end
end

return reply(1, true)
