#!/usr/bin/env bash
# Headless Chromium for the operator console's browser test (tests/plugins/safety/console/test_browser.py).
#
#   scripts/chromium.sh install     # Debian's `chromium` package, when /usr/bin/chromium is missing
#   scripts/chromium.sh path        # prints the browser's path (installing it first when missing)
#
# The test drives this system browser through Playwright's Python package with its executable path,
# so Playwright never downloads a browser build of its own (PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1).
# Installing needs root (apt-get; `apt-get update` runs only then); without root and without the
# browser this fails with what to install. `make unit` calls `install` like scripts/postgres.sh's.
set -euo pipefail

CHROMIUM="${AQL_MCP_TEST_CHROMIUM:-/usr/bin/chromium}"

say() { echo "chromium.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

install_chromium() {
  [ -x "$CHROMIUM" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "$CHROMIUM is missing: install the Debian package 'chromium' (apt-get install chromium), or set AQL_MCP_TEST_SKIP_BROWSER=1 to skip the browser test"
  say "installing the Debian package 'chromium'"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >&2
  [ -x "$CHROMIUM" ] || die "the package 'chromium' did not install $CHROMIUM"
}

case "${1:-}" in
  install) install_chromium ;;
  path)
    install_chromium
    echo "$CHROMIUM"
    ;;
  *) die "usage: $0 install | path" ;;
esac
