"""The sync badge of a work order, from its outstanding jobs (pure, no Qt)."""

from __future__ import annotations

from dataclasses import dataclass

from app.store.deadletters import EntityJobState
from ui.wording import time_until

__all__ = ["BADGES", "Badge", "badge_for"]

#: Every badge kind, in the order a person should worry about them.
BADGES = ("failed", "conflict", "review", "retrying", "sending", "pending", "synced")


@dataclass(frozen=True)
class Badge:
    kind: str  # one of BADGES
    text: str  # short, shown on the row
    detail: str  # longer, on tap / hover


def badge_for(state: EntityJobState | None, now: float) -> Badge:
    if state is None:
        return Badge("synced", "Synced", "The server has every change to this work order.")
    if state.dead:
        return Badge(
            "failed",
            "Failed",
            f"A change could not be delivered: {state.last_error or 'no reason recorded'}. "
            "Open the failed changes panel to retry or discard it.",
        )
    if state.in_review:
        return Badge("review", "Waiting for review", "An admin will decide; you can keep working.")
    if state.conflict:
        return Badge(
            "conflict",
            "Conflict",
            "Someone changed this work order on the server too. Choose what to keep.",
        )
    waiting = state.pending + state.leased
    if state.retrying:
        return Badge(
            "retrying",
            f"Retrying {time_until(state.next_attempt_at, now)}",
            f"Last try failed: {state.last_error or 'unknown error'}",
        )
    if state.leased:
        return Badge("sending", "Sending…", "Being sent to the server now.")
    if state.pending:
        noun = "edit" if waiting == 1 else "edits"
        return Badge(
            "pending",
            f"Pending ({waiting} {noun})",
            "Saved on this device; will be sent when the server is reachable.",
        )
    return Badge("synced", "Synced", "The server has every change to this work order.")
