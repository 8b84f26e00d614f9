"""The documented shape of every answer, so `/openapi.json` describes what the server really sends.

These models only document: the routes build their JSON themselves (the wire contract is fixed),
and the schemathesis suite (`tests/chaos/test_fuzz_server.py`) checks every answer against them.
Error bodies are `{"error": <name>, …}` on every status, so FastAPI's default 422 schema
(`HTTPValidationError`, `detail` always an array) is replaced on each route by `InvalidPayload`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.records import WorkOrder

__all__ = [
    "AttachmentRemoved",
    "BatchReply",
    "ChangesPage",
    "ConflictList",
    "ConflictNotOpen",
    "ConflictReply",
    "DecisionReply",
    "FeedRecord",
    "Identity",
    "KeyInUse",
    "KeyProblem",
    "KeyReused",
    "OutOfScope",
    "PinReply",
    "RecordRead",
    "RecordReply",
    "SearchPage",
    "UnreadableBody",
    "VersionConflict",
    "error_responses",
]


class Record(WorkOrder):
    """A work order as the server sends it: the editable fields plus the server-owned ones."""

    id: str
    version: int = Field(ge=1)
    updated_at: str
    updated_by: str


class RecordReply(BaseModel):
    record: Record


class AttachmentInfo(BaseModel):
    """A file of a work order, as its record lists it."""

    id: str
    filename: str
    content_type: str
    size: int = Field(ge=0)
    sha256: str = Field(pattern="^[0-9a-f]{64}$")
    created_at: str
    created_by: str


class AttachmentChange(AttachmentInfo):
    """An attachment in the changes feed; a removed one is a tombstone (`deleted`)."""

    entity_id: str
    deleted: bool
    deleted_at: str | None
    deleted_by: str | None


class AttachmentRemoved(BaseModel):
    attachment: AttachmentChange


class StoredRecord(Record):
    """A record as reads return it: with its live attachments (which never move `version`)."""

    attachments: list[AttachmentInfo] | None = Field(
        default=None, description="Present once the work order has, or had, an attachment"
    )


class RecordRead(BaseModel):
    record: StoredRecord


class FeedRecord(StoredRecord):
    """A work order in the device's scope, as its feed carries it."""

    pinned: bool = Field(description="Whether the device's user pinned it (Keep offline)")


class OutOfScope(BaseModel):
    """A work order that left the device's scope: remove it unless edits of it are unsent."""

    model_config = ConfigDict(extra="forbid")

    id: str
    out_of_scope: Literal[True]


class ChangesPage(BaseModel):
    changes: list[FeedRecord | OutOfScope]
    attachments: list[AttachmentChange] | None = Field(
        default=None,
        description="Attachments added or removed (tombstones), in the change order of"
        " `changes`; present when the page holds any",
    )
    next: str = Field(description="The `since` token for the following page")
    has_more: bool


class Identity(BaseModel):
    device: str
    user: str = Field(description="The person using the device (matched against `assignee`)")
    team: str = Field(description='Their team; "" for none')
    role: Literal["worker", "admin"]


class SearchRecord(StoredRecord):
    pinned: bool
    in_scope: bool = Field(description="Whether the device holds it (its feed carries it)")


class SearchPage(BaseModel):
    records: list[SearchRecord]
    next_cursor: str | None = Field(description="The `cursor` of the next page; null at the end")


class PinReply(BaseModel):
    id: str
    pinned: bool


class AuditEntry(BaseModel):
    action: Literal["raised", "resolved", "dismissed"]
    actor: str
    at: str
    chosen: dict[str, Any]


class Conflict(BaseModel):
    id: int
    status: Literal["open", "resolved", "dismissed"]
    entity_id: str
    base_version: int | None
    mine: dict[str, Any]
    base: dict[str, Any] | None = Field(
        default=None, description="The values the worker's edit started from, if it sent them"
    )
    server: Record = Field(description="The server's record when the conflict was raised")
    note: str | None
    device: str
    created_at: str
    decided_by: str | None
    decided_at: str | None
    resolution: dict[str, Any] | None
    audit: list[AuditEntry] | None = Field(default=None, description="Only on a single read")


class ConflictReply(BaseModel):
    conflict: Conflict


class ConflictList(BaseModel):
    conflicts: list[Conflict]


class DecisionReply(BaseModel):
    record: Record | None = Field(default=None, description="The new record (resolve only)")
    conflict: Conflict


