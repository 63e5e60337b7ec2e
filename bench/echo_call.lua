-- wrk script: every request is a JSON-RPC `tools/call` of `echo`, every response is checked.
--
--   wrk -t1 -c64 -d10s --latency -s echo_call.lua URL [-H "K: V"]... -- TEXT SESSIONS_FILE [BODY]
--
-- SESSIONS_FILE holds one Mcp-Session-Id per line (one per connection, opened by the driver);
-- "-" for a stateless server. Requests rotate over the sessions. A response is good when it is
-- HTTP 200, framed as JSON (a body starting with `{`) or SSE (a `data:` line), holds the echoed
-- text and no `"isError":true`; anything else counts as bad. `done` prints one line
-- `BENCH_RESULT {...}` that the driver parses.
--
-- BODY (the modern era, MCP 2026-07-28): the request body as the driver builds it
-- (`client.modern_echo`), with `"id":0,` where each request's id goes; the headers it needs come
-- with -H. No session is sent. A response is then good only if it also is one JSON body (no SSE)
-- with `"resultType":"complete"`, answers an id sent and not yet answered, and names no session.

local threads = {}

function setup(thread)
  threads[#threads + 1] = thread
  thread:set("thread_no", #threads)
end

function init(args)
  text = args[1] or "bench-echo"
  sessions = {}
  if args[2] and args[2] ~= "-" then
    for line in io.lines(args[2]) do
      if line ~= "" then sessions[#sessions + 1] = line end
    end
  end
  headers = {}
  for name, value in pairs(wrk.headers) do headers[name] = value end
  headers["Content-Type"] = "application/json"
  headers["Accept"] = "application/json, text/event-stream"
  expected = '"text":"' .. text .. '"'
  if args[3] then
    local at = string.find(args[3], '"id":0,', 1, true)
    if not at then error('BODY has no "id":0, where the request id goes') end
    body_head, body_tail, pending = string.sub(args[3], 1, at + 4), string.sub(args[3], at + 6), {}
  end
  sent, bad, shown = 0, 0, 0
end

function request()
  sent = sent + 1
  if #sessions > 0 then headers["Mcp-Session-Id"] = sessions[sent % #sessions + 1] end
  local id = thread_no * 1000000000 + sent
  if body_head then
    pending[id] = true
    return wrk.format("POST", nil, headers, body_head .. id .. body_tail)
  end
  local body = '{"jsonrpc":"2.0","id":' .. id
    .. ',"method":"tools/call","params":{"name":"echo","arguments":{"text":"' .. text .. '"}}}'
  return wrk.format("POST", nil, headers, body)
end

local function is_framed(body)
  return string.sub(body, 1, 1) == "{" or string.find(body, "data: {", 1, true) ~= nil
      or string.find(body, "data:{", 1, true) ~= nil
end

-- A modern answer: one JSON body, complete, to a request sent and not answered before, no session.
local function is_modern_answer(response_headers, body)
  if string.sub(body, 1, 1) ~= "{" or not string.find(body, '"resultType":"complete"', 1, true) then
    return false
  end
  for name, _ in pairs(response_headers) do
    if string.lower(name) == "mcp-session-id" then return false end
  end
  local id = tonumber(string.match(body, '"id":(%d+)'))
  if id == nil or not pending[id] then return false end
  pending[id] = nil
  return true
end

function response(status, response_headers, body)
  body = body or ""
  if status == 200 and is_framed(body) and string.find(body, expected, 1, true)
      and not string.find(body, '"isError":true', 1, true)
      and (not body_head or is_modern_answer(response_headers, body)) then
    return
  end
  bad = bad + 1
  if shown < 3 then
    shown = shown + 1
    io.stderr:write("bad response: HTTP ", status, " ", string.sub(body, 1, 400), "\n")
  end
end

function done(summary, latency, _)
  local total_bad = 0
  for _, thread in ipairs(threads) do total_bad = total_bad + (thread:get("bad") or 0) end
  local errors = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"requests":%d,"duration_s":%.3f,"p50_ms":%.3f,"p90_ms":%.3f,"p99_ms":%.3f,'
      .. '"max_ms":%.3f,"mean_ms":%.3f,"bad":%d,"err_connect":%d,"err_read":%d,"err_write":%d,'
      .. '"err_status":%d,"err_timeout":%d}\n',
    summary.requests, summary.duration / 1e6, latency:percentile(50) / 1e3, latency:percentile(90) / 1e3,
    latency:percentile(99) / 1e3, latency.max / 1e3, latency.mean / 1e3, total_bad,
    errors.connect, errors.read, errors.write, errors.status, errors.timeout))
end
