"""Upload benchmark: the device's resumable (tus) upload beside one plain HTTP PUT of the same
bytes to the same server process, on loopback and on a shaped link; bytes re-sent after cuts,
memory, and an edit behind a file.

    .venv/bin/python benchmarks/upload_bench.py --quick --json /tmp/upload.json
    .venv/bin/python benchmarks/upload_bench.py --json     # benchmarks/results/upload_bench.json

One server process for the whole run (`benchmarks/upload_server.py`: the real app started as
`fieldsync-server serve` starts it, with a bare streaming `PUT /bench/sink/{name}` in front of
it), on SQLite, loopback, `--log-level warning`, rate limit off. Each device is its own process
(`benchmarks/upload_device.py`: the real store, attachment queue and sync engine), with a fresh
data dir; the file is random bytes (incompressible), in the page cache for both clients, and
each device upload sends a copy with new first bytes (`fresh_copy`): content the server does
not hold yet, as each PUT writes a new file.

- throughput: a file of SIZE (100 MiB; 16 MiB quick) uploaded by the device (attach, then the
  engine's uploader, timed from the engine's start to the progress event saying `uploaded`)
  beside one `PUT` of the same file from httpx streaming it from disk to the sink, which writes
  it to disk, hashes it and fsyncs it (the least an upload that checks its bytes must do).
  Interleaved run by run, medians; the ratio is device MiB/s over PUT MiB/s (target >= 80 %).
  Beside it, the same uploads timed from their creation (the POST answered) to `uploaded`:
  the chunks alone, without the engine's start and the first pull it makes before uploading.
  Every upload is checked afterwards: `GET /v1/attachments/{id}` hashes to the file's sha256.
- cuts: the same file through the fault proxy (`tests/chaos/proxy.py`), which cuts 5 PATCH
  bodies at seeded points (the server gets the bytes before the cut, the device a reset). Bytes
  re-sent = PATCH body bytes the proxy read from the device, minus the file size; per cut it
  should stay under one chunk (a resume starts from the server's offset, not from zero).
- memory: a file of 2 x SIZE uploaded while the RSS of the device process and of the server
  process are sampled every 20 ms: peak minus the RSS just before the upload (target <= 32 MiB
  each); beside it, the server's growth while the sink takes one PUT of the same file.
- edit behind an upload: while a SIZE file uploads, 5 edits of the work order are queued at
  seeded moments (mid-chunk or not), each timed from queued to acknowledged; beside them, the
  same edits with nothing uploading (after the upload, same engine). The delay the upload
  causes (median and max of behind minus the median alone) is compared with the median
  chunk's time (target: within one chunk; edits go on their own connection, so about none).
- chunk sizes: the same upload with the largest chunk set to 8, 16, 32, 64 and 128 MiB (the
  default), one run each, each right after a PUT of its own: what a durable answer per chunk
  costs (the server fsyncs each chunk before it answers, and tus lets no chunk start before
  the last one's answer, so only larger chunks amortise it).
- shaped link: the device's upload and the PUT through `link_proxy.ShapedLink`, a proxy on
  loopback at 20 Mbit/s with 50 ms round trips (SHAPED_SIZE, 50 MiB: 21 s each, interleaved;
  target >= 95 % of the PUT), then 5 edits queued at seeded moments while a SHAPED_EDIT_SIZE
  (100 MiB, 42 s) file uploads through it, each timed from queued to the server's answer
  recorded on the device (target: within 1 s; beside them, the same edits alone on the link).

The full run takes about 4 minutes on a quiet 2-core machine, 3 of them on the shaped link.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import DeviceChild  # noqa: E402
from bench_server import ServerProcess, temp_dir  # noqa: E402
from cpu_probe import CpuWindow  # noqa: E402
from link_proxy import ShapedLink  # noqa: E402
from results_file import SMOKE_HELP, RunWindow, add_json_option, publish, run_mode  # noqa: E402
from rss import RssSampler  # noqa: E402

from tests.chaos.plans import PASS, Fault, RequestInfo, cut_body  # noqa: E402
from tests.chaos.proxy import FaultProxy  # noqa: E402

#: The code these figures depend on: report.py --check fails once it changes after the
#: commit a results file measured (benchmarks/staleness.py).
MEASURES = (
    "benchmarks/upload_bench.py",
    "benchmarks/upload_device.py",
    "benchmarks/upload_server.py",
    "benchmarks/bench_device.py",
    "benchmarks/bench_server.py",
    "benchmarks/rss.py",
    "benchmarks/cpu_probe.py",
    "benchmarks/link_proxy.py",
    "benchmarks/loopback_proxy.py",
    "tests/chaos/proxy.py",
    "tests/chaos/plans.py",
    "tests/chaos/http_framing.py",
    "app/",
    "server/",
)
MIB = 1024 * 1024
HERE = Path(__file__).resolve().parent
THROUGHPUT_TARGET = 0.80
SHAPED_TARGET = 0.95
SHAPED_RATE_BITS = 20e6
SHAPED_RTT_S = 0.05
EDIT_SHAPED_TARGET_S = 1.0
RSS_TARGET_MIB = 32.0
CUTS = 5
EDITS = 5
UPLOAD_LIMIT_S = 1800.0


@dataclass(frozen=True)
class Plan:
    runs: int
    size: int  # bytes of the throughput, cut and edit files
    rss_size: int  # bytes of the memory run's file
    chunk_limits_mib: tuple[int, ...]  # the chunk-size runs
    shaped_runs: int
    shaped_size: int  # bytes of the shaped link's throughput file
    shaped_edit_size: int  # bytes of the file the edits queue behind on the shaped link


QUICK = Plan(3, 16 * MIB, 32 * MIB, (8, 64), 1, 8 * MIB, 16 * MIB)
FULL = Plan(5, 100 * MIB, 200 * MIB, (8, 16, 32, 64, 128), 2, 50 * MIB, 100 * MIB)
SMOKE = Plan(1, 4 * MIB, 8 * MIB, (), 1, 1 * MIB, 2 * MIB)  # no chunk sweep: a device less


class UploadServer(ServerProcess):
    """`upload_server.py`: the app plus the bare sink, uploads allowed up to `max_upload`."""

    def __init__(self, workdir: Path, max_upload: int) -> None:
        super().__init__(workdir)
        self.sink_dir = workdir / "sink"
        self.max_upload = max_upload
        self.workdir = workdir

    def command(self) -> list[str]:
        return [
            sys.executable, str(HERE / "upload_server.py"), "--db", self.db_url,
            "--port", str(self.port), "--sink-dir", str(self.sink_dir),
            "--setting", f"max_upload_bytes={self.max_upload}",
            "--setting", f"attachments_dir={self.workdir / 'attachments'}",
        ]  # fmt: skip


def make_payload(path: Path, size: int, seed: int) -> str:
    """`size` random bytes (seeded) at `path`; returns their sha256."""
    rng = random.Random(seed)
    digest = hashlib.sha256()
    with path.open("wb") as out:
        left = size
        while left:
            block = rng.randbytes(min(MIB, left))
            out.write(block)
            digest.update(block)
            left -= len(block)
    return digest.hexdigest()


def start_device(root: Path, server_url: str, token: str, file: Path, *extra: str) -> DeviceChild:
    """An `upload_device.py` with a fresh data dir: `ready` (attached, waiting), then `done`."""
    data_dir = root / f"device-{time.monotonic_ns()}"
    data_dir.mkdir(parents=True)
    env = {**os.environ, "FIELDSYNC_TOKEN": token, "PYTHONUNBUFFERED": "1"}
    command = [sys.executable, str(HERE / "upload_device.py"), "--data-dir", str(data_dir),
               "--server", server_url, "--file", str(file), *extra]  # fmt: skip
    return DeviceChild(command, data_dir.with_suffix(".stderr"), env)


def put_file(base_url: str, file: Path, name: str, sha256: str) -> float:
    """Seconds for one streaming PUT of `file` to the sink (checked: size and hash)."""
    with httpx.Client(base_url=base_url, timeout=600.0) as client:
        client.get("/healthz")  # the connection is open before the clock starts, as the
        # device's engine has its own open when its upload begins
        started = time.perf_counter()
        with file.open("rb") as body:
            # A file object: httpx sends Content-Length (from fstat) and reads it in blocks.
            reply = client.put(f"/bench/sink/{name}", content=body)
        elapsed = time.perf_counter() - started
    reply.raise_for_status()
    if reply.json() != {"size": file.stat().st_size, "sha256": sha256}:
        raise RuntimeError(f"the sink received something else: {reply.text}")
    return elapsed


def check_on_server(base_url: str, token: str, attachment_id: str, sha256: str) -> None:
    """The attachment's bytes on the server hash to what the device attached."""
    digest = hashlib.sha256()
    headers = {"Authorization": f"Bearer {token}"}
    with (
        httpx.Client(base_url=base_url, headers=headers, timeout=600.0) as client,
        client.stream("GET", f"/v1/attachments/{attachment_id}") as reply,
    ):
        reply.raise_for_status()
        for block in reply.iter_bytes(MIB):
            digest.update(block)
    if digest.hexdigest() != sha256:
        raise RuntimeError(f"attachment {attachment_id} on the server has other bytes")


