"""Simulated devices for the reconnect storm: the app's protocol without its store, by the hundred.

    python benchmarks/storm_device.py --devices devices.json --server URL --edits 20 --window 10

A `StormDevice` speaks to the server exactly as `app.sync.engine.SyncEngine` does, through the
app's own parts, so that 1,000 of them fit on a shared 2-core machine (a real engine per
device is a SQLite store and a thread each):

- requests are built and sent by `app.sync.transport.ServerClient` (the same headers, batch
  body, `Retry-After` parsing and error translation); edits are checked and filled in by
  `app.mutations.validate_mutation` and sent in the body `app.sync.delivery.build_mutation`
  makes, with idempotency keys from `app.store.jobs.new_idempotency_key`, fixed when the edit
  is made offline and never changed across retries;
- edits go as the pipeline sends them: one batch of what is ready (at most
  `SyncConfig.batch_size`), an update chained behind its work order's create (its base version
  the create's answer), one request per batch (a lone edit on the single endpoint);
- replies are classified by `app.sync.errors` (`classify_reply`, `read_error`, `saturated`); a
  transient one waits `app.store.backoff.backoff_delay` with the app's `QueueConfig` and is
  dead after its `max_attempts`; a saturated server's `Retry-After` holds every request and is
  waited exactly, not counted as an attempt (`JobQueue.refused`); a busy feed waits as
  `app.sync.puller` does;
- it names its install (`Fieldsync-Install`) on its writes and pulls, as the engine does;
- after its edits it pulls as `app.sync.reconcile` does: `GET /v1/me`, then the feed in pages
  of `SyncConfig.pull_page_size` with the device report (`app.sync.device_report`) on the first;
- it comes back as the engine does after an outage: its `/healthz` probe answers, then it waits
  the reconnect jitter (`SyncConfig.reconnect_jitter_s`).

tests/benchmarks/test_storm_device.py checks that a `StormDevice` sends what a real engine
sends for the same edits. Every request's send and answer times are kept (`Exchange`), so the
bench can check that no request left before a `Retry-After` had passed.

The child process reads `[{"name", "token", "user", "team"}]`, makes each device's offline
edits, prints `{"event": "ready"}`, waits for a line `go <epoch seconds>` on stdin, and brings
each device back at that instant plus a uniform share of `--window`; it prints
`{"event": "done", "devices": [...]}` with wall-clock (`time.time()`) stamps.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_device import run_child, say  # noqa: E402

from app.mutations import validate_mutation  # noqa: E402
from app.states import ReplyKind  # noqa: E402
from app.store.backoff import backoff_delay  # noqa: E402
from app.store.jobs import QueueConfig, new_idempotency_key  # noqa: E402
from app.sync.config import SyncConfig  # noqa: E402
from app.sync.device_report import app_version, encode_report  # noqa: E402
from app.sync.errors import (  # noqa: E402
    ServerBusyError,
    ServerSaturatedError,
    SyncError,
    TransientError,
    classify_reply,
    read_error,
    saturated,
)
from app.sync.transport import BatchItem, Reply, ServerClient  # noqa: E402

__all__ = ["Edit", "Exchange", "StormDevice", "offline_edits"]


@dataclass
class Edit:
    """One queued edit, as a job of the device's queue holds it."""

    entity_id: str
    op: str
    fields: dict[str, Any]
    idempotency_key: str = field(default_factory=new_idempotency_key)
    correlation_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    base_version: int | None = None
    after: Edit | None = None  # the edit of the same work order before it (chained)
    attempts: int = 0
    next_at: float = 0.0  # monotonic
    outcome: str | None = None  # "done", "dead: …"
    version: int | None = None

    def ready(self, now: float) -> bool:
        waiting = self.after is not None and self.after.outcome != "done"
        return self.outcome is None and not waiting and self.next_at <= now

    def mutation(self) -> dict[str, Any]:
        """The request body, as `app.sync.delivery.build_mutation` makes it."""
        return {
            "entity_id": self.entity_id,
            "op": self.op,
            "base_version": None if self.op == "create" else self.base_version,
            "fields": self.fields,
        }


