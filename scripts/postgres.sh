#!/usr/bin/env bash
# A throwaway PostgreSQL server for the test suite.
#
#   scripts/postgres.sh install     # the server binaries, from Debian's package, when missing
#   scripts/postgres.sh start DIR   # prints the DSN: postgresql://postgres@127.0.0.1:PORT/aql_mcp_test
#   scripts/postgres.sh stop DIR    # stops it and removes the cluster
#   scripts/postgres.sh pause DIR   # stops it, keeping the data; `start DIR` resumes it
#
# The store tests need a real PostgreSQL. `make test` starts one through tests/support/postgres.py,
# which calls this script; there is nothing to start by hand. (To use a server of your own instead,
# set AQL_MCP_TEST_POSTGRES_URL; see that module.)
#
# `start` creates a fresh cluster in DIR/data (trust authentication, superuser `postgres`, UTF8,
# no fsync: data is thrown away), starts it on 127.0.0.1 at the first free port from 55432 upward,
# with its socket in DIR and its log in DIR/postgres.log, creates the database aql_mcp_test, writes
# the port to DIR/port and prints the DSN as the only line on stdout; progress goes to stderr.
# Starting a DIR whose server already runs only prints its DSN again.
#
# The server binaries come from the Debian package `postgresql`; when no initdb is found under
# /usr/lib/postgresql/*/bin this installs the package with apt (as root only; `apt-get update` runs
# only then). The package may also create and start its own cluster "main" on port 5432: unused here.
#
# initdb and the server refuse to run as root, so as root they run as the system user `postgres`
# (created with the package, or here when missing) and DIR is handed to that user. When that user
# cannot reach DIR (pytest's /tmp/pytest-of-root is private to root), the cluster lives in a
# directory of its own under /tmp instead (so too when DIR is too long a path for the socket), named
# in DIR/cluster, with DIR/data and DIR/postgres.log as symbolic links to it; `stop` removes it.
set -euo pipefail

FIRST_PORT=55432
LAST_PORT=55999
DATABASE=aql_mcp_test
SUPERUSER=postgres

say() { echo "postgres.sh: $*" >&2; }
die() {
  say "$*"
  exit 1
}

usage() { die "usage: $0 install | start DIR | stop DIR | pause DIR"; }

is_root() { [ "$(id -u)" -eq 0 ]; }

