"""nginx from Debian in front of real replicas: the gateway of docs/gateway.md, started by
scripts/nginx.sh.

`running_gateway(directory, ports)` writes a whole nginx configuration into `directory`: an http
block with the replicas as the upstream `aql_mcp` (with a keep-alive pool) and one server on a free
port of 127.0.0.1 that includes the site example `deploy/nginx/aql-mcp.conf` unchanged, so the
example users copy is the one the tests run. `site` swaps in another file (a test's own policy
snippet); `http_extra` and `server_extra` add directives around it (a short `proxy_read_timeout`).
`Gateway.set_upstreams` rewrites the upstream list and reloads nginx without dropping its
connections, as a controller does when pods come and go.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.server import free_port
from tests.support.wait import until

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "nginx.sh"
SITE = ROOT / "deploy" / "nginx" / "aql-mcp.conf"
KEEPALIVE = 16
READ_TIMEOUT = re.compile(r"^([ \t]*)proxy_read_timeout\s+[^;]+;", re.MULTILINE)


@dataclass
class Gateway:
    directory: Path
    port: int
    upstreams: list[int]
    site: Path
    http_extra: str = ""
    server_extra: str = ""
    pid: int = field(default=0)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    @property
    def error_log(self) -> Path:
        return self.directory / "error.log"

    def access_log(self) -> list[str]:
        path = self.directory / "access.log"
        return path.read_text(encoding="utf-8").splitlines() if path.exists() else []

    def logged(self, fragment: str, since: int = 0) -> list[str]:
        """The access-log lines after line `since` that hold `fragment`, once there is one.

        nginx writes a request's line after the response's last byte has left, so a client holding
        its answer can read the log before its own line is in it: read the log, then wait for it.
        """
        until(
            lambda: any(fragment in line for line in self.access_log()[since:]),
            f"no access-log line with {fragment!r}",
        )
        return [line for line in self.access_log()[since:] if fragment in line]

    def set_upstreams(self, ports: Sequence[int]) -> None:
        self.upstreams = list(ports)
        self._write()
        _script("reload", self.directory)

    def _write(self) -> None:
        (self.directory / "nginx.conf").write_text(_configuration(self), encoding="utf-8")


def _configuration(gateway: Gateway) -> str:
    here = gateway.directory
    servers = "\n".join(f"        server 127.0.0.1:{port};" for port in gateway.upstreams)
    # The master runs as whoever runs the tests; as root its workers would otherwise drop to
    # `nobody`, which cannot write the temporary files under the test's directory.
    user = "user root root;\n" if os.geteuid() == 0 else ""
    temp = "\n".join(
        f"    {kind}_temp_path {here / 'temp' / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return f"""{user}worker_processes 1;
events {{ worker_connections 1024; }}
http {{
{temp}
    log_format upstream '$request_method $uri $status upstream=$upstream_addr '
                        'upstream_status=$upstream_status op=$http_mcp_param_operation';
    access_log {here / "access.log"} upstream;
{gateway.http_extra}
    upstream aql_mcp {{
{servers}
        keepalive {KEEPALIVE};
        keepalive_timeout 5s;
    }}
    server {{
        listen 127.0.0.1:{gateway.port};
{gateway.server_extra}
        include {gateway.site};
    }}
}}
"""


def _script(command: str, directory: Path) -> str:
    done = subprocess.run(
        [str(SCRIPT), command, str(directory)], capture_output=True, text=True, timeout=120, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"scripts/nginx.sh {command} failed: {done.stderr.strip()}")
    return done.stdout.strip()


@contextmanager
def running_gateway(
    directory: Path,
    ports: Sequence[int],
    *,
    site: Path = SITE,
    http_extra: str = "",
    server_extra: str = "",
) -> Iterator[Gateway]:
    """nginx on a free port of 127.0.0.1 proxying to the replicas on `ports`; stopped at exit."""
    directory.mkdir(parents=True, exist_ok=True)
    for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"):
        (directory / "temp" / kind).mkdir(parents=True, exist_ok=True)
    gateway = Gateway(directory, free_port(), list(ports), site, http_extra, server_extra)
    gateway._write()
    gateway.pid = int(_script("start", directory))
    try:
        yield gateway
    finally:
        _script("stop", directory)


def site_with_read_timeout(directory: Path, seconds: int) -> Path:
    """A copy of the site example in `directory` whose `proxy_read_timeout` is `seconds`: the
    example sets it inside `location /mcp`, where it wins over anything `server_extra` could say."""
    text, found = READ_TIMEOUT.subn(rf"\1proxy_read_timeout {seconds}s;", SITE.read_text(encoding="utf-8"))
    assert found == 1, f"the site example sets proxy_read_timeout {found} times, not once"
    directory.mkdir(parents=True, exist_ok=True)
    copy = directory / "aql-mcp-site.conf"
    copy.write_text(text, encoding="utf-8")
    return copy
