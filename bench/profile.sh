#!/usr/bin/env bash
# Profile aql-mcp under c=64 load with py-spy (both eras, traced as in `make bench`): bench/PROFILE.md
# (where each microsecond of a call goes) and the flame graphs in bench/profiles/.
#
#   bench/profile.sh                   # 20 s at 200 Hz, c=64
#   DURATION=30 RATE=100 bench/profile.sh
#   TARGETS=aql-mcp-modern-untraced bench/profile.sh   # any aql-mcp target of bench/targets.py
#   SOURCE=bench/results/latest/src bench/profile.sh   # the code a `make bench` run served
#   GIL=1 PROFILE=/tmp/gil.md FLAMES=/tmp/gil bench/profile.sh   # only the thread holding the GIL (py-spy --gil)
# Relative PROFILE, FLAMES and OUT paths are from the repository's root.
#
# py-spy goes into its own venv under .tools/ (gitignored) the first time, from the hashed lock
# requirements/profile.txt; it needs root (ptrace).
# The service runs as in `make bench` (bench/service.yaml) on CPU 0; wrk and py-spy on CPU 1.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
SPY_VENV=${SPY_VENV:-.tools/py-spy}
OUT=${OUT:-bench/results/profile-$(date -u +%Y%m%d-%H%M%S)}

if ! command -v wrk >/dev/null; then
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q wrk
fi
if [ ! -x "$SPY_VENV/bin/py-spy" ]; then
  python3 -m venv "$SPY_VENV"
  # The version and file hashes of requirements/profile.txt (`make lock`): nothing resolved.
  "$SPY_VENV/bin/pip" install -q --require-hashes --no-deps -r requirements/profile.txt
fi

"$PYTHON" bench/driver.py profile --out "$OUT" --py-spy "$SPY_VENV/bin/py-spy" \
  --targets "${TARGETS:-aql-mcp-modern,aql-mcp}" --conc "${CONC:-64}" --rate "${RATE:-200}" --duration "${DURATION:-20}" --warmup "${WARMUP:-3}" \
  --server-cpu "${SERVER_CPU:-0}" --load-cpu "${LOAD_CPU:-1}" --nice "${NICE:-0}" ${SOURCE:+--source "$SOURCE"} $([ "${GIL:-0}" = 1 ] && echo --gil) \
  --output "${PROFILE:-bench/PROFILE.md}" --flames "${FLAMES:-bench/profiles}"
echo "profile: raw stacks in $OUT/profile.raw.txt; summary in ${PROFILE:-bench/PROFILE.md}"