find_bin() {
  local initdb
  initdb=$(ls -d /usr/lib/postgresql/*/bin/initdb 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$initdb" ] && dirname "$initdb"
}

install_postgres() {
  is_root || die "PostgreSQL server binaries (initdb) are missing: install the package 'postgresql' (apt-get install postgresql), or set AQL_MCP_TEST_POSTGRES_URL"
  say "installing the Debian package 'postgresql'"
  apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
}

# Run a server program as the user that owns the cluster: ourselves, or `postgres` when root.
as_owner() {
  if is_root; then
    if command -v runuser >/dev/null 2>&1; then
      (cd / && runuser -u "$SUPERUSER" -- "$@")
    else
      local quoted
      quoted=$(printf '%q ' "$@")
      (cd / && su -s /bin/sh "$SUPERUSER" -c "$quoted")
    fi
  else
    "$@"
  fi
}

port_is_free() {
  python3 - "$1" <<'EOF'
import socket, sys
with socket.socket() as s:
    # As PostgreSQL binds: connections it closed leave TIME_WAIT on its port, which must not count.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        s.bind(("127.0.0.1", int(sys.argv[1])))
    except OSError:
        sys.exit(1)
EOF
}

running() { [ -f "$1/postmaster.pid" ] && as_owner "$BIN/pg_ctl" -D "$1" status >/dev/null 2>&1; }

dsn() { echo "postgresql://$SUPERUSER@127.0.0.1:$1/$DATABASE"; }

# Where the cluster of DIR lives: DIR itself, or the directory named in DIR/cluster.
home_of() {
  if [ -f "$1/cluster" ]; then cat "$1/cluster"; else echo "$1"; fi
}

start() {
  local dir=$1 home port
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd -P)

  BIN=$(find_bin || true)
  if [ -z "$BIN" ]; then
    install_postgres
    BIN=$(find_bin || true)
    [ -n "$BIN" ] || die "installed 'postgresql' but found no /usr/lib/postgresql/*/bin/initdb"
  fi

  home=$(home_of "$dir")
  if [ -f "$home/data/PG_VERSION" ] && [ -f "$dir/port" ] && running "$home/data"; then
    say "already running in $home"
    dsn "$(cat "$dir/port")"
    return
  fi

  if is_root; then
    id -u "$SUPERUSER" >/dev/null 2>&1 || useradd --system --user-group --no-create-home "$SUPERUSER"
  fi
  if [ "$home" = "$dir" ] && [ ! -f "$dir/data/PG_VERSION" ]; then
    if is_root && as_owner test -x "$(dirname "$dir")"; then
      chown "$SUPERUSER:" "$dir"
    fi
    # The socket path (DIR/.s.PGSQL.PORT) must stay under about 100 characters.
    if [ "${#dir}" -gt 80 ] || { is_root && ! as_owner test -w "$dir" -a -x "$dir"; }; then
      home=$(mktemp -d /tmp/aql-mcp-postgres.XXXXXX)
      if is_root; then chown "$SUPERUSER:" "$home"; fi
      echo "$home" >"$dir/cluster"
      ln -sfn "$home/data" "$dir/data"
      ln -sfn "$home/postgres.log" "$dir/postgres.log"
      say "cluster in $home (DIR is out of reach of user $SUPERUSER, or too long a path for the socket)"
    fi
  fi

  if [ ! -f "$home/data/PG_VERSION" ]; then
    say "initdb $home/data ($("$BIN/postgres" --version))"
    as_owner "$BIN/initdb" -D "$home/data" -U "$SUPERUSER" -A trust -E UTF8 --locale=C.UTF-8 \
      --no-sync --no-instructions >"$home/initdb.log" 2>&1 ||
      { cat "$home/initdb.log" >&2; die "initdb failed"; }
  fi

  # Another process may take the port between the check and the start: then try the next one.
  # A cluster started before comes back on its port, so its clients can reconnect.
  port=$FIRST_PORT
  if [ -f "$dir/port" ]; then port=$(cat "$dir/port"); fi
  while :; do
    while ! port_is_free "$port"; do
      port=$((port + 1))
      [ "$port" -le "$LAST_PORT" ] || die "no free port in $FIRST_PORT-$LAST_PORT"
    done
    if as_owner "$BIN/pg_ctl" -D "$home/data" -l "$home/postgres.log" -w -t 60 \
      -o "-p $port -k '$home' -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" \
      start >&2; then
      break
    fi
    if port_is_free "$port"; then
      tail -n 20 "$home/postgres.log" >&2 || true
      die "the server did not start; log: $home/postgres.log"
    fi
    say "port $port was taken meanwhile; trying the next one"
    port=$((port + 1))
  done
  echo "$port" >"$dir/port"

  if ! "$BIN/psql" -h 127.0.0.1 -p "$port" -U "$SUPERUSER" -d postgres -XtAq \
    -c "select 1 from pg_database where datname = '$DATABASE'" | grep -q 1; then
    "$BIN/createdb" -h 127.0.0.1 -p "$port" -U "$SUPERUSER" "$DATABASE" >&2
  fi
  say "running on 127.0.0.1:$port (log: $home/postgres.log)"
  dsn "$port"
}

stop() {
  local dir=$1 home
  [ -d "$dir" ] || return 0
  home=$(home_of "$dir")
  BIN=$(find_bin || true)
  if [ -n "$BIN" ] && [ -f "$home/data/postmaster.pid" ]; then
    as_owner "$BIN/pg_ctl" -D "$home/data" -m immediate -w stop >&2 || say "not running: $home/data"
  fi
  if [ "$home" != "$dir" ] && [ -d "$home" ]; then
    rm -rf "$home"
    rm -f "$dir/cluster" "$dir/data" "$dir/postgres.log"
  fi
}

# `pause` stops the server and keeps its data; `start` brings it back on the same port when that is
# free (tests of the database going away and coming back).
pause() {
  local dir=$1 home
  home=$(home_of "$dir")
  BIN=$(find_bin || true)
  if [ -n "$BIN" ] && [ -f "$home/data/postmaster.pid" ]; then
    as_owner "$BIN/pg_ctl" -D "$home/data" -m fast -w stop >&2 || say "not running: $home/data"
  fi
}

# `install` only makes sure the server binaries are there: `make test` runs it before pytest, so a
# first install on a fresh machine is not charged to a test's timeout.
ensure_installed() { find_bin >/dev/null || install_postgres; }

case ${1:-} in
  install) ensure_installed ;;
  start) [ $# -eq 2 ] || usage; start "$2" ;;
  stop) [ $# -eq 2 ] || usage; stop "$2" ;;
  pause) [ $# -eq 2 ] || usage; pause "$2" ;;
  *) usage ;;
esac
