"""The connections waiting in a listening socket's accept queue, taken before the socket closes.

The kernel completes a TCP handshake before the application accepts the connection; closing a
listening socket resets every connection still queued on it (Linux sends RST), and a gateway that
already wrote its request there gets no answer and never retries a POST it sent. A replica that
stops accepting (server/shutdown.py) first takes what is queued and serves it like any connection
accepted in time: a gateway's new connection then either is served or is refused outright, which
it safely tries on another replica.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable


def take_backlog(listening: Iterable[int]) -> list[socket.socket]:
    """Accept every connection queued on the listening sockets of these descriptors, without waiting."""
    taken: list[socket.socket] = []
    for descriptor in listening:
        # The loop's own socket object refuses `accept`; a second descriptor of the same socket does not.
        handle = socket.socket(fileno=os.dup(descriptor))
        try:
            taken.extend(_accept_all(handle))
        finally:
            handle.close()  # this descriptor only: its owner closes the socket itself
    return taken


def _accept_all(listening: socket.socket) -> list[socket.socket]:
    accepted: list[socket.socket] = []
    listening.setblocking(False)
    while True:
        try:
            connection, _ = listening.accept()
        except OSError:  # the queue is empty (EAGAIN), or no descriptor is left to take one
            return accepted
        connection.setblocking(False)
        accepted.append(connection)
