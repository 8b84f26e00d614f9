"""Sync now: the people waiting for one, and the report that answers them.

A person (the status bar's button, `fieldsync sync`) asks; the engine's loop runs one pass,
flush, then pull, then revalidate, for everyone who asked before it began, and answers each
with the same report: what was sent and received, or why not. Asking during a pass waits for
the next one, so a report never covers less than what was asked. `report_in_words` says it the
same way in the app's toast and on the command line.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.sync.pipeline import DeliveryPipeline
    from app.sync.puller import Puller
    from app.sync.status import SyncStatus

__all__ = ["SyncProblem", "SyncReport", "SyncRequests", "report_in_words", "sync_pass"]


class SyncProblem(StrEnum):
    """Why "Sync now" did not get through."""

    OFFLINE = "offline"
    UNREACHABLE = "unreachable"
    SIGNED_OUT = "signed_out"
    PAUSED = "paused"
    #: The server answered but asked to wait (429/503, Retry-After) or sent an unusable reply.
    SERVER_BUSY = "server_busy"
    #: The device's storage refused (disk full, read-only): the queue is intact.
    STORAGE = "storage"
    #: The engine is not running (stopped, or standing by for another worker).
    STOPPED = "stopped"
    #: The system is suspending: no request starts until it wakes.
    ASLEEP = "asleep"


@dataclass
class SyncReport:
    """What one "Sync now" did. ``sent``: changes the server acknowledged; ``received``:
    records that changed on this device (the echo of its own edits is not counted);
    ``failed``/``conflicts``: changes refused for good or held for a person; ``problem`` is
    None when flush, pull and revalidation all went through, else ``detail`` says why."""

    sent: int = 0
    received: int = 0
    failed: int = 0
    conflicts: int = 0
    problem: SyncProblem | None = None
    detail: str = ""


#: Why a sync did not get through, in words.
_NOT_SYNCED = {
    SyncProblem.OFFLINE: "Not synced: this device is offline.",
    SyncProblem.UNREACHABLE: "Not synced: the server is unreachable.",
    SyncProblem.SIGNED_OUT: "Not synced: signed out. Sign in to sync.",
    SyncProblem.PAUSED: "Not synced: paused on a metered connection (see Settings).",
    SyncProblem.SERVER_BUSY: "Not synced: the server is busy. It will be tried again shortly.",
    SyncProblem.STORAGE: "Not synced: this device's storage is not usable right now.",
    SyncProblem.STOPPED: "Sync is not running in this window.",
    SyncProblem.ASLEEP: "Not synced: the device is going to sleep. It syncs when it wakes.",
}


def report_in_words(report: SyncReport) -> str:
    """What a sync did: "3 sent, 12 received" (", 1 failed, 2 in conflict"), or why not."""
    if report.problem:
        return _NOT_SYNCED.get(report.problem, f"Not synced: {report.problem}.")
    words = f"{report.sent:,} sent, {report.received:,} received"
    if report.failed:
        words += f", {report.failed:,} failed"
    if report.conflicts:
        words += f", {report.conflicts:,} in conflict"
    return words


class SyncRequests:
    def __init__(self) -> None:
        self._waiting: list[asyncio.Future[SyncReport]] = []
        self._running: tuple[list[asyncio.Future[SyncReport]], SyncReport] | None = None

    @property
    def waiting(self) -> bool:
        """Someone asked and no pass has begun for them yet."""
        return bool(self._waiting)

    async def ask(self) -> SyncReport:
        future: asyncio.Future[SyncReport] = asyncio.get_running_loop().create_future()
        self._waiting.append(future)
        return await future

    def begin(self) -> SyncReport:
        """A pass begins for everyone waiting; it fills in the report it returns."""
        report = SyncReport()
        self._running, self._waiting = (self._waiting, report), []
        return report

    def finish(self, problem: SyncProblem | None, detail: str = "") -> None:
        """End the running pass; with a problem and no pass, answer those waiting: what
        stopped it (offline, signed out...) stops them too."""
        answered: list[tuple[asyncio.Future[SyncReport], SyncReport]] = []
        if self._running is not None:
            futures, report = self._running
            self._running = None
            report.problem, report.detail = problem, detail if problem else ""
            answered += [(future, report) for future in futures]
        elif problem is not None:
            report = SyncReport(problem=problem, detail=detail)
            answered += [(future, report) for future in self._waiting]
            self._waiting = []
        for future, report in answered:
            if not future.done():  # a caller that gave up (cancelled) is not answered
                future.set_result(report)

    def finish_all(self, problem: SyncProblem, detail: str = "") -> None:
        """End the running pass and answer everyone waiting, all with ``problem``."""
        self.finish(problem, detail)  # the running pass
        self.finish(problem, detail)  # then, with no pass running, those waiting


async def sync_pass(
    requests: SyncRequests, pipeline: DeliveryPipeline, puller: Puller, status: SyncStatus
) -> None:
    """One pass for everyone who asked so far, on the engine's loop: flush until nothing is
    ready, pull, then read the records opened meanwhile. A sync error propagates to the
    loop's handlers, which end the pass with its problem."""
    report = requests.begin()
    while True:
        flush = await pipeline.flush(report)
        if flush.unreachable:
            requests.finish(SyncProblem.UNREACHABLE, status.last_error or "")
            return
        if status.auth_paused:
            return  # the loop's next turn ends it as signed out
        if not flush.handled:
            break
    if status.queue_dirty:
        await status.publish_queue(force=True)
    pulled = None if puller.waiting_for_server() else await puller.pull()
    if pulled is None:
        requests.finish(SyncProblem.SERVER_BUSY, status.last_error or "")
        return
    report.received += pulled.received
    if puller.opened_ids:
        read = await puller.read_opened()
        if read is None:
            requests.finish(SyncProblem.SERVER_BUSY, status.last_error or "")
            return
        report.received += read.received
    requests.finish(None)
