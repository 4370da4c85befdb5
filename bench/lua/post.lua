-- POST the same body with the same headers on every request.
-- wrk ... -s bench/lua/post.lua <url> -- <body file> <headers file: one "Name: value" a line>
dofile("bench/lua/report.lua")

local function read(path)
  local f = assert(io.open(path, "rb"))
  local s = f:read("*a")
  f:close()
  return s
end

function init(args)
  wrk.method = "POST"
  wrk.body = read(args[1])
  for line in read(args[2]):gmatch("[^\n]+") do
    local name, value = line:match("^([^:]+):%s*(.*)$")
    if name then wrk.headers[name] = value end
  end
end