class BatchResult(BaseModel):
    idempotency_key: Any = Field(description="As sent, even when it was invalid")
    status: int = Field(description="What the single endpoint would have answered")
    body: dict[str, Any]
    replayed: bool
    retry_after: int | None = Field(default=None, description="Seconds, with 409 in use")


class BatchReply(BaseModel):
    results: list[BatchResult]


class ValidationIssue(BaseModel):
    loc: list[str | int]
    msg: str
    type: str


class InvalidPayload(BaseModel):
    """422: the request is well-formed HTTP but its content is not acceptable."""

    error: Literal["invalid_payload"]
    detail: list[ValidationIssue] | str = Field(
        description="pydantic's findings, or one sentence when a single rule failed"
    )


class KeyReused(BaseModel):
    """422: this `Idempotency-Key` was already used with a different body."""

    error: Literal["idempotency_key_reused"]


class KeyInUse(BaseModel):
    """409: the first request with this key is still being processed; retry later."""

    error: Literal["idempotency_key_in_use"]


class VersionConflict(BaseModel):
    """409: `base_version` is not the current version (or the created id exists)."""

    error: Literal["version_conflict"]
    current: Record


class ConflictNotOpen(BaseModel):
    """409: the conflict was already resolved or dismissed."""

    error: Literal["conflict_not_open"]
    conflict: Conflict


class KeyProblem(BaseModel):
    """400: the Idempotency-Key header is missing, blank or longer than 255 characters."""

    error: Literal["missing_idempotency_key", "invalid_idempotency_key"]
    detail: str | None = None


class UnreadableBody(BaseModel):
    """400: the body could not be read at all (not UTF-8, say)."""

    error: Literal["bad_request"]


class Unauthorized(BaseModel):
    error: Literal["unauthorized"]


class Forbidden(BaseModel):
    error: Literal["forbidden"]


class NotFound(BaseModel):
    error: Literal["not_found"]


class PayloadTooLarge(BaseModel):
    error: Literal["payload_too_large"]


class RateLimited(BaseModel):
    #: `rate_limited`: this device asked too often; `server_busy`: the server process is
    #: working on all it may at once (server/admission/).
    error: Literal["rate_limited", "server_busy"]


def _retry_after(meaning: str) -> dict[str, Any]:
    return {"Retry-After": {"description": meaning, "schema": {"type": "integer", "minimum": 0}}}


_ERRORS: dict[int, dict[str, Any]] = {
    401: {"model": Unauthorized, "description": "Token missing, unknown or revoked"},
    403: {"model": Forbidden, "description": "Needs an admin token"},
    404: {"model": NotFound, "description": "No such record or conflict (or another worker's)"},
    413: {"model": PayloadTooLarge, "description": "Body over the configured limit"},
    429: {
        "model": RateLimited,
        "description": "Per-device rate limit, or the server is saturated",
        "headers": _retry_after("Seconds until a request would be accepted"),
    },
}


def error_responses(
    *statuses: int,
    bad_request: tuple[type[BaseModel], ...] = (),
    conflict: tuple[type[BaseModel], ...] = (),
    invalid: tuple[type[BaseModel], ...] | None = (),
) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route: the listed common errors (401, 403, 404, 413, 429), its 400
    bodies (`bad_request`), its 409 bodies (`conflict`) and its 422 bodies: `InvalidPayload`
    plus `invalid`, or none with `invalid=None` (only for a route without parameters: FastAPI
    documents its own, differently shaped, 422 on any route that has some)."""
    documented: dict[int | str, dict[str, Any]] = {status: _ERRORS[status] for status in statuses}
    if bad_request:
        documented[400] = _alternatives(bad_request)
    if conflict:
        documented[409] = _alternatives(conflict)
        if KeyInUse in conflict:
            documented[409]["headers"] = _retry_after("Seconds before retrying the same key")
    if invalid is not None:
        documented[422] = _alternatives((InvalidPayload, *invalid))
    return dict(sorted(documented.items(), key=lambda item: str(item[0])))


def _alternatives(models: tuple[type[BaseModel], ...]) -> dict[str, Any]:
    """One response whose body is any of `models`, described by their docstrings."""
    union: Any = models[0]
    for model in models[1:]:
        union = union | model
    described = [
        (model.__doc__ or model.__name__).splitlines()[0].split(": ", 1)[-1].rstrip(".")
        for model in models
    ]
    return {"model": union, "description": "; ".join(described)}