def offline_edits(user: str, team: str, count: int, rng: random.Random) -> list[Edit]:
    """`count` edits made offline: creates of work orders in the device's scope and, for each
    of the first half, an update made on top of it (checked as the store checks them)."""
    creates = count - count // 2
    edits: list[Edit] = []
    for number in range(creates):
        fields = {"title": f"{user} job {number}", "site": f"Depot {rng.randint(1, 40)}",
                  "notes": "Leaks at 3 bar.", "assignee": user, "team": team}  # fmt: skip
        checked = validate_mutation("create", str(uuid.uuid4()), fields)
        assert checked.entity_id is not None
        edits.append(Edit(checked.entity_id, "create", checked.fields))
    for create in edits[: count // 2]:
        patch = validate_mutation("update", create.entity_id, {"notes": "Seal replaced."})
        edits.append(Edit(create.entity_id, "update", patch.fields, after=create))
    return edits


@dataclass(frozen=True)
class Exchange:
    """One request as the device saw it: when it left and when its answer came (monotonic)."""

    method: str
    path: str
    sent: float
    answered: float
    status: int  # 0: no answer (network error)
    retry_after: float | None
    saturated: bool


class Recorder(httpx.AsyncBaseTransport):
    """The device's real transport, noting every exchange."""

    def __init__(self, max_connections: int) -> None:
        limits = httpx.Limits(max_connections=max_connections,
                              max_keepalive_connections=max_connections)  # fmt: skip
        # Plain HTTP on loopback: no TLS context, whose CA bundle would cost each of the
        # thousand devices a few MiB and milliseconds of CPU for nothing.
        self.inner = httpx.AsyncHTTPTransport(limits=limits, verify=False)
        self.exchanges: list[Exchange] = []
        self.failures: Counter[str] = Counter()  # requests without an answer, by why

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        sent = time.monotonic()
        try:
            response = await self.inner.handle_async_request(request)
            content = await response.aread()
        except httpx.HTTPError as error:
            self.failures[type(error).__name__] += 1
            self.exchanges.append(Exchange(request.method, request.url.path, sent,
                                           time.monotonic(), 0, None, False))  # fmt: skip
            raise
        error = None
        if response.status_code == 429 and content.startswith(b"{"):
            error = json.loads(content).get("error")
        after = response.headers.get("retry-after")
        self.exchanges.append(
            Exchange(request.method, request.url.path, sent, time.monotonic(),
                     response.status_code, float(after) if after else None,
                     saturated(response.status_code, error))
        )  # fmt: skip
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class StormDevice:
    """One device back from an outage: probe, jitter, deliver its edits, pull, idle."""

    def __init__(
        self,
        name: str,
        token: str,
        edits: list[Edit],
        config: SyncConfig,
        rng: random.Random,
        queue: QueueConfig | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.name = name
        self.edits = edits
        self.config = config
        self.rng = rng
        self.queue = queue or QueueConfig()
        self.recorder = Recorder(config.transport.max_connections)
        self.client = ServerClient(config.server_url, lambda: token, config.transport,
                                   transport=transport or self.recorder)  # fmt: skip
        # Its store's own id, as `app.store.settings.install_id` makes it (the feed leaves out
        # what this install wrote itself: server/scope/echoes.py).
        self.client.install = uuid.uuid4().hex
        self.since: str | None = None
        self.busy_until = float("-inf")  # a saturated server's Retry-After (monotonic)
        self.pull_refused = 0
        self.pull_not_before = float("-inf")
        self.identity_known = False
        self.changes_received = 0
        self.pages = 0

    async def run(self, jitter: bool = True) -> None:
        """From the moment the link is back until nothing is left to do."""
        await self._probe()
        if jitter and self.config.reconnect_jitter_s > 0:
            await asyncio.sleep(self.rng.uniform(0, self.config.reconnect_jitter_s))
        pulled = False
        while True:
            await self._hold()
            now = time.monotonic()
            ready = [edit for edit in self.edits if edit.ready(now)]
            if ready:
                await self._deliver(ready[: self.config.batch_size])
                continue
            if not pulled and now >= self.pull_not_before:
                pulled = await self._pull()
                continue
            waiting = [e.next_at for e in self.edits if e.outcome is None and e.next_at > now]
            if not waiting and pulled:
                return
            wake = min([*waiting, *([] if pulled else [self.pull_not_before])])
            await asyncio.sleep(max(wake - now, 0.0))

    async def aclose(self) -> None:
        await self.client.aclose()

    async def _probe(self) -> None:
        """The engine's offline probe: `/healthz` until the server answers (1 s apart)."""
        while True:
            try:
                if await self.client.healthz():
                    return
            except TransientError:
                pass
            await asyncio.sleep(1.0)

    async def _hold(self) -> None:
        wait = self.busy_until - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)

    def _busy(self, retry_after: float | None) -> None:
        if retry_after is not None and retry_after > 0:
            self.busy_until = max(self.busy_until, time.monotonic() + retry_after)

    async def _deliver(self, batch: list[Edit]) -> None:
        for edit in batch:
            edit.attempts += 1  # a claim counts the attempt
        replies: list[Reply | TransientError]
        try:
            if len(batch) == 1:
                edit = batch[0]
                replies = [await self.client.send_mutation(
                    edit.idempotency_key, edit.mutation(), edit.correlation_id)]  # fmt: skip
            else:
                items = [BatchItem(e.idempotency_key, e.mutation(), e.correlation_id)
                         for e in batch]  # fmt: skip
                whole, per_item = await self.client.send_batch(items, str(uuid.uuid4()))
                replies = list(per_item) if per_item else [whole] * len(batch)
        except TransientError as error:
            replies = [error] * len(batch)
        for edit, reply in zip(batch, replies, strict=True):
            self._settle(edit, reply)

    def _settle(self, edit: Edit, reply: Reply | TransientError) -> None:
        if isinstance(reply, TransientError):
            self._retry(edit, reply.retry_after, str(reply))
            return
        if saturated(reply.status, reply.error):
            self._busy(reply.retry_after)
        verdict = classify_reply(reply.status, reply.error, reply.raw_error)
        record = (reply.body or {}).get("record")
        if verdict.kind is ReplyKind.SUCCESS and isinstance(record, dict):
            edit.outcome, edit.version = "done", int(record["version"])
            for later in self.edits:
                if later.after is edit:
                    later.base_version = edit.version  # the chained job is rebased
        elif verdict.kind is ReplyKind.TRANSIENT and saturated(reply.status, reply.error):
            # `JobQueue.refused`: exactly the Retry-After, the claim not counted.
            edit.attempts -= 1
            wait = min(reply.retry_after or 0.0, self.queue.backoff.cap)
            edit.next_at = time.monotonic() + wait
        elif verdict.kind is ReplyKind.TRANSIENT:
            self._retry(edit, reply.retry_after, verdict.reason)
        else:
            edit.outcome = f"dead: {reply.status} {reply.error or verdict.reason}"

    def _retry(self, edit: Edit, retry_after: float | None, why: str) -> None:
        if edit.attempts >= self.queue.max_attempts:
            edit.outcome = f"dead: gave up after {edit.attempts} attempts: {why}"
            return
        delay = backoff_delay(edit.attempts, self.queue.backoff, self.rng, retry_after=retry_after)
        edit.next_at = time.monotonic() + delay

    async def _pull(self) -> bool:
        """Who am I, then every page of the feed; False when the server asked to wait."""
        try:
            if not self.identity_known:
                reply = await self.client.me()
                if saturated(reply.status, reply.error):
                    raise ServerSaturatedError("who am I: busy", retry_after=reply.retry_after)
                self.identity_known = True
            status: str | None = encode_report(self._report())
            while True:
                reply = await self.client.changes(self.since, self.config.pull_page_size, status)
                status = None
                problem = read_error(reply.status, reply.error, reply.retry_after,
                                     "changes feed", reply.raw_error)  # fmt: skip
                if problem is not None:
                    raise problem
                body = reply.body or {}
                self.changes_received += len(body.get("changes", []))
                self.pages += 1
                self.since = str(body["next"])
                if not body.get("has_more"):
                    self.pull_refused = 0
                    return True
        except ServerBusyError as busy:
            if isinstance(busy, ServerSaturatedError) and busy.retry_after is not None:
                self._busy(busy.retry_after)  # `app.sync.puller`: exactly as asked
                delay = min(busy.retry_after, self.queue.backoff.cap)
            else:
                self.pull_refused += 1
                delay = backoff_delay(self.pull_refused, self.queue.backoff, self.rng,
                                      retry_after=busy.retry_after)  # fmt: skip
            self.pull_not_before = time.monotonic() + delay
            return False
        except SyncError:
            self.pull_refused += 1
            self.pull_not_before = time.monotonic() + 1.0
            return False

    def _report(self) -> dict[str, Any]:
        """The device report of `app.sync.device_report`, from what this device holds."""
        waiting = [edit for edit in self.edits if edit.outcome is None]
        dead = [edit for edit in self.edits if (edit.outcome or "").startswith("dead")]
        return {"app_version": app_version(), "edits_waiting": len(waiting),
                "oldest_edit_age_s": None, "failed_changes": len(dead),
                "uploads_waiting": 0, "failed": []}  # fmt: skip


def honour_violations(exchanges: list[Exchange]) -> int:
    """Requests that left before a saturated server's Retry-After had passed."""
    violations = 0
    not_before = float("-inf")
    for exchange in sorted(exchanges, key=lambda e: e.sent):
        if exchange.sent < not_before - 1e-3:
            violations += 1
        if exchange.saturated and exchange.retry_after:
            not_before = max(not_before, exchange.answered + exchange.retry_after)
    return violations


async def bring_back(device: StormDevice, at_wall: float) -> dict[str, Any]:
    await asyncio.sleep(max(at_wall - time.time(), 0.0))
    returned = time.time()
    offset = returned - time.monotonic()  # monotonic stamps to wall clock
    try:
        await device.run()
    finally:
        await device.aclose()
    exchanges = device.recorder.exchanges
    statuses = Counter(str(e.status) if e.status else "no_answer" for e in exchanges)
    delivered = [e.answered for e in exchanges if e.path.startswith("/v1/mutations")
                 and e.status in (200, 201)]  # fmt: skip
    return {
        "name": device.name,
        "returned": returned,
        "idle": time.time(),
        "last_ack": offset + max(delivered) if delivered else None,
        "requests": len(exchanges),
        "statuses": dict(statuses),
        "no_answer": dict(device.recorder.failures),
        "saturated": sum(1 for e in exchanges if e.saturated),
        "retry_after_s": sum(e.retry_after or 0 for e in exchanges if e.saturated),
        "violations": honour_violations(exchanges),
        "done": sum(1 for e in device.edits if e.outcome == "done"),
        "dead": [e.outcome for e in device.edits if (e.outcome or "").startswith("dead")],
        "attempts": sum(e.attempts for e in device.edits),
        "changes": device.changes_received,
        "pages": device.pages,
    }


async def main_async(args: argparse.Namespace, devices: list[dict[str, str]]) -> int:
    rng = random.Random(args.seed)
    config = SyncConfig(server_url=args.server)
    fleet = [
        StormDevice(d["name"], d["token"], offline_edits(d["user"], d["team"], args.edits, rng),
                    config, random.Random(rng.random()))
        for d in devices
    ]  # fmt: skip
    say("ready", devices=len(fleet))
    line = await asyncio.to_thread(sys.stdin.readline)
    start = float(line.split()[1])
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(bring_back(device, start + rng.uniform(0, args.window)))
                 for device in fleet]  # fmt: skip
    say("done", devices=[task.result() for task in tasks])
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", required=True, type=Path)
    parser.add_argument("--server", required=True)
    parser.add_argument("--edits", type=int, required=True)
    parser.add_argument("--window", type=float, required=True, help="seconds they come back in")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    devices: list[dict[str, str]] = json.loads(args.devices.read_text())
    return run_child(lambda: main_async(args, devices))


if __name__ == "__main__":
    sys.exit(main())
