#!/usr/bin/env bash
# Build the Dockerfile with podman and run the image as a platform would: read-only root
# filesystem, non-root, no capabilities, state on a volume. Probes /health, /ready, /mcp, the
# HEALTHCHECK, a SIGTERM stop, and what must not be in the image. Slow (a few minutes); not part
# of `make test`. Last line: "image-test: N passed, M failed".
#
# Registry images cannot be pulled here, so the base (python:3.11-slim) is stood in for by a
# Debian bookworm root filesystem made with debootstrap (Debian's python3.11, with pip for the
# build stage) and the host's CA bundle, passed as the Dockerfile's PYTHON_IMAGE build argument.
# BASE_IMAGE=<image> uses that base instead (e.g. python:3.11-slim where a registry is reachable).
#
# Then the plugin pattern: examples/greeter-plugin/Dockerfile layers the example plugin package onto
# the image just built; the layered image serves the plugin through its entry point, with its
# setting from the environment, and still has no pip.
#
# Needs root and Debian's podman, buildah, runc and debootstrap (installed when missing).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
TOOLS="$ROOT/.tools/image-test"
STAND_IN="localhost/aql-mcp-test-base:bookworm-py311"
BASE_IMAGE="${BASE_IMAGE:-}"
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' pyproject.toml)
IMAGE="localhost/aql-mcp:$VERSION-test"
PLUGIN_IMAGE="localhost/aql-mcp-greeter:$VERSION-test"
NAME="aql-mcp-image-test-$$"
PORT="${IMAGE_TEST_PORT:-18431}"
# The chart gives /metrics a port of its own (config.metrics.port, 9090 in the container).
METRICS_PORT=$((PORT + 1))
TOKEN="image-test-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
passed=0
failed=0
# This sandbox lacks CAP_SYS_RESOURCE: the runtime may only lower rlimits, never raise them past
# what podman itself runs with, so the container gets explicit modest ones. The healthcheck timer
# needs systemd (absent here); `podman healthcheck run` below runs the HEALTHCHECK by hand.
RUN_OPTS=(--runtime runc --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=4096:4096 --health-interval disable)

check() {  # check "what" command...
  local what=$1; shift
  if "$@" >/dev/null 2>&1; then echo "ok   $what"; passed=$((passed + 1)); else echo "FAIL $what"; failed=$((failed + 1)); fi
}

