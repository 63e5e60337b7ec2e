#!/usr/bin/env bash
# Node and npm packages for the tools that are written in JavaScript (the conformance suite, the
# TypeScript client smoke test), installed once into the project's .tools/ from the npm registry.
#
#   scripts/node.sh                       prints the path of a Node >= 22
#   scripts/node.sh NAME VERSION DIR      installs NAME@VERSION into .tools/DIR (unless that exact
#                                         version is there) and prints the package's directory
#
# Sourced (`. scripts/node.sh`), it defines the functions `node_bin` and `npm_package` instead.
# Node 22 comes as the registry package node-linux-<arch> when the system has no Node >= 22 (the
# conformance suite needs fs.globSync); npm itself is the system's. Progress goes to stderr.
#
# What is installed comes from a lock under requirements/npm/<DIR>-<VERSION>/ (node22-<arch> for
# Node): its package-lock.json names every package of the tree with its exact version and sha512
# integrity, and `npm ci` installs exactly that, resolving nothing. `make lock` refreshes them
# (scripts/lock.sh); an installed tree whose lock changed since is installed again. A version with no lock (CONFORMANCE_VERSION set to another release) is
# installed by name, resolved at install time, and says so on stderr.

NODE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
NODE_TOOLS="${NODE_TOOLS:-$NODE_ROOT/.tools}"
NPM_LOCKS="$NODE_ROOT/requirements/npm"

# lock_hash LOCK: the sha256 of requirements/npm/<LOCK>/package-lock.json. PREFIX/.installed-lock keeps
# the one installed, so a lock `make lock` changed (a dependency of the tree moved) reinstalls, as
# scripts/deploy-tools.sh does with its WANT.
lock_hash() {
  sha256sum "$NPM_LOCKS/$1/package-lock.json" | cut -d" " -f1
}

# is_current LOCK PREFIX: PREFIX holds the tree of the current requirements/npm/<LOCK>/.
is_current() {
  [ "$(cat "$2/.installed-lock" 2>/dev/null)" = "$(lock_hash "$1")" ]
}

# npm_locked LOCK PREFIX: the locked tree requirements/npm/LOCK installed into PREFIX with `npm ci`.
# Two test workers (make test runs pytest on every core) may ask for one tree at once: one installs
# under the lock, the other waits for it and then finds the tree current.
npm_locked() {
  local lock="$NPM_LOCKS/$1" prefix="$2"
  mkdir -p "$prefix"
  (
    flock 9
    is_current "$1" "$prefix" && exit 0
    rm -f "$prefix/.installed-lock"
    cp "$lock/package.json" "$lock/package-lock.json" "$prefix/"
    npm ci --loglevel=error --no-audit --no-fund --prefix "$prefix" >&2 || exit 1
    lock_hash "$1" > "$prefix/.installed-lock"
  ) 9>"$prefix.lock"
}

node_bin() {
  if [ "$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)" -ge 22 ]; then
    command -v node; return
  fi
  local arch
  case "$(uname -m)" in x86_64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) arch=$(uname -m) ;; esac
  local bin="$NODE_TOOLS/node22/node_modules/node-linux-$arch/bin/node"
  if [ ! -x "$bin" ] || ! is_current "node22-$arch" "$NODE_TOOLS/node22"; then
    npm_locked "node22-$arch" "$NODE_TOOLS/node22" || return 1
  fi
  echo "$bin"
}

# npm_package NAME VERSION DIR: an exact version, so that a run is the same run on every machine.
npm_package() {
  local name="$1" version="$2" prefix="$NODE_TOOLS/$3"
  local pkg="$prefix/node_modules/$name"
  if [ -f "$NPM_LOCKS/$3-$version/package-lock.json" ]; then
    if ! is_current "$3-$version" "$prefix" || [ ! -f "$pkg/package.json" ]; then
      npm_locked "$3-$version" "$prefix" || return 1
    fi
  elif ! grep -q "\"version\": \"$version\"" "$pkg/package.json" 2>/dev/null; then
    echo "node.sh: no lock for $name@$version (requirements/npm/$3-$version): installing it unlocked" >&2
    mkdir -p "$prefix"
    rm -f "$prefix/.installed-lock"
    npm install --loglevel=error --no-audit --no-fund --prefix "$prefix" "$name@$version" >&2 || return 1
  fi
  echo "$pkg"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -uo pipefail
  case $# in
    0) node_bin ;;
    3) npm_package "$@" ;;
    *) echo "usage: scripts/node.sh [NAME VERSION DIR]" >&2; exit 2 ;;
  esac
fi
