"""The uploader: attachments to the server by tus, one step per claim of the queue.

An upload is a job of topic ``attachments`` in the same queue as edits (`JobQueue` writes
it). A step sends at most one chunk: create the upload (``POST``, keyed by the attachment id),
or, when this process has not checked it yet, ask the server's offset (``HEAD``), then send
one chunk from there (``PATCH`` with its sha256, but the last: the whole file's covers it).
The URL and offset are stored with the job's return to the queue, so a cut link, a restart or
a SIGKILL resumes from what the server holds, re-sending at most one chunk. A removal is a
job of the same attachment, after its upload.

Inside the engine (`SyncEngine.uploader`) the uploader has a connection pool of its own
(`ServerClient.bulk`): the engine claims a step (`claim`) and runs it (`advance`) beside its
loop, so edits and pulls go on their own connection while a chunk is on the wire, and the
next chunk starts only once the loop has sent what was queued meanwhile. Chunks grow while no
edit waits and keep small while edits flow (``edits_waiting``, `app.sync.chunks`).
Standalone, for a benchmark::

    uploader = Uploader.standalone(store, SyncConfig(url), token=lambda: token)
    while await uploader.step(): ...
    await uploader.aclose()
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from pathlib import Path

import httpx

from app.attachments.files import AttachmentFiles
from app.attachments.model import AttachmentConfig
from app.attachments.retention import Retention
from app.attachments.thumbnails import Thumbnails
from app.attachments.uploads import UploadLedger, UploadRow
from app.events import EventBus, UploadProgress
from app.executor import StoreExecutor
from app.metrics import EngineMetrics
from app.states import AttachmentState, JobStatus, Reason, ReplyKind
from app.store.jobs import TOPIC_ATTACHMENTS, ClaimedJob, Outcome, Stale
from app.store.store import Store
from app.sync.chunks import ChunkSizer
from app.sync.config import SyncConfig
from app.sync.connectivity import ConnectivityDetector
from app.sync.context import EngineContext, EnginePart
from app.sync.errors import AuthError, TransientError, classify_failure, declined, saturated
from app.sync.status import SyncStatus
from app.sync.transport import ServerClient
from app.sync.tus import (
    CHECKSUM_MISMATCH,
    Next,
    Step,
    TusReply,
    classify,
    create_upload,
    delete_upload,
    file_sha256,
    head_offset,
    patch_chunk,
)
from app.sync.upload_hashing import ChecksumAhead

__all__ = ["Uploader"]

log = logging.getLogger(__name__)

#: 409s in a row on one upload before it backs off instead of asking HEAD again at once.
_MAX_REHEADS = 3

#: A claimed step: the job and its upload's row (None: the attachment is gone).
Claimed = tuple[ClaimedJob, UploadRow | None]


class Uploader(EnginePart):
    def __init__(
        self,
        context: EngineContext,
        client: ServerClient,
        status: SyncStatus,
        *,
        worker_id: str,
        attachment_config: AttachmentConfig | None = None,
        reads: ServerClient | None = None,
        edits_waiting: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(context)
        #: tus requests; thumbnails go on ``reads`` (the engine's pool for edits and pulls).
        self.client = client
        self.reads = reads or client
        self.edits_waiting = edits_waiting
        self.status = status
        self.worker_id = worker_id
        self.files = AttachmentFiles(self.store.data_dir)
        self.ledger = UploadLedger(self.store, self.files)
        self.retention = Retention(self.store, self.files, attachment_config or AttachmentConfig())
        self.thumbnails = Thumbnails(self.store, self.files, self.retention)
        config = self.config()
        self.chunks = ChunkSizer(
            config.upload_chunk_bytes,
            config.upload_chunk_max_bytes,
            target_s=config.upload_chunk_target_s,
            busy_high=config.upload_chunk_busy_bytes,
        )
        self.checksums = ChecksumAhead()
        #: Uploads whose offset this process has from the server itself (HEAD or a reply).
        self._known: set[str] = set()
        self._reheads: dict[str, int] = {}
        self.in_flight: ClaimedJob | None = None
        #: Bytes sent in PATCH bodies since this uploader started (what a benchmark reads).
        self.bytes_sent = 0
        self._owns_executor = False

    @classmethod
    def standalone(
        cls,
        store: Store,
        config: SyncConfig,
        *,
        token: Callable[[], str],
        transport: httpx.AsyncBaseTransport | None = None,
        events: EventBus | None = None,
    ) -> Uploader:
        """An uploader without an engine (benchmarks): its own executor, client, status."""
        context = EngineContext(store, lambda: config, StoreExecutor(), events or EventBus(), time)
        client = ServerClient(config.server_url, token, config.transport, transport=transport)
        detector = ConnectivityDetector(config.connectivity, random.Random())
        status = SyncStatus(
            context, detector, server_url=config.server_url, metrics=EngineMetrics()
        )
        uploader = cls(context, client, status, worker_id=f"uploader-{id(context):x}")
        uploader._owns_executor = True
        return uploader

    async def aclose(self) -> None:
        """Close a standalone uploader's client and store thread (the engine closes its own)."""
        await self.client.aclose()
        if self._owns_executor:
            await self.executor.run(self.store.db.close)
            self.executor.shutdown()

    # -- a step ------------------------------------------------------------------------------

    async def step(self) -> bool:
        """Claim one upload or removal and do one step of it (False: none was ready)."""
        claimed = await self.claim()
        if claimed is None:
            return False
        await self.advance(claimed)
        return True

    async def claim(self) -> Claimed | None:
        """Lease the next ready upload or removal (None: none is ready)."""
        claimed = await self.executor.run(self._claim)
        if claimed is not None:
            self.in_flight = claimed[0]
        return claimed

    async def advance(self, claimed: Claimed) -> None:
        """One step of a claimed upload or removal; its outcome is in the queue after."""
        job, row = claimed
        # Cancelled (a stop past its grace), the lease stays in ``in_flight``: the engine's
        # `release_in_flight` gives it back.
        try:
            await self._step(job, row)
        except AuthError:
            self.in_flight = None
            await self.executor.run(self.store.queue.release, [job])
            raise
        except TransientError as exc:
            self.chunks.failed()
            self._known.discard(str(job.payload["attachment_id"]))
            verdict = Step.retry(str(exc), _code_of(exc))
            await self._retry(job, verdict, exc.retry_after)
            self.status.network_failure(str(exc))
        self.in_flight = None
        # The job moved (uploaded, failed, retrying): the status bar's counts are told when
        # the engine next goes idle, as after a flush.
        self.status.queue_dirty = True

    async def thumbnail(self, attachment_id: str) -> Path | None:
        """A small JPEG of an attachment for the screen: cached, else fetched from the server
        (``GET /v1/attachments/{id}/thumbnail``) and cached under the budget. None when the
        server has none (not an image) or cannot be reached now."""
        cached = await self.executor.run(self.thumbnails.cached, attachment_id)
        if cached is not None:
            return cached
        try:
            reply = await self.reads.send("GET", f"/v1/attachments/{attachment_id}/thumbnail")
        except TransientError as exc:
            log.info("no thumbnail of %s now: %s", attachment_id, exc)
            return None
        if reply.status_code != 200 or not reply.content:
            return None
        return await self.executor.run(self.thumbnails.keep, attachment_id, reply.content)

    def sweep(self) -> int:
        """Blocking (the engine's sweeps): files past retention and orphans go."""
        return self.retention.sweep()

    async def release_in_flight(self) -> None:
        if self.in_flight is not None:
            job, self.in_flight = self.in_flight, None
            await self.executor.run(self.store.queue.release, [job])

    def _claim(self) -> Claimed | None:
        """Blocking: the next ready upload or removal and its row, in one store call."""
        jobs = self.store.queue.claim(self.worker_id, 1, TOPIC_ATTACHMENTS)
        if not jobs:
            return None
        return jobs[0], self.ledger.load(str(jobs[0].payload["attachment_id"]))

    async def _step(self, job: ClaimedJob, row: UploadRow | None) -> None:
        attachment_id = str(job.payload["attachment_id"])
        if job.payload.get("op") == "remove":
            await self._remove(job, attachment_id, row)
            return
        if row is None or row.removed or row.confirmed:
            await self.executor.run(self.ledger.finished, job)
            return
        if row.path is None or not row.path.exists():
            words = "the file is no longer on this device"
            await self._fail(job, row, Step.fail(words, Reason.FILE_MISSING))
            return
        if row.upload_url is None:
            await self._create(job, row)
            return
        offset = row.offset
        if attachment_id not in self._known:
            reply = await head_offset(self.client, row.upload_url)
            if not await self._usable(job, row, reply, "head"):
                return
            assert reply.offset is not None
            offset = reply.offset
            self._known.add(attachment_id)
            if offset >= row.size:
                await self._confirmed(job, row, reply.status)
                return
        await self._patch(job, row, row.upload_url, offset)

    async def _create(self, job: ClaimedJob, row: UploadRow) -> None:
        reply = await create_upload(
            self.client,
            attachment_id=row.id,
            entity_id=row.entity_id,
            filename=row.filename,
            content_type=row.content_type,
            size=row.size,
            sha256=row.sha256,
        )
        if reply.status == 404 and await self.executor.run(
            self.ledger.work_order_deleted, row.entity_id
        ):
            # The server has the work order deleted, as the person did here: not a failure.
            await self.executor.run(self.ledger.dropped, job, reply.status)
            return
        if not await self._usable(job, row, reply, "create"):
            return
        url = self.client.same_server(reply.location or "")
        if not reply.location or url is None:
            words = "the server did not say where to upload (or pointed to another host)"
            await self._fail(job, row, Step.fail(words, Reason.MALFORMED))
            return
        offset = reply.offset or 0
        if reply.offset is not None:
            self._known.add(row.id)  # the same attachment again: the server said its offset
        if offset >= row.size:
            await self._confirmed(job, row, reply.status)
            return
        await self.executor.run(self.ledger.moved, job, url, offset)
        self._progress(row, AttachmentState.UPLOADING, offset)

    async def _patch(self, job: ClaimedJob, row: UploadRow, url: str, offset: int) -> None:
        assert row.path is not None
        wanted = min(self.chunks.next(self.edits_waiting()), row.size - offset)
        # Never wait for a checksum: the chunk ends where the hashing ahead got.
        length, checksum = await self.checksums.next_chunk(row.path, offset, wanted, row.size)
        started = self.clock.monotonic()
        reply = await self.checksums.sending_chunk(
            patch_chunk(self.client, url, row.path, offset, length, checksum),
            row.path, offset, length, row.size, self.chunks,
        )  # fmt: skip
        self.bytes_sent += length
        if not await self._usable(job, row, reply, "patch", offset=offset, length=length):
            return
        self.chunks.sent(length, self.clock.monotonic() - started)
        self._reheads.pop(row.id, None)
        new_offset = reply.offset if reply.offset is not None else offset + length
        if new_offset >= row.size:
            await self._confirmed(job, row, reply.status)
            return
        await self.executor.run(self.ledger.moved, job, url, new_offset)
        self._progress(row, AttachmentState.UPLOADING, new_offset)

    async def _remove(self, job: ClaimedJob, attachment_id: str, row: UploadRow | None) -> None:
        if row is not None and row.upload_url is not None and not row.confirmed:
            reply = await delete_upload(self.client, row.upload_url)
            if not await self._settled(job, reply, "delete"):
                return
        reply_ = await self.client.send(
            "DELETE",
            f"/v1/attachments/{attachment_id}",
            headers={"Idempotency-Key": job.idempotency_key},
        )
        status = reply_.status_code
        if status in (200, 204, 404, 410):  # removed now, before, or never finished
            await self.executor.run(self.ledger.finished, job, status)
            return
        await self._settled(job, TusReply(status, None, None, None, None), "delete")

    async def _settled(self, job: ClaimedJob, reply: TusReply, step: str) -> bool:
        """For a removal: True when it may go on (done, or gone already)."""
        verdict = classify(reply.status, step, reply.error)
        if verdict.next in (Next.GO_ON, Next.RESTART):
            return True
        if verdict.next is Next.SIGN_IN:
            raise AuthError(verdict.reason)
        outcome = _outcome(verdict, reply.status)
        if verdict.next is Next.FAIL:
            await self.executor.run(self.ledger.failed, job, outcome)
        else:
            await self.executor.run(self._requeue, job, outcome, reply.retry_after)
        return False

    # -- replies -----------------------------------------------------------------------------

    async def _usable(
        self,
        job: ClaimedJob,
        row: UploadRow,
        reply: TusReply,
        step: str,
        offset: int = 0,
        length: int = 0,
    ) -> bool:
        """True when the reply lets the step go on; otherwise its outcome is recorded."""
        verdict = classify(reply.status, step, reply.error)
        self.status.server_answered(mutations_ok=verdict.next is not Next.FAIL)
        if saturated(reply.status, reply.error):
            # Said of the whole server: edits and pulls wait as well (they go beside uploads).
            self.status.server_busy(reply.retry_after)
        if verdict.next is Next.GO_ON:
            if step == "head" and reply.offset is None:
                verdict = Step.retry("the server did not say its offset", Reason.MALFORMED)
            else:
                return True
        if verdict.next is Next.SIGN_IN:
            raise AuthError(verdict.reason)
        self._known.discard(row.id)
        if verdict.next is Next.HEAD:
            reheads = self._reheads.get(row.id, 0) + 1
            self._reheads[row.id] = reheads
            if reheads <= _MAX_REHEADS:
                # Our offset was stale (the reply of the last chunk was lost): resume from the
                # server's, said in the reply or asked by HEAD on the next claim.
                if reply.offset is not None and reply.offset >= row.size:
                    await self._confirmed(job, row, reply.status)
                    return False
                if reply.offset is not None:
                    offset = reply.offset
                    self._known.add(row.id)
                await self.executor.run(self.ledger.moved, job, row.upload_url, offset)
                return False
            verdict = Step.retry(verdict.reason, verdict.code)
        if reply.status == CHECKSUM_MISMATCH and offset + length >= row.size:
            # The last chunk: the server compared the whole file. Ours may be what changed.
            assert row.path is not None
            whole = await asyncio.to_thread(file_sha256, row.path)
            if whole != row.sha256:
                words = "the file on this device changed or is damaged since it was attached"
                verdict = Step.fail(words, Reason.FILE_MISSING)
        if verdict.next is Next.RESTART:
            await self.executor.run(self.ledger.noted, row.id, None, 0)
            verdict = Step.retry(verdict.reason, verdict.code)
        if verdict.next is Next.FAIL:
            await self._fail(job, row, verdict, reply.status)
        else:
            self.chunks.failed()
            await self._retry(job, verdict, reply.retry_after, reply.status)
        return False

    async def _confirmed(self, job: ClaimedJob, row: UploadRow, http_status: int) -> None:
        await self.executor.run(self.ledger.confirmed, job, http_status)
        self._known.discard(row.id)
        self._progress(row, AttachmentState.UPLOADED, row.size)

    async def _fail(
        self, job: ClaimedJob, row: UploadRow, verdict: Step, http_status: int | None = None
    ) -> None:
        await self.executor.run(self.ledger.failed, job, _outcome(verdict, http_status))
        self._progress(row, AttachmentState.FAILED, row.offset, verdict.reason)

    async def _retry(
        self,
        job: ClaimedJob,
        verdict: Step,
        retry_after: float | None,
        http_status: int | None = None,
    ) -> None:
        outcome = _outcome(verdict, http_status, ReplyKind.TRANSIENT)
        status = await self.executor.run(self._requeue, job, outcome, retry_after)
        if status == JobStatus.DEAD:
            row = await self.executor.run(self.ledger.load, str(job.payload["attachment_id"]))
            if row is not None:
                self._progress(row, AttachmentState.FAILED, row.offset, verdict.reason)

    def _requeue(
        self, job: ClaimedJob, outcome: Outcome, retry_after: float | None
    ) -> JobStatus | Stale:
        """Blocking: a transient failure back to the queue. An answer that declined the step
        for the server's load, with a Retry-After, waits it out and is not an attempt."""
        status = outcome.http_status
        if retry_after is not None and status is not None and declined(status):
            return self.ledger.refused(job, outcome, retry_after)
        return self.ledger.retry(job, outcome, retry_after)

    def _progress(
        self, row: UploadRow, state: AttachmentState, offset: int, reason: str | None = None
    ) -> None:
        self.events.publish(UploadProgress(row.id, row.entity_id, state, offset, row.size, reason))


def _outcome(verdict: Step, http_status: int | None, kind: ReplyKind | None = None) -> Outcome:
    if kind is None:
        kind = ReplyKind.PERMANENT if verdict.next is Next.FAIL else ReplyKind.TRANSIENT
    return Outcome(error=verdict.reason, http_status=http_status, kind=kind, code=verdict.code)


def _code_of(exc: TransientError) -> Reason:
    return classify_failure(exc).code
