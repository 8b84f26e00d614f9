"""Photos and files on work orders: copied in, kept under a budget, uploaded by tus (issue 15).

`Attachments` (blocking, on the store's executor) attaches, lists, removes and retries;
`AttachmentOperations` is the same for the UI, publishing `OpChanges`; the bytes live in
`app.attachments.files`, the budget and retention in `app.attachments.retention`; the upload
itself is `app.sync.uploader`.
"""

from app.attachments.model import (
    AttachmentConfig,
    AttachmentCounts,
    AttachmentView,
    StorageBudgetFull,
)
from app.attachments.operations import AttachmentOperations
from app.attachments.store import Attachments

__all__ = [
    "AttachmentConfig",
    "AttachmentCounts",
    "AttachmentOperations",
    "AttachmentView",
    "Attachments",
    "StorageBudgetFull",
]