def fresh_copy(file: Path, target: Path) -> str:
    """`file` with new random first bytes at `target`, fsynced (no writeback of it runs during
    the upload); returns its sha256. Every device upload sends bytes the server does not hold
    yet, as every PUT writes a new file: an upload of bytes it holds already completes by
    replacing the old copy, whose blocks are freed before the answer (35 ms for 100 MiB on a
    disk mounted with ``discard``), a cost the PUT never paid and a new photo never does."""
    digest = hashlib.sha256()
    with file.open("rb") as source, target.open("wb") as out:
        block = os.urandom(16) + source.read(MIB)[16:]
        while block:
            out.write(block)
            digest.update(block)
            block = source.read(MIB)
        out.flush()
        os.fsync(out.fileno())
    return digest.hexdigest()


def upload(
    root: Path, server: UploadServer, token: str, file: Path, *extra: str,
    url: str | None = None, sampler_pids: dict[str, int] | None = None,
) -> tuple[dict[str, Any], dict[str, Any], dict[str, float]]:  # fmt: skip
    """One device upload of a `fresh_copy` of `file`; (ready message, done message with the
    CPU seconds the device and the server spent on it, RSS growth in MiB if sampled)."""
    copy = root / f"upload-{time.monotonic_ns()}.bin"
    sha256 = fresh_copy(file, copy)
    device = start_device(root, url or server.base_url, token, copy, *extra)
    try:
        ready = device.expect("ready")
        if ready["sha256"] != sha256:
            raise RuntimeError("the device attached other bytes")
        pids = {"device": device.pid, **(sampler_pids or {})}
        cpu = CpuWindow({"device": lambda: {device.pid}, "server": lambda: {server.pid}})
        with RssSampler(pids) as sampler:
            sampler.mark()
            cpu.start()
            device.send()
            done = device.expect("done")
            done["cpu"] = cpu.stop()
        growth = sampler.growth_mib() if sampler_pids is not None else {}
    finally:
        device.close()
    check_on_server(server.base_url, token, ready["attachment_id"], sha256)
    copy.unlink()
    return ready, done, growth


