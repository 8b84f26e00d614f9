"""What a photo or file attached to a work order says on screen: its upload state and the list
row's "2 photos waiting" (pure, no Qt)."""

from __future__ import annotations

from dataclasses import dataclass

from app.states import AttachmentState

__all__ = [
    "UploadWords",
    "is_image",
    "percent",
    "state_in_words",
    "waiting_in_words",
]

#: Content types the strip shows as a picture (Qt Quick's Image reads these).
_IMAGE_TYPES = ("image/jpeg", "image/png", "image/gif", "image/webp", "image/bmp", "image/svg+xml")


@dataclass(frozen=True)
class UploadWords:
    """One attachment's upload as the core reports it."""

    state: str  # waiting | uploading | uploaded | failed
    offset: int = 0
    size: int = 0
    reason: str = ""
    #: The upload waits for an unmetered link (the person turned off sync on metered ones).
    waits_for_unmetered: bool = False
    #: No link to the server now (offline, or the server does not answer): nothing moves.
    link_down: bool = False


def is_image(content_type: str) -> bool:
    return content_type.lower() in _IMAGE_TYPES


def percent(offset: int, size: int) -> int:
    """Whole percent sent, never 100 before the last byte is confirmed."""
    if size <= 0:
        return 0
    whole = offset * 100 // size
    return min(whole, 99) if offset < size else 100


def state_in_words(upload: UploadWords) -> str:
    """`Uploading 45 %`, `Waiting for Wi-Fi`, `Waiting to upload`, `Uploaded`, `Failed: …`;
    with no link, `Waiting for a connection` (and how much of it the server already has):
    "Uploading" while nothing can move would be untrue."""
    match upload.state:
        case AttachmentState.UPLOADED:
            return "Uploaded"
        case AttachmentState.FAILED:
            return f"Failed: {upload.reason or 'no reason recorded'}"
        case _ if upload.waits_for_unmetered:
            return "Waiting for Wi-Fi"
        case _ if upload.link_down:
            sent = (
                percent(upload.offset, upload.size)
                if upload.state == AttachmentState.UPLOADING
                else 0
            )
            return "Waiting for a connection" + (f" · {sent} % sent" if sent else "")
        case AttachmentState.UPLOADING:
            return f"Uploading {percent(upload.offset, upload.size)} %"
        case _:
            return "Waiting to upload"


def _files(images: int, others: int) -> str:
    parts = []
    if images:
        parts.append(f"{images} photo" + ("" if images == 1 else "s"))
    if others:
        parts.append(f"{others} file" + ("" if others == 1 else "s"))
    return ", ".join(parts)


def waiting_in_words(
    images: int, others: int, failed_images: int = 0, failed_others: int = 0
) -> str:
    """The list row's line: "2 photos waiting", "1 file waiting", "2 photos, 1 file waiting",
    and what failed for good apart: "1 photo failed", "2 photos waiting · 1 file failed";
    "" when nothing waits. ``images`` and ``others`` count the failed ones too."""
    waiting = _files(images - failed_images, others - failed_others)
    failed = _files(failed_images, failed_others)
    parts = [f"{waiting} waiting" if waiting else "", f"{failed} failed" if failed else ""]
    return " · ".join(part for part in parts if part)
