-- POST with a different API key on every request, cycling through a file of keys (one a line).
-- wrk ... -s bench/lua/keys.lua <url> -- <body file> <keys file> <start offset> <wrk threads>
-- Threads take keys in turn from one sequence starting at <start offset>, so a run of N requests
-- uses N distinct keys (while N <= the number of keys).
dofile("bench/lua/report.lua")

counter = 0
local threads = {}

function setup(thread)
  thread:set("tid", #threads)
  threads[#threads + 1] = thread
end

function init(args)
  local f = assert(io.open(args[1], "rb"))
  body = f:read("*a")
  f:close()
  keys = {}
  for line in io.lines(args[2]) do keys[#keys + 1] = line end
  offset = tonumber(args[3] or "0")
  nthreads = tonumber(args[4] or "1")
  headers = { ["Content-Type"] = "application/json" }
  path = wrk.path
end

function request()
  local i = (offset + tid + counter * nthreads) % #keys
  counter = counter + 1
  headers["Authorization"] = "Bearer " .. keys[i + 1]
  return wrk.format("POST", path, headers, body)
end

-- Also report how far into the key sequence the run went, so the next run starts after it.
local report = done
function done(summary, latency, requests)
  report(summary, latency, requests)
  local span = 0
  for i, t in ipairs(threads) do
    local used = t:get("counter") * #threads
    if used > span then span = used end
  end
  io.write(string.format('KEYS_SPAN %d\n', span))
end
