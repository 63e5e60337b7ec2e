#!/usr/bin/env bash
# `make bench`: aql-mcp against the official SDK and a bare Starlette ceiling, in one run.
#
#   bench/run.sh                       # 1 repetition: about 7-9 minutes on 2 cores (echo targets)
#   REPS=3 bench/run.sh                # 3 repetitions, target order rotated
#   TARGETS=aql-mcp,sdk-stateless-json DURATION=5 bench/run.sh   # default: every target of bench/targets.py
#   NICE=-10 bench/run.sh              # servers and wrk ahead of other work on a busy machine
#   SOURCE=/tmp/before bench/run.sh    # serve this copy of aql_mcp instead of a snapshot of src/ (A/B)
#   STORE=0 bench/run.sh               # without the store rows (bench/store.py, bench/STORE.md)
#   STALL=0 bench/run.sh               # without the stall rows (bench/stall.py, bench/STALL.md)
#   ATTACKS=0 bench/run.sh             # without the attack rows (bench/attacks.py, bench/ATTACKS.md)
#   AUDIT=0 bench/run.sh               # without the audit rows (bench/audit.py, bench/AUDIT.md)
#   STREAMS=0 bench/run.sh             # without the memory-per-stream rows (bench/streams.py, bench/STREAMS.md)
#
# Installs wrk (Debian package) when it is missing. Servers run on CPU 0 (SERVER_CPU), wrk and
# the driver on CPU 1 (LOAD_CPU), everything on 127.0.0.1. Raw results go to
# bench/results/<time>/ (gitignored); the table to bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
OUT=${OUT:-bench/results/$(date -u +%Y%m%d-%H%M%S)}

if ! command -v wrk >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk
fi
if [ "$(nproc)" -lt 2 ]; then
  echo "bench: needs 2 CPUs (server and load generator pinned apart); this machine has $(nproc)" >&2
  exit 1
fi

"$PYTHON" bench/driver.py run --out "$OUT" \
  ${TARGETS:+--targets "$TARGETS"} \
  --reps "${REPS:-1}" --conc "${CONC:-1,16,64}" --duration "${DURATION:-10}" --warmup "${WARMUP:-3}" \
  --sessions "${SESSIONS:-1000}" --server-cpu "${SERVER_CPU:-0}" --load-cpu "${LOAD_CPU:-1}" --nice "${NICE:-0}" ${SOURCE:+--source "$SOURCE"}
"$PYTHON" bench/driver.py report "$OUT" --output "${RESULTS:-bench/RESULTS.md}"
case "$OUT" in bench/results/*) ln -sfn "$(basename "$OUT")" bench/results/latest ;; esac
echo "bench: raw results in $OUT"
# The store rows (records operations on SQLite and PostgreSQL, replicas): bench/STORE.md.
if [ "${STORE:-1}" = 1 ]; then
  "$PYTHON" bench/store.py --seconds "${STORE_SECONDS:-4}"
fi
# Echo, a write and a read (2026-07-28) with the audit trail off, on, and on with reads: bench/AUDIT.md.
if [ "${AUDIT:-1}" = 1 ]; then
  "$PYTHON" bench/audit.py --seconds "${AUDIT_SECONDS:-4}"
fi
# Memory per open stream, 1,000 legacy GET streams and 1,000 listen streams: bench/STREAMS.md.
if [ "${STREAMS:-1}" = 1 ]; then
  "$PYTHON" bench/streams.py --streams "${STREAMS_COUNT:-1000}"
fi
# Another tenant's ping and /health under 16 scanning listings and 300 slow connections: bench/STALL.md.
if [ "${STALL:-1}" = 1 ]; then
  "$PYTHON" bench/stall.py --seconds "${STALL_SECONDS:-10}"
fi
# The service under each attack of issue 27, another tenant's calls and /health timed meanwhile: bench/ATTACKS.md.
if [ "${ATTACKS:-1}" = 1 ]; then
  "$PYTHON" bench/attacks.py --seconds "${ATTACKS_SECONDS:-10}"
fi