def timed_put(server: UploadServer, base_url: str, file: Path, name: str, sha256: str) -> Any:
    """`put_file`, with the CPU seconds the server and this client spent on it."""
    cpu = CpuWindow({"server": lambda: {server.pid}, "client": lambda: {os.getpid()}})
    cpu.start()
    seconds = put_file(base_url, file, name, sha256)
    return seconds, cpu.stop()


class CutPlan:
    """Cuts PATCH number 1, 3, 5, ... (from 0) until `cuts` are done, each at a seeded point
    of its body; every other request passes."""

    def __init__(self, cuts: int, seed: int) -> None:
        self.left = cuts
        self.rng = random.Random(seed)
        self.patches = 0
        self.cut_at: list[tuple[int, int]] = []  # (bytes before the cut, body length)

    def __call__(self, info: RequestInfo) -> Fault:
        if info.method != "PATCH":
            return PASS
        self.patches += 1
        if self.left <= 0 or self.patches % 2 == 1 or info.body_bytes < 2:
            return PASS
        self.left -= 1
        after = self.rng.randrange(1, info.body_bytes)
        self.cut_at.append((after, info.body_bytes))
        return cut_body(after)


def median(values: list[float]) -> float:
    return statistics.median(values)


def measure_throughput(
    root: Path, server: UploadServer, token: str, file: Path, sha256: str, runs: int,
    *, via: str | None = None, target: float = THROUGHPUT_TARGET,
) -> dict[str, Any]:  # fmt: skip
    """The device's upload beside the PUT, straight to the server or ``via`` a link."""
    size = file.stat().st_size
    base_url = via or server.base_url
    device_s: list[float] = []
    chunks_s: list[float] = []
    put_s: list[float] = []
    chunk_bytes: list[int] = []
    cpu: dict[str, list[float]] = {"device": [], "server": [], "put_client": [], "put_server": []}
    for run in range(runs):
        # Alternate which goes first, so a slow moment of the machine hits both alike.
        order = ("device", "put") if run % 2 == 0 else ("put", "device")
        for what in order:
            if what == "put":
                seconds, used = timed_put(server, base_url, file, f"run-{run}", sha256)
                put_s.append(seconds)
                cpu["put_client"].append(used["client_cpu_s"])
                cpu["put_server"].append(used["server_cpu_s"])
            else:
                _, done, _ = upload(root, server, token, file, url=base_url)
                device_s.append(done["upload_s"])
                chunks_s.append(done["chunks_s"])
                chunk_bytes += [chunk["bytes"] for chunk in done["chunks"]]
                cpu["device"].append(done["cpu"]["device_cpu_s"])
                cpu["server"].append(done["cpu"]["server_cpu_s"])
    device_rate = size / MIB / median(device_s)
    put_rate = size / MIB / median(put_s)
    return {
        "size_mib": round(size / MIB, 1),
        "device_s_median": round(median(device_s), 3),
        "put_s_median": round(median(put_s), 3),
        "device_mib_per_s": round(device_rate, 2),
        "put_mib_per_s": round(put_rate, 2),
        "ratio": round(device_rate / put_rate, 3),
        "target": target,
        "met": device_rate / put_rate >= target,
        "chunks": len(chunk_bytes) // runs,
        # The same uploads from their creation (POST answered) to the last chunk's answer:
        # what the engine's start and its first pull cost the figure above.
        "chunks_s_median": round(median(chunks_s), 3),
        "chunks_ratio": round(median(put_s) / median(chunks_s), 3),
        "chunk_mib_median": round(median(chunk_bytes) / MIB, 2) if chunk_bytes else None,
        "chunk_mib_max": round(max(chunk_bytes) / MIB, 2) if chunk_bytes else None,
        # CPU seconds per upload, medians: the device's process and the server's for the
        # device's upload (engine start to `uploaded`), this client's and the server's for the
        # PUT. On these 2 cores both sides share the machine, so CPU is what they compete for.
        "cpu_s_median": {name: round(median(values), 3) for name, values in cpu.items()},
        "samples": {
            "device_s": [round(s, 3) for s in device_s],
            "chunks_s": [round(s, 3) for s in chunks_s],
            "put_s": [round(s, 3) for s in put_s],
        },  # fmt: skip
    }