finish() {
  podman rm --force --time 0 "$NAME" >/dev/null 2>&1
  podman volume rm --force "$NAME-state" >/dev/null 2>&1
  echo "image-test: $passed passed, $failed failed"
  [ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
}
trap 'finish; exit $?' EXIT

install_tools() {
  local missing=()
  for tool in podman buildah runc debootstrap; do command -v "$tool" >/dev/null || missing+=("$tool"); done
  [ ${#missing[@]} -eq 0 ] && return
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >&2; }
}

stand_in_base() {
  podman image exists "$STAND_IN" && return
  local rootfs="$TOOLS/rootfs"
  rm -rf "$rootfs" && mkdir -p "$TOOLS"
  echo "image-test: debootstrap bookworm (python3.11) for the stand-in base" >&2
  debootstrap --variant=minbase --include=python3.11,python3.11-venv,python3-venv,python3-pip,ca-certificates \
    bookworm "$rootfs" http://deb.debian.org/debian >"$TOOLS/debootstrap.log" 2>&1 ||
    { tail -20 "$TOOLS/debootstrap.log" >&2; return 1; }
  # The host's trust store: the build stage's pip reaches the index through the same egress.
  cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/* "$rootfs"/usr/share/doc "$rootfs"/usr/share/man
  tar -C "$rootfs" -c . | podman import --change 'CMD ["python3"]' - "$STAND_IN" >/dev/null
  rm -rf "$rootfs"
}

build() {
  echo "image-test: building $IMAGE from ${BASE_IMAGE:-$STAND_IN}" >&2
  podman build --format docker --network host --pull=never --layers \
    --build-arg "PYTHON_IMAGE=${BASE_IMAGE:-$STAND_IN}" --build-arg "VERSION=$VERSION" \
    --build-arg "SOURCE=file://$ROOT" --build-arg "REVISION=image-test" \
    -t "$IMAGE" -f Dockerfile . >"$TOOLS/build.log" 2>&1 || { tail -30 "$TOOLS/build.log" >&2; return 1; }
}

build_plugin() {  # the documented pattern, from the example's own directory as its users build it
  echo "image-test: layering examples/greeter-plugin onto $IMAGE" >&2
  podman build --format docker --network host --pull=never --layers \
    --build-arg "PYTHON_IMAGE=${BASE_IMAGE:-$STAND_IN}" --build-arg "AQL_MCP_IMAGE=$IMAGE" \
    -t "$PLUGIN_IMAGE" -f examples/greeter-plugin/Dockerfile examples/greeter-plugin \
    >"$TOOLS/build-plugin.log" 2>&1 || { tail -30 "$TOOLS/build-plugin.log" >&2; return 1; }
}

# probe URL [BODY [TOKEN]]: prints the HTTP status (0 when unreachable) and, for a POST, whether an
# MCP-Session-Id came back. Python's urllib: the same tool the image's HEALTHCHECK uses.
probe() {
  python3 - "$@" <<'PY'
import sys, urllib.error, urllib.request
url, body, token = (sys.argv[1:] + ["", ""])[:3]
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"} if body else {}
if token:
    headers["Authorization"] = f"Bearer {token}"
request = urllib.request.Request(url, data=body.encode() or None, headers=headers)
try:
    with urllib.request.urlopen(request, timeout=5) as response:
        status, session = response.status, response.headers.get("mcp-session-id") is not None
except urllib.error.HTTPError as exc:
    status, session = exc.code, False
except OSError:
    status, session = 0, False
print(f"{status} {session}" if body else status)
PY
}

# call_tool URL TOKEN NAME ARGUMENTS_JSON: a session (initialize, initialized), then tools/call;
# prints the first content block's text (empty on any failure).
call_tool() {
  python3 - "$@" <<'PY'
import json, sys, urllib.request
url, token, name, arguments = sys.argv[1:5]
headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
           "Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"}
def post(message):
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=10) as response:
        body = response.read().decode()
        session = response.headers.get("mcp-session-id")
    if body.lstrip().startswith("{") or not body.strip():
        return session, json.loads(body) if body.strip() else None
    data = [line[5:].strip() for line in body.splitlines() if line.startswith("data:")]
    return session, json.loads(data[-1])
try:
    session, _ = post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
                       "capabilities": {}, "clientInfo": {"name": "image-test", "version": "1"}}})
    headers["MCP-Session-Id"] = session
    post({"jsonrpc": "2.0", "method": "notifications/initialized"})
    _, answer = post({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                      "params": {"name": name, "arguments": json.loads(arguments)}})
    print(answer["result"]["content"][0]["text"])
except Exception:
    print("")
PY
}

wait_ready() {
  local deadline=$((SECONDS + 60))
  while [ $SECONDS -lt $deadline ]; do
    [ "$(probe "http://127.0.0.1:$PORT/ready")" = 200 ] && return 0
    podman container exists "$NAME" && [ "$(podman inspect -f '{{.State.Running}}' "$NAME")" = true ] || return 1
    sleep 0.5
  done
  return 1
}

mkdir -p "$TOOLS"
install_tools || exit 1
if [ -z "$BASE_IMAGE" ]; then stand_in_base || exit 1; fi
build || exit 1

# --- the image itself -------------------------------------------------------------------------
inspect() { podman image inspect -f "$1" "$IMAGE"; }
check "image user is numeric 10001" test "$(inspect '{{.Config.User}}')" = "10001:10001"
check "image exposes 8000" sh -c "podman image inspect -f '{{json .Config.ExposedPorts}}' $IMAGE | grep -q 8000/tcp"
check "image stop signal is SIGTERM" test "$(inspect '{{.Config.StopSignal}}')" = "SIGTERM"
check "image has the OCI version label" test "$(inspect '{{index .Config.Labels "org.opencontainers.image.version"}}')" = "$VERSION"
check "image has the OCI source label" test "$(inspect '{{index .Config.Labels "org.opencontainers.image.source"}}')" = "file://$ROOT"
in_image() { podman run "${RUN_OPTS[@]}" --rm --read-only --entrypoint /bin/sh "$IMAGE" -c "$1"; }
check "no compiler in the image" in_image '! command -v gcc && ! command -v cc && ! command -v make'
check "no pip in the service environment" in_image '! test -e /opt/aql-mcp/bin/pip'
check "no wheels, sources, tests or pip cache" in_image '! test -e /wheels && ! test -e /src && ! test -e /root/.cache/pip && ! find / -xdev -path /proc -prune -o -name conftest.py -print | grep -q .'
check "aql-mcp --version runs" podman run "${RUN_OPTS[@]}" --rm --read-only --entrypoint aql-mcp "$IMAGE" --version

# --- the service as the chart runs it: its rendered config file, read-only, non-root -------------
# The ConfigMap the Helm chart renders (an opaque token as the token source, a short shutdown),
# mounted where the chart mounts it and passed with the chart's arguments.
DIGEST=$(printf '%s' "$TOKEN" | sha256sum | cut -d' ' -f1)
HELM=$(bash scripts/deploy-tools.sh | sed -n 's/^helm=//p')
TOOLS_PYTHON="$ROOT/.tools/deploy/venv/bin/python"
"$HELM" template image-test helm/aql-mcp --show-only templates/configmap.yaml \
  --set-json "config.auth.opaque_tokens={\"$DIGEST\": {\"sub\": \"image-test\", \"scopes\": [\"mcp\"]}}" \
  --set-json 'config.shutdown={"drain_seconds": 1, "grace_seconds": 2}' |
  "$TOOLS_PYTHON" -c 'import sys, yaml; print(yaml.safe_load(sys.stdin)["data"]["config.yaml"])' >"$TOOLS/config.yaml" ||
  { echo "image-test: cannot render the chart's config file" >&2; exit 1; }
podman volume create "$NAME-state" >/dev/null
podman run "${RUN_OPTS[@]}" -d --name "$NAME" --read-only --cap-drop ALL --security-opt no-new-privileges \
  -p "127.0.0.1:$PORT:8000" -p "127.0.0.1:$METRICS_PORT:9090" \
  -v "$NAME-state:/var/lib/aql-mcp" -v "$TOOLS/config.yaml:/etc/aql-mcp/config.yaml:ro" \
  "$IMAGE" --config /etc/aql-mcp/config.yaml >/dev/null
check "the service becomes ready (read-only root, uid 10001, no capabilities)" wait_ready
[ "$passed" -gt 0 ] || podman logs "$NAME" 2>&1 | tail -20 >&2
check "GET /health is 200" test "$(probe "http://127.0.0.1:$PORT/health")" = 200
check "GET /ready is 200" test "$(probe "http://127.0.0.1:$PORT/ready")" = 200
check "GET /metrics on the metrics port is 200" test "$(probe "http://127.0.0.1:$METRICS_PORT/metrics")" = 200
INIT='{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"image-test","version":"1"}}}'
check "POST /mcp without a token is 401" test "$(probe "http://127.0.0.1:$PORT/mcp" "$INIT")" = "401 False"
check "POST /mcp initialize with a token is 200 with a session" \
  test "$(probe "http://127.0.0.1:$PORT/mcp" "$INIT" "$TOKEN")" = "200 True"
check "the process runs as uid 10001" sh -c "podman top $NAME user | tail -1 | grep -qE '^(10001|aql-mcp)\$'"
check "the root filesystem is read-only" podman exec "$NAME" sh -c '! touch /opt/aql-mcp/x'
check "the state directory holds the SQLite store" podman exec "$NAME" sh -c 'ls /var/lib/aql-mcp | grep -q sqlite'
check "the HEALTHCHECK passes" podman healthcheck run "$NAME"
stops_cleanly() {
  [ "$(podman inspect -f '{{.State.Running}}' "$NAME")" = true ] || return 1
  podman stop --time 30 "$NAME" >/dev/null || return 1
  [ "$(podman inspect -f '{{.State.ExitCode}}' "$NAME")" = 0 ]
}
check "SIGTERM stops the service cleanly (exit 0) within the grace period" stops_cleanly

# --- a plugin layered into the image (examples/greeter-plugin/Dockerfile, docs/plugins.md) -------
podman rm --force --time 0 "$NAME" >/dev/null 2>&1
check "the plugin layers onto the image" build_plugin
in_plugin_image() { podman run "${RUN_OPTS[@]}" --rm --read-only --entrypoint /bin/sh "$PLUGIN_IMAGE" -c "$1"; }
check "no pip in the layered image" in_plugin_image '! test -e /opt/aql-mcp/bin/pip && ! /opt/aql-mcp/bin/python -c "import pip"'
check "the layered image runs as uid 10001 with the service's entrypoint" \
  test "$(podman image inspect -f '{{.Config.User}} {{json .Config.Entrypoint}}' "$PLUGIN_IMAGE")" = \
  "10001:10001 $(podman image inspect -f '{{json .Config.Entrypoint}}' "$IMAGE")"
check "check-config lists the plugin from its entry point" in_plugin_image \
  'aql-mcp check-config --dev | grep -q "plugin greeter: greeter_plugin:plugin (entry point greeter of greeter-plugin "'
podman run "${RUN_OPTS[@]}" -d --name "$NAME" --read-only --cap-drop ALL --security-opt no-new-privileges \
  -p "127.0.0.1:$PORT:8000" -v "$NAME-state:/var/lib/aql-mcp" -v "$TOOLS/config.yaml:/etc/aql-mcp/config.yaml:ro" \
  -e AQL_MCP_PLUGINS__GREETER__GREETING=Salut "$PLUGIN_IMAGE" --config /etc/aql-mcp/config.yaml >/dev/null
check "the layered image becomes ready" wait_ready
greets() {  # greets TOOL ARGUMENTS: the plugin's answer carries the greeting its setting gives
  call_tool "http://127.0.0.1:$PORT/mcp" "$TOKEN" "$1" "$2" | grep -q 'Salut, Ada!'
}
check "the plugin's tool answers through /mcp, with its setting from the environment" \
  greets greeting '{"name": "Ada"}'
check "the plugin's MCP-AQL operation answers through /mcp" \
  greets mcp_aql_read '{"operation": "greet", "params": {"name": "Ada"}}'
check "SIGTERM stops the layered image cleanly" stops_cleanly
