"""The upload benchmark's instruments measure what they claim (nothing is timed here): the RSS
sampler sees another process grow by what it allocated, and the bare sink beside the app
stores exactly the bytes a PUT sent, while the app behind it still answers."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import httpx
import pytest

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

from bench_server import ServerProcess  # noqa: E402
from rss import MIB, RssSampler, rss_kib  # noqa: E402

_GROWER = textwrap.dedent(
    """
    import sys
    print("ready", flush=True)
    sys.stdin.readline()
    block = bytearray(64 * 1024 * 1024)
    for at in range(0, len(block), 4096):
        block[at] = 1  # touch every page, so it is resident
    print("grown", flush=True)
    sys.stdin.readline()
    """
)


def test_the_sampler_sees_another_process_grow_by_what_it_allocated() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _GROWER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        assert child.stdin is not None
        assert child.stdout is not None
        try:
            assert child.stdout.readline().strip() == "ready"
            with RssSampler({"child": child.pid}) as sampler:
                sampler.mark()
                child.stdin.write("go\n")
                child.stdin.flush()
                assert child.stdout.readline().strip() == "grown"
            growth = sampler.growth_mib()["child"]
            assert 60 <= growth <= 72, growth
            peak, baseline = sampler.peak_mib()["child"], sampler.baseline_mib()["child"]
            assert peak - baseline == pytest.approx(growth, abs=0.15)
            assert sampler.samples >= 1
            child.stdin.write("exit\n")
            child.stdin.flush()
            child.wait(10)
            assert rss_kib(child.pid) is None  # reaped: nothing to read
        finally:
            child.kill()


class _SinkServer(ServerProcess):
    def command(self) -> list[str]:
        return [
            sys.executable, str(BENCHMARKS / "upload_server.py"), "--db", self.db_url,
            "--port", str(self.port), "--sink-dir", str(self.sink_dir),
        ]  # fmt: skip

    @property
    def sink_dir(self) -> Path:
        return self.log_path.parent / "sink"


def test_the_sink_stores_exactly_the_bytes_put_and_the_app_still_answers(tmp_path: Path) -> None:
    payload = os.urandom(3 * MIB + 17)
    source = tmp_path / "payload.bin"
    source.write_bytes(payload)
    with _SinkServer(tmp_path) as server, httpx.Client(base_url=server.base_url) as client:
        with source.open("rb") as body:
            reply = client.put("/bench/sink/one.bin", content=body)
        assert reply.status_code == 200
        assert reply.json() == {"size": len(payload), "sha256": hashlib.sha256(payload).hexdigest()}
        assert (server.sink_dir / "one.bin").read_bytes() == payload
        assert client.put("/bench/sink/..", content=b"x").status_code == 404
        assert client.get("/healthz").json() == {"status": "ok"}
        # The sink takes only PUT; the app's own routes still refuse a stranger.
        assert client.get("/v1/changes").status_code == 401