def measure_cuts(
    root: Path, server: UploadServer, token: str, file: Path, sha256: str, seed: int
) -> dict[str, Any]:
    size = file.stat().st_size
    plan = CutPlan(CUTS, seed)
    host, port = "127.0.0.1", server.port
    proxy = FaultProxy((host, port), plan).start()
    try:
        _, done, _ = upload(root, server, token, file, "--fast-retries", url=proxy.base_url)
        records = proxy.snapshot()
    finally:
        proxy.stop()
    patches = [r for r in records if r.method == "PATCH"]
    sent = sum(r.body_bytes for r in patches)
    chunks = [chunk["bytes"] for chunk in done["chunks"]]
    largest = max(chunks) if chunks else 0
    resent = sent - size
    return {
        "size_mib": round(size / MIB, 1),
        "cuts": len(plan.cut_at),
        "patch_requests": len(patches),
        "bytes_sent_in_patches": sent,
        "bytes_resent": resent,
        "bytes_resent_per_cut": round(resent / max(len(plan.cut_at), 1)),
        "largest_chunk_bytes": largest,
        "resent_per_cut_within_one_chunk": resent <= len(plan.cut_at) * largest,
        "upload_s": done["upload_s"],
        "cut_points": [{"after": after, "of": length} for after, length in plan.cut_at],
    }


