# syntax=docker/dockerfile:1
# aql-mcp: the service image. Three stages: the dependencies' wheels are taken from the hashed lock
# (requirements/, nothing resolved) and the service's wheel is built, a virtual environment is
# installed from those wheels alone, and only that environment is copied onto a clean runtime base:
# no compiler, pip cache, build tool, source tree or test ends up in the final image.
#
#   docker build -t aql-mcp:0.2.0 --build-arg VERSION=0.2.0 --build-arg SOURCE=<repository URL> \
#     --build-arg REVISION=$(git rev-parse HEAD) .
#   docker run --read-only -p 8000:8000 -v aql-mcp-state:/var/lib/aql-mcp \
#     -e AQL_MCP_AUTH__JWKS_URL=... -e AQL_MCP_AUTH__ISSUER=... -e AQL_MCP_AUTH__AUDIENCE=... aql-mcp:0.2.0
#
# The base is a build argument so that a mirror or a stand-in (scripts/image-test.sh) can replace it.
ARG PYTHON_IMAGE=python:3.11-slim

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Nothing is resolved here: every file comes from the hashed lock (requirements/, `make lock`).
# --require-hashes refuses a file whose sha256 is not in the lock, --no-deps takes the lock's list as
# the whole closure, and --only-binary keeps compilers out (the lock has wheels for x86_64 and aarch64).
COPY requirements/build.txt requirements/runtime.txt ./requirements/
RUN python3 -m venv /build \
    && /build/bin/python -m pip install --require-hashes --no-deps --only-binary :all: -r requirements/build.txt \
    && /build/bin/python -m pip wheel --wheel-dir /wheels --require-hashes --no-deps --only-binary :all: \
       -r requirements/runtime.txt
COPY pyproject.toml README.md ./
COPY src ./src
# The service's own wheel, by the locked build backend installed above (no isolated build downloads).
RUN /build/bin/python -m pip wheel --wheel-dir /wheels --no-deps --no-build-isolation .

FROM ${PYTHON_IMAGE} AS install
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
COPY --from=build /wheels /wheels
COPY --from=build /src/requirements/runtime.txt /requirements/runtime.txt
# From the wheels only (--no-index), checked against the lock again, then the service's wheel; `pip check`
# fails the build if the lock missed a dependency (--no-deps installs only what it lists); then the
# installer itself leaves the environment.
RUN python3 -m venv /opt/aql-mcp \
    && /opt/aql-mcp/bin/python -m pip install --no-index --find-links /wheels --require-hashes --no-deps \
       -r /requirements/runtime.txt \
    && /opt/aql-mcp/bin/python -m pip install --no-index --no-deps /wheels/aql_mcp-*.whl \
    && /opt/aql-mcp/bin/python -m pip check \
    && /opt/aql-mcp/bin/python -m pip uninstall --yes pip setuptools \
    && /opt/aql-mcp/bin/aql-mcp --version

FROM ${PYTHON_IMAGE} AS runtime
ARG PYTHON_IMAGE
ARG VERSION=0.2.0
ARG SOURCE=""
ARG REVISION=""
ARG CREATED=""
LABEL org.opencontainers.image.title="aql-mcp" \
      org.opencontainers.image.description="Corporate-profile Streamable HTTP MCP server fronting an MCP-AQL operation router" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="${SOURCE}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}" \
      org.opencontainers.image.licenses="LicenseRef-Proprietary" \
      org.opencontainers.image.base.name="${PYTHON_IMAGE}"

# A numeric non-root user; the state directory is the only place it writes (the root filesystem
# may be mounted read-only): the SQLite store lives there, on a volume.
RUN groupadd --system --gid 10001 aql-mcp \
    && useradd --system --no-log-init --uid 10001 --gid 10001 --home-dir /var/lib/aql-mcp \
       --shell /usr/sbin/nologin aql-mcp \
    && mkdir -p /var/lib/aql-mcp \
    && chown 10001:10001 /var/lib/aql-mcp \
    && chmod 0750 /var/lib/aql-mcp
COPY --from=install /opt/aql-mcp /opt/aql-mcp

ENV PATH=/opt/aql-mcp/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    AQL_MCP_STORE__PATH=/var/lib/aql-mcp
WORKDIR /var/lib/aql-mcp
VOLUME ["/var/lib/aql-mcp"]
USER 10001:10001
EXPOSE 8000
# The service drains on SIGTERM (/ready turns 503, in-flight calls finish): shutdown.* settings.
STOPSIGNAL SIGTERM
# No curl in a slim image: Python's urllib asks /health (liveness; Kubernetes uses its own probes),
# on the probes listener when AQL_MCP_PROBES__PORT names one (a flood of the service port spares it).
HEALTHCHECK --interval=30s --timeout=5s --start-period=15s --retries=3 \
    CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:' + (os.environ.get('AQL_MCP_PROBES__PORT') or os.environ.get('AQL_MCP_SERVER__PORT', '8000')) + '/health', timeout=4)"]
# Exec form: the service is PID 1 and receives SIGTERM itself. Arguments are appended
# (the Helm chart passes --config /etc/aql-mcp/config.yaml).
ENTRYPOINT ["aql-mcp", "serve", "--host", "0.0.0.0"]
