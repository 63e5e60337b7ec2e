#!/usr/bin/env bash
# Run the official MCP conformance suite (@modelcontextprotocol/conformance) against aql-mcp.
#
#   scripts/conformance.sh URL          a running server; token from MCP_TOKEN (optional)
#   scripts/conformance.sh --serve      start one in development mode with the fixture plugin
#   CONFORMANCE_VERSION=0.2.0-alpha.12 scripts/conformance.sh --serve --spec-version 2026-07-28
#                                       the 0.2 suite against the modern era (extra args go to the suite)
#
# Installs, once, into .tools/ (scripts/node.sh): Node 22 from the npm registry when the system has
# none, and the suite at CONFORMANCE_VERSION. Prints the suite's summary and a last line
# "conformance: N passed, M failed". Exit status is the suite's.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TOOLS="$ROOT/.tools"
VERSION="${CONFORMANCE_VERSION:-0.1.16}"
SUITE="${CONFORMANCE_SUITE:-all}"
mkdir -p "$TOOLS"

. scripts/node.sh

# The suite has no header option: this preload adds the bearer token to every request it makes
# (global fetch for the SDK transport and raw scenarios, undici's dispatcher for the others). It
# lives beside the suite's node_modules so that `import('undici')` finds the suite's own copy.
write_preload() {
  cat > "$TOOLS/conformance/bearer-preload.mjs" <<'JS'
const value = `Bearer ${process.env.MCP_TOKEN}`;
const originalFetch = globalThis.fetch;
globalThis.fetch = (input, init = {}) => {
  const headers = new Headers(init.headers ?? (input instanceof Request ? input.headers : undefined));
  if (!headers.has('authorization')) headers.set('authorization', value);
  return originalFetch(input, { ...init, headers });
};
const withAuth = (headers) => {
  if (Array.isArray(headers)) {
    const flat = headers.flat();
    for (let i = 0; i < flat.length; i += 2) if (String(flat[i]).toLowerCase() === 'authorization') return headers;
    return Array.isArray(headers[0]) ? [...headers, ['authorization', value]] : [...headers, 'authorization', value];
  }
  const plain = { ...(headers ?? {}) };
  if (!Object.keys(plain).some((k) => k.toLowerCase() === 'authorization')) plain.authorization = value;
  return plain;
};
// Scenarios that build raw requests (2026-07-28 header validation) use node:http itself.
const { syncBuiltinESMExports } = await import('node:module');
for (const name of ['node:http', 'node:https']) {
  const mod = (await import(name)).default;
  for (const fn of ['request', 'get']) {
    const original = mod[fn];
    mod[fn] = (...args) => {
      const at = typeof args[0] === 'string' || args[0] instanceof URL ? 1 : 0;
      if (typeof args[at] === 'object' && args[at] !== null && typeof args[at] !== 'function') {
        args[at] = { ...args[at], headers: withAuth(args[at].headers) };
      } else {
        args.splice(at, 0, { headers: withAuth(undefined) });
      }
      return original(...args);
    };
  }
}
syncBuiltinESMExports();
try {
  const { getGlobalDispatcher, setGlobalDispatcher } = await import('undici');
  setGlobalDispatcher(getGlobalDispatcher().compose((dispatch) => (opts, handler) =>
    dispatch({ ...opts, headers: withAuth(opts.headers) }, handler)));
} catch { /* undici not importable: fetch alone carries the header */ }
JS
}

SERVER_PID=""
cleanup() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT

if [ "${1:-}" = "--serve" ]; then
  shift
  PORT="${CONFORMANCE_PORT:-18765}"
  STATE=$(mktemp -d)
  export AQL_MCP_STORE__PATH="$STATE" AQL_MCP_LOGGING__LEVEL=warning
  export AQL_MCP_SERVER__PLUGINS='["aql_mcp.testing.conformance:plugin"]'
  # Both eras, and a per-caller rate far above one agent's: the 0.2 suite sends hundreds of
  # requests a second under one token, which the default 50/s (burst 100) would refuse with 429.
  export AQL_MCP_MCP__MODERN_ERA="${AQL_MCP_MCP__MODERN_ERA:-true}"
  export AQL_MCP_LIMITS__RATE_PER_SECOND="${AQL_MCP_LIMITS__RATE_PER_SECOND:-1000}"
  export AQL_MCP_LIMITS__RATE_BURST="${AQL_MCP_LIMITS__RATE_BURST:-2000}"
  .venv/bin/aql-mcp serve --dev --port "$PORT" > "$STATE/server.log" 2>&1 &
  SERVER_PID=$!
  for _ in $(seq 1 100); do curl -fs "http://127.0.0.1:$PORT/health" >/dev/null && break; sleep 0.1; done
  MCP_TOKEN=$(.venv/bin/aql-mcp dev-token --port "$PORT" --sub conformance)
  export MCP_TOKEN
  URL="http://127.0.0.1:$PORT/mcp"
else
  URL="${1:?usage: scripts/conformance.sh URL | --serve}"
  shift
fi

NODE=$(node_bin) || { echo "conformance: cannot install Node 22" >&2; exit 2; }
PKG=$(npm_package @modelcontextprotocol/conformance "$VERSION" conformance) \
  || { echo "conformance: cannot install the suite $VERSION" >&2; exit 2; }
PRELOAD=()
if [ -n "${MCP_TOKEN:-}" ]; then write_preload; PRELOAD=(--import "$TOOLS/conformance/bearer-preload.mjs"); fi

OUT="$TOOLS/conformance-results/$(date +%Y%m%d-%H%M%S)-$$"
mkdir -p "$OUT"
"$NODE" "${PRELOAD[@]}" "$PKG/dist/index.js" server --url "$URL" --suite "$SUITE" -o "$OUT" "$@" > "$OUT/run.log" 2>&1
RC=$?
sed -n '/=== SUMMARY ===/,$p' "$OUT/run.log" | sed '/^=== SUMMARY ===$/d;/^$/d'
PASS=$(grep -c '^✓ [^ ]*: ' "$OUT/run.log")
FAIL=$(grep -c '^✗ [^ ]*: ' "$OUT/run.log")
echo "results: $OUT"
echo "conformance: $PASS passed, $FAIL failed"
exit "$RC"