def measure_memory(
    root: Path, server: UploadServer, token: str, file: Path, sha256: str
) -> dict[str, Any]:
    _, done, growth = upload(root, server, token, file,
                             sampler_pids={"server": server.pid})  # fmt: skip
    with RssSampler({"server": server.pid}) as sampler:
        sampler.mark()
        put_file(server.base_url, file, "memory", sha256)
    put_growth = sampler.growth_mib()
    return {
        "size_mib": round(file.stat().st_size / MIB, 1),
        "device_growth_mib": growth["device"],
        "server_growth_mib": growth["server"],
        "server_growth_during_put_mib": put_growth["server"],
        "target_mib": RSS_TARGET_MIB,
        "met": growth["device"] <= RSS_TARGET_MIB and growth["server"] <= RSS_TARGET_MIB,
        # The device holds at most one chunk: it streams each from the file.
        "largest_chunk_mib": round(max(chunk["bytes"] for chunk in done["chunks"]) / MIB, 1),
        "upload_s": done["upload_s"],
    }


def measure_chunk_limits(
    root: Path, server: UploadServer, token: str, file: Path, sha256: str,
    limits_mib: tuple[int, ...],
) -> list[dict[str, Any]]:  # fmt: skip
    """One upload per largest chunk, each right after a PUT of its own (the ratio is of the
    pair: a moment of load slows both)."""
    size = file.stat().st_size
    rows = []
    for limit in limits_mib:
        put_s = put_file(server.base_url, file, f"limit-{limit}", sha256)
        _, done, _ = upload(root, server, token, file, "--chunk-max", str(limit * MIB))
        rows.append(
            {
                "chunk_max_mib": limit,
                "chunks": len(done["chunks"]),
                "device_s": done["upload_s"],
                "put_s": round(put_s, 3),
                "device_mib_per_s": round(size / MIB / done["upload_s"], 1),
                "ratio": round(put_s / done["upload_s"], 3),
            }
        )
    return rows


def measure_edit_behind(
    root: Path, server: UploadServer, token: str, file: Path, sha256: str, seed: int,
    window_s: float, *, via: str | None = None, limit_s: float | None = None,
) -> dict[str, Any]:  # fmt: skip
    """Edits queued at seeded moments within ``window_s`` of the upload's creation; with
    ``limit_s``, the target is each delivered within it, else within one chunk's time."""
    _, done, _ = upload(root, server, token, file, "--edits", str(EDITS),
                        "--edit-window", str(window_s), "--seed", str(seed),
                        url=via)  # fmt: skip
    behind = [edit["s"] for edit in done["edits_behind"]]
    if not behind:
        raise RuntimeError("the upload ended before any edit was queued behind it")
    alone = median(done["edits_alone_s"])
    chunk_s = median([chunk["s"] for chunk in done["chunks"]])
    delays = [s - alone for s in behind]
    met = max(behind) <= limit_s if limit_s is not None else max(delays) <= chunk_s
    return {
        "size_mib": round(file.stat().st_size / MIB, 1),
        "edits_behind": len(behind),
        "edits_mid_chunk": sum(edit["mid_chunk"] for edit in done["edits_behind"]),
        "edit_behind_s_median": round(median(behind), 4),
        "edit_behind_s_max": round(max(behind), 4),
        "edit_alone_s_median": round(alone, 4),
        "delay_s_median": round(median(delays), 4),
        "delay_s_max": round(max(delays), 4),
        "chunk_s_median": round(chunk_s, 4),
        "chunk_mib_median": round(median([c["bytes"] for c in done["chunks"]]) / MIB, 2),
        "delay_max_in_chunks": round(max(delays) / chunk_s, 2),
        "target_s": limit_s,
        "met": met,
        "upload_s": done["upload_s"],
        "upload_done_before_an_edit": any(
            edit["upload_done_first"] for edit in done["edits_behind"]
        ),
    }


