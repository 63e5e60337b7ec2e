"""HTTP/1.1 over raw sockets, for what no well-behaved client does: heads that never end, bytes
trickled one at a time, connections that say nothing. Also the server's memory as the kernel sees it.
"""

from __future__ import annotations

import os
import select
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import orjson

SLOW_HEAD = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: "


@dataclass(frozen=True)
class RawResponse:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


def connect(port: int, seconds: float = 10.0) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=seconds)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def is_readable(sock: socket.socket) -> bool:
    readable, _, _ = select.select([sock], [], [], 0)
    return bool(readable)


def read_response(sock: socket.socket, seconds: float = 10.0) -> RawResponse:
    """One response with a Content-Length body."""
    sock.settimeout(seconds)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response head: {data!r}"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        assert chunk, "connection closed inside a response body"
        body += chunk
    return RawResponse(int(status_line.split()[1]), headers, body[:length])


def is_closed_by_peer(sock: socket.socket, seconds: float = 10.0) -> bool:
    """Whether the server closes the connection within `seconds` (what it still sends is dropped)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            if not sock.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
    return False


def send_until_answered(sock: socket.socket, head: bytes, filler: bytes, total: int) -> int:
    """Send `head`, then `filler` until `total` bytes went out or the server answered; bytes sent."""
    sock.sendall(head)
    sent = len(head)
    while sent < total and not is_readable(sock):
        try:
            sock.sendall(filler)
        except (ConnectionResetError, BrokenPipeError):
            break
        sent += len(filler)
    return sent


def send_until_closed(sock: socket.socket, filler: bytes, total: int) -> int:
    """Send `filler` until `total` bytes went out or the server closed the connection; bytes sent.
    What the server answers meanwhile is read and dropped."""
    sent = 0
    while sent < total:
        while is_readable(sock):
            try:
                if not sock.recv(65536):
                    return sent
            except ConnectionResetError:
                return sent
        try:
            sock.sendall(filler)
        except (ConnectionResetError, BrokenPipeError):
            return sent
        sent += len(filler)
    return sent


def trickle_until_answered(sock: socket.socket, byte: bytes, every: float, seconds: float) -> bool:
    """Send one byte every `every` seconds until the server answers or closes; whether it did."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], every)
        if readable:
            return True
        try:
            sock.sendall(byte)
        except (ConnectionResetError, BrokenPipeError):
            return True
    return False


@contextmanager
def slow_connections(port: int, count: int) -> Iterator[list[socket.socket]]:
    """`count` connections, each holding an unfinished request head (the slow-client attack)."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = connect(port)
            sock.sendall(SLOW_HEAD)
            socks.append(sock)
        yield socks
    finally:
        for sock in socks:
            sock.close()


def open_descriptors(pid: int) -> int:
    """How many files a process has open (/proc/<pid>/fd)."""
    return len(os.listdir(f"/proc/{pid}/fd"))


def rss_kib(pid: int) -> int:
    """The resident set of a process, in KiB (/proc/<pid>/status VmRSS)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError("no VmRSS line")


def open_file_limits(pid: int) -> tuple[int, int]:
    """The soft and hard limits on open files of a process (/proc/<pid>/limits)."""
    with open(f"/proc/{pid}/limits", encoding="ascii") as limits:
        for line in limits:
            if line.startswith("Max open files"):
                soft, hard = line.split()[3:5]
                return int(soft), int(hard)
    raise AssertionError("no 'Max open files' line")
