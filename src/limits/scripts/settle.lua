-- settle.lua: one atomic settlement of an admitted request, counted once.
-- Key layout and argument order: src/limits/redis.ts. The logic mirrors src/limits/memory.ts.
--
-- KEYS[1..3] base names of team, key, key+model (as in admit.lua), KEYS[4] the scope's in-flight
-- set, KEYS[5] its reservation records.
-- ARGV[1] windowMs  [2] admittedAt (ms)  [3] requestId  [4] estimated tokens  [5] estimated cost
-- ARGV[6] actual tokens  [7] actual cost  [8] tracked ('1'/'')  [9] reserved ('1'/'')
-- then per subject (team, key, model), 7 each: tpm counted ('1'/''), parallel lease held ('1'/''),
-- budget window id ('' = spend not tracked), reservation held ('1'/''), window end (0 = never), seed,
-- soft budget ('' = none; key only).
--
-- Reply: {key spend, team spend, soft budget crossed (0/1), now}; spends as strings.

local W = tonumber(ARGV[1])
local admittedAt = tonumber(ARGV[2])
local rid = ARGV[3]
local estTokens = tonumber(ARGV[4])
local estCost = tonumber(ARGV[5])
local actTokens = tonumber(ARGV[6])
local actCost = tonumber(ARGV[7])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

local BUDGET_IDLE_MS = 2592000000
local BUDGET_MARGIN_MS = 3600000

local function fmt(x) return string.format('%.17g', x) end

local function budgetTtl(ends)
  local ttl = BUDGET_IDLE_MS
  if ends > 0 and ends - now < ttl then ttl = math.max(ends - now, 0) end
  return string.format('%.0f', ttl + BUDGET_MARGIN_MS)
end

-- Counts only if this request is still in flight: not settled already (a retry after a lost
-- reply), not expired (its reservation was released by an admission meanwhile).
local first = true
if ARGV[8] == '1' then first = redis.call('ZREM', KEYS[4], rid) == 1 end
if first and ARGV[9] == '1' then redis.call('HDEL', KEYS[5], rid) end

-- The reservation went into the bucket of admission; while that bucket is still part of the
-- sliding window the difference goes there. Once it has slid out, only extra use (a positive
-- difference) is added to the current bucket: refunding a reservation that no longer counts
-- would free room that was never taken.
local delta = actTokens - estTokens
local bucket = math.floor(now / W)
local ab = math.floor(admittedAt / W)
local target
if ab >= bucket - 1 then
  target = string.format('%.0f', ab)
elseif delta > 0 then
  target = string.format('%.0f', bucket)
end

-- Every read in one MGET: the tpm buckets to correct and the budget counters.
local P = {}
local names = {}
for i = 1, 3 do
  local o = 9 + (i - 1) * 7
  local base = KEYS[i]
  local p = {base = base, wid = ARGV[o + 3]}
  if first and ARGV[o + 1] == '1' and target and delta ~= 0 then
    p.ti = #names + 1
    names[p.ti] = base .. ':tpm:' .. target
  end
  if p.wid ~= '' then
    p.bi = #names + 1
    names[p.bi] = base .. ':b:' .. p.wid .. ':spent'
    names[p.bi + 1] = base .. ':b:' .. p.wid .. ':res'
  end
  P[i] = p
end
local vals = {}
if #names > 0 then vals = redis.call('MGET', unpack(names)) end

local spends = {'0', '0'}
local crossed = 0
for i = 1, 3 do
  local o = 9 + (i - 1) * 7
  local p = P[i]
  if p.ti then
    local n = (tonumber(vals[p.ti]) or 0) + delta
    if n < 0 then n = 0 end
    redis.call('SET', names[p.ti], fmt(n), 'PX', fmt(2 * W))
  end
  if ARGV[o + 2] == '1' then redis.call('ZREM', p.base .. ':par', rid) end
  if p.bi then
    local sk = names[p.bi]
    local rk = names[p.bi + 1]
    local ttl = budgetTtl(tonumber(ARGV[o + 5]))
    local stored = vals[p.bi]
    local spent = tonumber(stored) or tonumber(ARGV[o + 6])
    if first then
      spent = spent + actCost
      if not stored then
        redis.call('SET', sk, fmt(spent), 'PX', ttl)
        redis.call('SET', p.base .. ':b:' .. p.wid .. ':born', fmt(now), 'PX', ttl)
      elseif actCost > 0 then
        redis.call('SET', sk, fmt(spent), 'PX', ttl)
      end
      if ARGV[o + 4] == '1' and estCost > 0 and vals[p.bi + 1] then
        local res = tonumber(vals[p.bi + 1]) - estCost
        if res <= 1e-12 then
          redis.call('DEL', rk)
        else
          redis.call('SET', rk, fmt(res), 'KEEPTTL')
        end
      end
    end
    if i < 3 then spends[3 - i] = fmt(spent) end
    local soft = ARGV[o + 7]
    if soft ~= '' then
      local softKey = p.base .. ':b:' .. p.wid .. ':soft'
      if first then
        if spent >= tonumber(soft) and redis.call('SET', softKey, rid, 'NX', 'PX', ttl) then crossed = 1 end
      elseif redis.call('GET', softKey) == rid then
        -- The first attempt crossed it but its answer was lost: report it now.
        crossed = 1
      end
    end
  end
end

return {spends[1], spends[2], crossed, now}
