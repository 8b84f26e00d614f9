"""The server listens when it says so: `serve` logs "listening" before uvicorn has imported and
started the app (uvicorn logs "startup complete" before it listens itself), so the socket it
hands uvicorn already listens, and a client connecting in between waits in the backlog for
its answer instead of being refused."""

from __future__ import annotations

import socket

from server.listen import listening_socket


def test_a_client_connecting_before_the_app_accepts_is_held_not_refused() -> None:
    sock = listening_socket("127.0.0.1", 0)
    try:
        # Nobody accepts yet: the kernel completes the handshake and keeps it queued.
        with socket.create_connection(sock.getsockname()[:2], timeout=5) as client:
            client.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            accepted, _ = sock.accept()
            with accepted:
                assert accepted.recv(64).startswith(b"GET /healthz")
    finally:
        sock.close()