def measure_shaped(
    root: Path, server: UploadServer, token: str, files: dict[str, tuple[Path, str]],
    plan: Plan, seed: int, say: Any,
) -> dict[str, Any]:  # fmt: skip
    """Throughput and an edit behind an upload, through the shaped link."""
    link = ShapedLink(("127.0.0.1", server.port), rate_bits=SHAPED_RATE_BITS, rtt_s=SHAPED_RTT_S)
    with link:
        file, sha256 = files["shaped"]
        runs, size_mib = plan.shaped_runs, plan.shaped_size // MIB
        say(f"shaped link: {runs} runs of {size_mib} MiB, device and PUT")
        throughput = measure_throughput(root, server, token, file, sha256, runs,
                                        via=link.base_url, target=SHAPED_TARGET)  # fmt: skip
        file, sha256 = files["shaped_edit"]
        wire_s = file.stat().st_size * 8 / SHAPED_RATE_BITS
        say(f"shaped link: {EDITS} edits during a {plan.shaped_edit_size // MIB} MiB upload")
        edit = measure_edit_behind(root, server, token, file, sha256, seed, wire_s,
                                   via=link.base_url, limit_s=EDIT_SHAPED_TARGET_S)  # fmt: skip
    return {
        "rate_mbit_per_s": SHAPED_RATE_BITS / 1e6,
        "rtt_ms": SHAPED_RTT_S * 1000,
        "link_mib_per_s": round(SHAPED_RATE_BITS / 8 / MIB, 3),
        "throughput": throughput,
        "edit_behind_upload": edit,
    }


def run(plan: Plan, seed: int, say: Any) -> dict[str, Any]:
    results: dict[str, Any] = {}
    with temp_dir() as root:
        files: dict[str, tuple[Path, str]] = {}
        sizes = {"main": plan.size, "big": plan.rss_size, "shaped": plan.shaped_size,
                 "shaped_edit": plan.shaped_edit_size}  # fmt: skip
        for index, (name, size) in enumerate(sizes.items()):
            path = root / f"payload-{name}.bin"
            files[name] = (path, make_payload(path, size, seed + index))
        file, sha256 = files["main"]
        (root / "server").mkdir()
        server = UploadServer(root / "server", max_upload=plan.rss_size + MIB)
        with server:
            token = server.add_device("bench-phone")
            say(f"throughput: {plan.runs} runs of {plan.size // MIB} MiB, device and PUT")
            throughput = measure_throughput(root, server, token, file, sha256, plan.runs)
            results["throughput"] = throughput
            say(f"chunk sizes: one upload of {plan.size // MIB} MiB at each largest chunk")
            results["chunk_limits"] = measure_chunk_limits(
                root, server, token, file, sha256, plan.chunk_limits_mib
            )
            say(f"cuts: {CUTS} cuts while uploading {plan.size // MIB} MiB through the proxy")
            results["cuts"] = measure_cuts(root, server, token, file, sha256, seed)
            say(f"memory: {plan.rss_size // MIB} MiB, device and server RSS sampled")
            results["memory"] = measure_memory(root, server, token, *files["big"])
            say(f"edit behind an upload: {EDITS} edits during a {plan.size // MIB} MiB upload")
            results["edit_behind_upload"] = measure_edit_behind(
                root, server, token, file, sha256, seed, throughput["chunks_s_median"]
            )
            results["shaped"] = measure_shaped(root, server, token, files, plan, seed, say)
    return results


