-- Redirect load for wrk: codes from a file (one per line), chosen by Zipf(s) rank
-- (s = 0: uniformly), with a fraction of random unknown codes (404s).
--   wrk ... -s wrk.lua URL -- <codes file> <s> <unknown fraction>
-- The requests are drawn once in init() and replayed in a cycle, so each request costs wrk no
-- more than a fixed request would (drawing per request would make wrk the bottleneck sooner).
local reqs, m, i = {}, 300000, 0
local alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

local function unknown()
  local t = {}
  for k = 1, 7 do
    local c = math.random(62)
    t[k] = alphabet:sub(c, c)
  end
  return table.concat(t)
end

function init(args)
  local codes, n, cdf = {}, 0, {}
  local s = tonumber(args[2]) or 1.0
  local unknown_fraction = tonumber(args[3]) or 0.0
  for line in io.lines(args[1]) do
    n = n + 1
    codes[n] = line
  end
  if s > 0 then
    local sum = 0
    for k = 1, n do
      sum = sum + k ^ (-s)
      cdf[k] = sum
    end
    for k = 1, n do
      cdf[k] = cdf[k] / sum
    end
  end
  math.randomseed(os.time())
  for j = 1, m do
    local code
    if unknown_fraction > 0 and math.random() < unknown_fraction then
      code = unknown()
    elseif s <= 0 then
      code = codes[math.random(n)]
    else
      local u = math.random()
      local lo, hi = 1, n
      while lo < hi do
        local mid = math.floor((lo + hi) / 2)
        if cdf[mid] < u then lo = mid + 1 else hi = mid end
      end
      code = codes[lo]
    end
    reqs[j] = wrk.format("GET", "/" .. code)
  end
  i = math.random(m)
end

function request()
  i = i + 1
  if i > m then i = 1 end
  return reqs[i]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCH %d %d %d %d %d %d %d\n",
    summary.requests, summary.duration, e.status, e.connect + e.read + e.write + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9)))
end
