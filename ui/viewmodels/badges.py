"""The sync badge of a work order, from its outstanding jobs (pure, no Qt)."""

from __future__ import annotations

from dataclasses import dataclass

from app.states import BadgeKind
from app.store.deadletters import EntityJobState
from ui.wording import time_until

__all__ = ["BADGES", "Badge", "BadgeKind", "badge_for", "with_files"]

#: Every badge kind, in the order a person should worry about them.
BADGES: tuple[BadgeKind, ...] = tuple(BadgeKind)


@dataclass(frozen=True)
class Badge:
    kind: BadgeKind
    text: str  # short, shown on the row
    detail: str  # longer, on tap / hover


def badge_for(state: EntityJobState | None, now: float, *, online: bool = False) -> Badge:
    """The badge of one work order; ``online``: the engine last said the server answers
    (a pending edit is then on its way, not waiting for the server to come back)."""
    if state is None:
        return Badge(BadgeKind.SYNCED, "Synced", "The server has every change to this work order.")
    waiting = state.pending + state.leased
    # Later edits of a work order wait behind a failed or conflicted one: say so, or the
    # person believes they will go out by themselves.
    held = (
        f" {waiting} later {'edit waits' if waiting == 1 else 'edits wait'} behind it."
        if waiting
        else ""
    )
    if state.dead:
        return Badge(
            BadgeKind.FAILED,
            f"Failed (+{waiting} held)" if waiting else "Failed",
            f"A change could not be delivered: {state.last_error or 'no reason recorded'}. "
            f"Open the failed changes panel to retry or discard it.{held}",
        )
    if state.in_review:
        return Badge(
            BadgeKind.REVIEW,
            "Waiting for review",
            f"An admin will decide; you can keep working.{held}",
        )
    if state.conflict:
        return Badge(
            BadgeKind.CONFLICT,
            f"Conflict (+{waiting} held)" if waiting else "Conflict",
            f"Someone changed this work order on the server too. Choose what to keep.{held}",
        )
    if state.retrying:
        due = state.next_attempt_at is not None and state.next_attempt_at <= now
        return Badge(
            BadgeKind.RETRYING,
            # Past its time the engine has not sent it yet (offline, probing): say so, never
            # "Retrying now" for as long as that lasts.
            "Waiting to retry" if due else f"Retrying {time_until(state.next_attempt_at, now)}",
            f"Last try failed: {state.last_error or 'unknown error'}",
        )
    if state.leased:
        return Badge(BadgeKind.SENDING, "Sending…", "Being sent to the server now.")
    if state.pending:
        noun = "edit" if waiting == 1 else "edits"
        return Badge(
            BadgeKind.PENDING,
            f"Pending ({waiting} {noun})",
            "Saved on this device; being sent to the server."
            if online
            else "Saved on this device; will be sent when the server is reachable.",
        )
    return Badge(BadgeKind.SYNCED, "Synced", "The server has every change to this work order.")


def with_files(badge: Badge, waiting: int, failed: int) -> Badge:
    """The badge for the whole work order: "Synced" only when its photos and files are on
    the server too. ``waiting`` counts the files not yet uploaded, ``failed`` of those the
    ones whose upload failed for good; beside "1 file failed" the badge says which part
    synced instead of a plain "Synced"."""
    if badge.kind is not BadgeKind.SYNCED or waiting <= 0:
        return badge
    if failed > 0:
        files = "1 file" if failed == 1 else f"{failed} files"
        return Badge(
            BadgeKind.SYNCED,
            "Details synced",
            f"The server has every change to this work order's details, but {files} did not "
            "upload. Open the work order to retry or remove it.",
        )
    return Badge(
        BadgeKind.SYNCED,
        "Details synced",
        "The server has every change to this work order's details; its files are still uploading.",
    )
