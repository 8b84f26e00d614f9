"""What the uploader reads and writes about one upload (blocking: on the store's executor).

Each write is one transaction with the job's outcome, so an upload's stored URL and offset
never disagree with its job: a chunk acknowledged by the server moves the offset and returns
the job to the queue together, and the last one confirms the attachment and finishes the job.
The queue (`JobQueue`) still writes every job row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from app.attachments import rows
from app.attachments.files import AttachmentFiles
from app.attachments.retention import forget_departed
from app.states import JobStatus
from app.store.db import WriteTransaction
from app.store.jobs import STALE, ClaimedJob, Outcome, Stale
from app.store.scope import remove_departed
from app.store.store import Store

__all__ = ["UploadLedger", "UploadRow"]


@dataclass(frozen=True)
class UploadRow:
    id: str
    entity_id: str
    filename: str
    content_type: str
    size: int
    sha256: str
    upload_url: str | None
    offset: int
    confirmed: bool
    removed: bool
    #: The bytes on this device (None: evicted or removed).
    path: Path | None


class UploadLedger:
    def __init__(self, store: Store, files: AttachmentFiles | None = None) -> None:
        self.store = store
        self.files = files or AttachmentFiles(store.data_dir)

    def load(self, attachment_id: str) -> UploadRow | None:
        row = self.store.read_one(
            "SELECT id, entity_id, filename, content_type, size, sha256, upload_url, "
            "upload_offset, confirmed_at IS NOT NULL, removed_at IS NOT NULL, stored "
            "FROM attachments WHERE id = ?",
            (attachment_id,),
        )
        if row is None:
            return None
        return UploadRow(
            id=row[0],
            entity_id=row[1],
            filename=row[2],
            content_type=row[3],
            size=int(row[4]),
            sha256=row[5],
            upload_url=row[6],
            offset=int(row[7]),
            confirmed=bool(row[8]),
            removed=bool(row[9]),
            path=self.files.path_for(row[5]) if row[10] else None,
        )

    def moved(self, job: ClaimedJob, url: str | None, offset: int) -> bool:
        """The server holds ``offset`` bytes at ``url`` (None: start again with a new
        upload); the job goes back to the queue for its next step. False: lease lost.

        Without an fsync (`JobQueue.unsynced`): a power cut that forgets it leaves an older
        offset (or no URL), and the uploader asks the server's offset (``HEAD``) after a
        restart, or finds the same upload again by its attachment id (``POST``)."""
        with self.store.queue.unsynced(), WriteTransaction(self.store.db, self.store.path) as conn:
            rows.set_upload(conn, str(job.payload["attachment_id"]), url, offset)
            return self.store.queue.progress(job)

    def noted(self, attachment_id: str, url: str | None, offset: int) -> None:
        """Keep what the server said about an upload that did not move on (a failure)."""
        with WriteTransaction(self.store.db, self.store.path) as conn:
            rows.set_upload(conn, attachment_id, url, offset)

    def confirmed(self, job: ClaimedJob, http_status: int | None) -> bool:
        """The server holds the whole file and it matched its sha256: uploaded."""
        now = self.store.clock()
        with WriteTransaction(self.store.db, self.store.path) as conn:
            rows.confirm(conn, str(job.payload["attachment_id"]), now)
            acked = self.store.queue.ack(job, Outcome(http_status=http_status))
            departed = remove_departed(conn)  # it left the scope and waited for this file
        if departed:
            forget_departed(self.store, self.files)
        return acked

    def finished(self, job: ClaimedJob, http_status: int | None = None) -> bool:
        """Nothing (more) to send: removed before it went, or the removal went through."""
        with WriteTransaction(self.store.db, self.store.path) as conn:
            acked = self.store.queue.ack(job, Outcome(http_status=http_status))
            departed = remove_departed(conn)
        if departed:
            forget_departed(self.store, self.files)
        return acked

    def work_order_deleted(self, entity_id: str) -> bool:
        """Whether the person deleted the work order on this device (or it is gone)."""
        row = self.store.cache.get(entity_id)
        return row is None or bool(row["deleted"])

    def dropped(self, job: ClaimedJob, http_status: int | None) -> bool:
        """Its work order was deleted before the file reached it (a work order never synced,
        deleted while its photo waited): there is nothing left to attach it to, so the upload
        is done, not failed, and the attachment is removed with its work order."""
        now = self.store.clock()
        with WriteTransaction(self.store.db, self.store.path) as conn:
            rows.removed_with_work_order(conn, str(job.payload["attachment_id"]), now)
            return self.store.queue.ack(job, Outcome(http_status=http_status))

    def failed(self, job: ClaimedJob, outcome: Outcome) -> JobStatus | Stale:
        """The server refused it for good: a person retries or removes it."""
        return self.store.queue.dead(job, outcome)

    def retry(
        self, job: ClaimedJob, outcome: Outcome, retry_after: float | None = None
    ) -> JobStatus | Stale:
        return self.store.queue.retry(job, outcome, retry_after=retry_after)

    def refused(self, job: ClaimedJob, outcome: Outcome, retry_after: float) -> JobStatus | Stale:
        """The server declined it unseen, for its load: pending again at the Retry-After,
        not counted as an attempt (`JobQueue.refused`)."""
        return JobStatus.PENDING if self.store.queue.refused(job, outcome, retry_after) else STALE
