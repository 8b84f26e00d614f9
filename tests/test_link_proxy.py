"""The upload benchmark's shaped link gives the rate and the round trip it promises, shares
its rate between connections, and lets a small request through beside a bulk one."""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from link_proxy import ShapedLink  # noqa: E402

RATE_BITS = 20e6  # the benchmark's link: 20 Mbit/s, 50 ms round trips
RTT_S = 0.05
#: What a loaded machine's timers may add (the suite runs beside others on 2 cores) to the
#: best of a few tries; the lower bounds are exact: the link is never faster than promised.
LATE_S = 0.02
LATE_RATE = 1.15
TRIES = 3
HEAD = 9  # b"x" + the body's length in 8 digits


def _answer(conn: socket.socket) -> None:
    """Per message (a head, then its body): one byte back once the body is all in."""
    with conn:
        while True:
            head = b""
            while len(head) < HEAD:
                got = conn.recv(HEAD - len(head))
                if not got:
                    return
                head += got
            left = int(head[1:])
            while left:
                left -= len(conn.recv(min(left, 1 << 16)))
            conn.sendall(b"k")


@pytest.fixture
def link() -> Iterator[ShapedLink]:
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=_answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    with ShapedLink(listener.getsockname(), rate_bits=RATE_BITS, rtt_s=RTT_S) as shaped:
        yield shaped
    listener.close()


def _connect(link: ShapedLink) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", link.port))
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return conn


def _exchange(conn: socket.socket, size: int) -> float:
    """Seconds to send a message of ``size`` bytes and have its answer."""
    started = time.perf_counter()
    conn.sendall(b"x%08d" % size + bytes(size))
    assert conn.recv(1) == b"k"
    return time.perf_counter() - started


def test_a_round_trip_takes_the_rtt_and_a_new_connection_one_more(link: ShapedLink) -> None:
    firsts, trips = [], []
    for _ in range(TRIES):
        connecting = time.perf_counter()
        with _connect(link) as conn:
            _exchange(conn, 0)  # its handshake's round trip, then its own
            firsts.append(time.perf_counter() - connecting)
            trips += [_exchange(conn, 0) for _ in range(3)]
    assert all(s >= 2 * RTT_S for s in firsts), firsts
    assert min(firsts) <= 2 * RTT_S + LATE_S, firsts
    assert all(s >= RTT_S for s in trips), trips
    assert min(trips) <= RTT_S + LATE_S, trips
    assert link.connections == TRIES


def test_bytes_go_at_the_rate_and_two_connections_share_it(link: ShapedLink) -> None:
    size = 312_500  # 0.125 s at 20 Mbit/s
    alone: list[float] = []
    both: list[float] = []
    with _connect(link) as one, _connect(link) as two:
        _exchange(one, 0)
        _exchange(two, 0)
        for _ in range(TRIES):
            alone.append(_exchange(one, size))
            other = threading.Thread(target=lambda: both.append(_exchange(two, size)))
            other.start()
            both.append(_exchange(one, size))
            other.join()
    wire_s = size * 8 / RATE_BITS
    assert all(s >= wire_s + RTT_S for s in alone), alone
    assert min(alone) <= (wire_s + RTT_S) * LATE_RATE, alone
    # Together, twice the bytes through the one link: each takes about twice as long (the
    # one that began first may finish a piece or so sooner).
    together = 2 * wire_s + RTT_S
    assert all(s >= together - 0.02 for s in both), both
    assert min(max(pair) for pair in zip(both[::2], both[1::2], strict=True)) <= (
        together * LATE_RATE
    ), both


def test_a_small_request_beside_a_bulk_one_waits_for_one_piece_of_it(link: ShapedLink) -> None:
    size = 1_250_000  # 0.5 s of the link
    bulk_done: list[float] = []

    def send_bulk() -> None:
        _exchange(bulk, size)
        bulk_done.append(time.perf_counter())

    with _connect(link) as bulk, _connect(link) as small:
        _exchange(small, 0)
        sending = threading.Thread(target=send_bulk)
        already = link.bytes_up
        sending.start()
        deadline = time.monotonic() + 5
        while link.bytes_up < already + 100_000:  # the bulk message is on the link
            assert time.monotonic() < deadline, "the bulk message never went"
            time.sleep(0.005)
        beside = [_exchange(small, 100) for _ in range(3)]
        small_done = time.perf_counter()
        sending.join()
    piece_s = 16 * 1024 * 8 / RATE_BITS
    assert all(s >= RTT_S for s in beside), beside
    # Behind the bulk message's backlog they would end after it; behind one piece, long before.
    assert small_done < bulk_done[0], (beside, bulk_done[0] - small_done)
    assert min(beside) <= RTT_S + piece_s + LATE_S, beside
    assert link.bytes_up >= size + 300