def print_table(results: dict[str, Any]) -> None:
    meta = results["metadata"]
    t, c, m, e = (results[k] for k in ("throughput", "cuts", "memory", "edit_behind_upload"))
    load = meta["load_average_1m"]
    print(f"\n{meta['mode']} run; load average (1 min) {load['start']:.2f} -> {load['end']:.2f}")
    rows = [
        (f"device upload, {t['size_mib']} MiB (median of {meta['runs']})",
         f"{t['device_mib_per_s']} MiB/s", f"{t['device_s_median']} s"),
        ("plain PUT to the same process", f"{t['put_mib_per_s']} MiB/s", f"{t['put_s_median']} s"),
        ("device / PUT", f"{t['ratio']:.0%}", f">= 80 %: {'met' if t['met'] else 'MISSED'}"),
        ("  the chunks alone (from the upload's POST)", f"{t['chunks_ratio']:.0%}",
         f"{t['chunks_s_median']} s"),
        ("  CPU s: device + server (PUT: client + server)",
         f"{t['cpu_s_median']['device']} + {t['cpu_s_median']['server']}",
         f"({t['cpu_s_median']['put_client']} + {t['cpu_s_median']['put_server']})"),
        (f"bytes re-sent after {c['cuts']} cuts", f"{c['bytes_resent']:,}",
         f"{c['bytes_resent_per_cut']:,} per cut; chunk {c['largest_chunk_bytes']:,}"),
        (f"device RSS growth, {m['size_mib']} MiB", f"{m['device_growth_mib']} MiB",
         f"<= 32 MiB: {'met' if m['device_growth_mib'] <= 32 else 'MISSED'}"),
        ("server RSS growth (PUT to the sink)", f"{m['server_growth_mib']} MiB",
         f"({m['server_growth_during_put_mib']} MiB)"),
        ("edit behind an upload, median / max", f"{e['edit_behind_s_median']} / "
         f"{e['edit_behind_s_max']} s", f"alone {e['edit_alone_s_median']} s"),
        ("delay the upload added, max", f"{e['delay_s_max']} s",
         f"one chunk {e['chunk_s_median']} s: {'met' if e['met'] else 'MISSED'}"),
    ]  # fmt: skip
    rows += [
        (f"  largest chunk {row['chunk_max_mib']} MiB ({row['chunks']} chunks)",
         f"{row['device_mib_per_s']} MiB/s", f"{row['ratio']:.0%} of the PUT")
        for row in results["chunk_limits"]
    ]  # fmt: skip
    shaped = results["shaped"]
    st, se = shaped["throughput"], shaped["edit_behind_upload"]
    link = f"{shaped['rate_mbit_per_s']:g} Mbit/s, {shaped['rtt_ms']:g} ms"
    rows += [
        (f"shaped link ({link}): device, {st['size_mib']} MiB", f"{st['device_mib_per_s']} MiB/s",
         f"{st['device_s_median']} s"),
        ("  plain PUT through the same link", f"{st['put_mib_per_s']} MiB/s",
         f"{st['put_s_median']} s"),
        ("  device / PUT", f"{st['ratio']:.0%}", f">= 95 %: {'met' if st['met'] else 'MISSED'}"),
        (f"  edit behind a {se['size_mib']} MiB upload, median / max",
         f"{se['edit_behind_s_median']} / {se['edit_behind_s_max']} s",
         f"alone {se['edit_alone_s_median']} s; <= 1 s: {'met' if se['met'] else 'MISSED'}"),
    ]  # fmt: skip
    for label, figure, note in rows:
        print(f"{label:44}{figure:>22}  {note}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 MiB files, a minute or two")
    parser.add_argument("--smoke", action="store_true", help=SMOKE_HELP)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=20261201)
    add_json_option(parser, "upload_bench")
    args = parser.parse_args(argv)
    mode = run_mode(args)
    plan = {"smoke": SMOKE, "quick": QUICK, "full": FULL}[mode]
    if args.runs:
        plan = dataclasses.replace(plan, runs=args.runs)
    window = RunWindow()
    results = run(plan, args.seed, lambda line: print(line, file=sys.stderr, flush=True))
    results["metadata"] = {
        "mode": mode,
        "quick": mode != "full",
        "runs": plan.runs,
        "statistic": "median",
        "seed": args.seed,
        "server": "benchmarks/upload_server.py (the app + a bare PUT sink), SQLite, loopback",
        "shaped_link": "benchmarks/link_proxy.py: 20 Mbit/s each way, 50 ms round trips",
        **window.metadata(),
    }
    publish("upload_bench", results, print_table, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
