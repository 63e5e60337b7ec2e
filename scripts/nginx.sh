#!/usr/bin/env bash
# nginx from Debian as the gateway in front of the service, for the tests of docs/gateway.md.
#
#   scripts/nginx.sh install            # the nginx binary, from Debian's package, when missing
#   scripts/nginx.sh start DIR          # starts nginx on DIR/nginx.conf; prints its pid
#   scripts/nginx.sh reload DIR         # re-reads DIR/nginx.conf (a changed upstream list)
#   scripts/nginx.sh stop DIR           # stops it (fast shutdown)
#
# The caller writes DIR/nginx.conf, a whole configuration (tests/support/nginx.py writes one around
# the site example of docs/gateway.md). nginx runs with DIR as its prefix, in the foreground of
# nothing: `daemon on`, its pid in DIR/nginx.pid and its error log in DIR/error.log, so nothing of
# it touches /etc/nginx, /var/log/nginx or /run; `start` first checks the configuration (`nginx -t`)
# and prints what is wrong with it. `start` on a DIR whose nginx runs only prints the pid again.
#
# The binary comes from the Debian package `nginx` (any of its flavours: nginx-light is enough);
# when no /usr/sbin/nginx is found this installs it with apt (as root only; `apt-get update` runs
# only then). The package's own service is not started: Debian's policy-rc.d in containers denies
# it, and nothing here uses it.
set -euo pipefail

NGINX=${NGINX:-/usr/sbin/nginx}

say() { echo "nginx.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

usage() { die "usage: $0 install | start DIR | reload DIR | stop DIR"; }

ensure_installed() {
  [ -x "$NGINX" ] && return 0
  [ "$(id -u)" -eq 0 ] || die "nginx is missing: install the Debian package 'nginx' (apt-get install nginx)"
  say "installing the Debian package 'nginx'"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx >&2
  [ -x "$NGINX" ] || die "installed 'nginx' but found no $NGINX"
}

# The directives that keep nginx inside DIR; the configuration file may not set them again.
globals() { echo "daemon on; pid $1/nginx.pid; error_log $1/error.log info;"; }

running() { [ -f "$1/nginx.pid" ] && kill -0 "$(cat "$1/nginx.pid")" 2>/dev/null; }

start() {
  local dir
  dir=$(cd "$1" && pwd -P)
  [ -f "$dir/nginx.conf" ] || die "no configuration: $dir/nginx.conf"
  ensure_installed
  if running "$dir"; then
    cat "$dir/nginx.pid"
    return
  fi
  "$NGINX" -t -q -p "$dir" -c "$dir/nginx.conf" -g "$(globals "$dir")" >&2 ||
    die "the configuration $dir/nginx.conf is not valid (above)"
  "$NGINX" -p "$dir" -c "$dir/nginx.conf" -g "$(globals "$dir")" >&2 ||
    { tail -n 20 "$dir/error.log" >&2 || true; die "nginx did not start; log: $dir/error.log"; }
  # `daemon on` returns once the master has written its pid file and bound its sockets.
  running "$dir" || die "nginx exited at once; log: $dir/error.log"
  cat "$dir/nginx.pid"
}

reload() {
  local dir
  dir=$(cd "$1" && pwd -P)
  running "$dir" || die "not running: $dir"
  "$NGINX" -t -q -p "$dir" -c "$dir/nginx.conf" -g "$(globals "$dir")" >&2 ||
    die "the configuration $dir/nginx.conf is not valid (above); the running one stays"
  # A reload is a signal: the master reads the file, starts new workers and then tells the old ones
  # to stop accepting, after the command returned. Wait until every worker still accepting is a new
  # one (an old worker finishing its open streams is titled "shutting down"), so the caller's next
  # connection meets the new configuration.
  local pid before
  pid=$(cat "$dir/nginx.pid")
  before=$(workers "$pid")
  "$NGINX" -p "$dir" -c "$dir/nginx.conf" -g "$(globals "$dir")" -s reload >&2
  for _ in $(seq 300); do
    if ! accepting "$pid" | grep -qxF -f <(echo "$before"); then return 0; fi
    sleep 0.1
  done
  die "old workers still accepting 30 s after the reload; log: $dir/error.log"
}

workers() { ps -o pid= --ppid "$1" | tr -d ' ' | sort; }

# The master's workers that accept connections: all but those shutting down after a reload.
accepting() { ps -o pid=,args= --ppid "$1" | grep -v "shutting down" | awk '{print $1}' | sort; }

stop() {
  local dir=$1 pid
  [ -d "$dir" ] || return 0
  running "$dir" || return 0
  pid=$(cat "$dir/nginx.pid")
  kill -TERM "$pid"
  # The master removes its pid file as it exits; a minute is far more than a fast shutdown takes.
  for _ in $(seq 600); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

case ${1:-} in
  install) ensure_installed ;;
  start) [ $# -eq 2 ] || usage; start "$2" ;;
  reload) [ $# -eq 2 ] || usage; reload "$2" ;;
  stop) [ $# -eq 2 ] || usage; stop "$2" ;;
  *) usage ;;
esac
