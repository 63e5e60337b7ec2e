#!/usr/bin/env bash
# Check a Prometheus text exposition read from stdin with `promtool check metrics`; with
# arguments, run promtool with them instead (the alert rules: `check rules`, `test rules`).
#
#   curl -s http://127.0.0.1:8000/metrics | scripts/promtool.sh
#   scripts/promtool.sh check rules deploy/prometheus/aql-mcp-rules.yaml
#
# promtool ships in the Debian/Ubuntu package `prometheus`; when it is not on PATH this installs
# it with apt (as root, or through `sudo -n`), once: `apt-get update` runs only when promtool is
# missing. The package also installs a Prometheus server unit; use this on CI machines and
# containers, or install promtool yourself first.
# Exit status is promtool's: 0 when the exposition is valid, 1 with the problems on stderr.
set -euo pipefail

install_promtool() {
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "promtool.sh: promtool missing and not root (no sudo)" >&2; return 1; }
    sudo="sudo -n"
  fi
  echo "promtool.sh: installing the Debian package 'prometheus' for promtool" >&2
  $sudo apt-get update -qq >&2
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >&2
}

if ! command -v promtool >/dev/null 2>&1; then
  install_promtool
fi
if [ "$#" -gt 0 ]; then
  exec promtool "$@"
fi
exec promtool check metrics
