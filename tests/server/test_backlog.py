"""server/backlog.py: the connections queued on a listening socket, taken before it closes.

Linux completes a handshake before the application accepts; closing the listening socket resets
what is still queued, a request already written there included. Taken first, it is served.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from aql_mcp.server.backlog import take_backlog
from tests.support.rawhttp import connect

REQUEST = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}"


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A listening socket nobody accepts on, as a replica's is between two turns of its loop."""
    sock = socket.create_server(("127.0.0.1", 0), backlog=8)
    yield sock
    sock.close()


def queue_requests(listening: socket.socket, count: int) -> list[socket.socket]:
    clients = [connect(listening.getsockname()[1]) for _ in range(count)]
    for client in clients:
        client.sendall(REQUEST)
    return clients


def test_the_queued_connections_are_taken_with_their_requests(listening: socket.socket) -> None:
    clients = queue_requests(listening, 3)
    taken = take_backlog([listening.fileno()])
    listening.close()
    for connection in taken:
        connection.setblocking(True)
        connection.settimeout(5)
    received = [connection.recv(1024) for connection in taken]
    for connection in taken:
        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    answers = [client.recv(1024) for client in clients]
    for sock in (*taken, *clients):
        sock.close()

    assert received == [REQUEST] * 3
    assert all(answer.startswith(b"HTTP/1.1 200") for answer in answers)


def test_what_is_left_queued_is_reset_when_the_socket_closes(listening: socket.socket) -> None:
    """Why the queue is taken: the kernel's answer to a queued request is a reset."""
    (client,) = queue_requests(listening, 1)
    listening.close()
    client.settimeout(5)
    with pytest.raises(ConnectionResetError):
        client.recv(1024)
    client.close()


def test_an_empty_queue_takes_nothing_and_leaves_the_socket_listening(listening: socket.socket) -> None:
    assert take_backlog([listening.fileno()]) == []
    (client,) = queue_requests(listening, 1)
    connection, _ = listening.accept()
    connection.close()
    client.close()
