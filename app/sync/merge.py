"""Three-way merge of one work order: base (what the edit was made on), mine, the server's.

Pure functions. A field changed on one side only merges by itself; a field both sides changed
to different values waits for a person.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from app.records import EDITABLE_FIELDS
from app.states import ConflictKind
from app.store.jobs import ConflictHold

__all__ = [
    "UNKNOWN_BASE",
    "DraftMerge",
    "Merge",
    "conflict_hold",
    "conflict_kind",
    "intent_applied",
    "merge_draft",
    "three_way",
    "unknown_base",
]

#: Stands for a base value nobody knows: it equals neither side, so both count as changed.
UNKNOWN_BASE = object()


def unknown_base() -> dict[str, Any]:
    """A merge base for an edit whose base is unknown: every field it sets that the server
    holds differently goes to a person instead of silently overwriting theirs."""
    return dict.fromkeys(EDITABLE_FIELDS, UNKNOWN_BASE)


@dataclass(frozen=True)
class Merge:
    #: Fields both sides changed differently: a person chooses.
    overlapping: tuple[str, ...]
    #: Fields that merged by themselves, and from which side ("mine" or "theirs").
    auto_merged: dict[str, str] = field(default_factory=dict)
    #: What to send if nobody has to choose: my changes the server does not have yet.
    patch: dict[str, Any] = field(default_factory=dict)


def three_way(base: dict[str, Any] | None, mine: dict[str, Any], theirs: dict[str, Any]) -> Merge:
    """``mine`` holds only the fields my edit set; ``base`` may be None (a create)."""
    base = base or {}
    overlapping: list[str] = []
    auto: dict[str, str] = {}
    patch: dict[str, Any] = {}
    for name in EDITABLE_FIELDS:
        mine_changed = name in mine and mine[name] != base.get(name)
        theirs_changed = name in theirs and theirs.get(name) != base.get(name)
        if mine_changed and theirs_changed:
            if mine[name] == theirs.get(name):
                auto[name] = "both"
            else:
                overlapping.append(name)
        elif mine_changed:
            auto[name] = "mine"
            if mine[name] != theirs.get(name):
                patch[name] = mine[name]
        elif theirs_changed:
            auto[name] = "theirs"
    return Merge(tuple(overlapping), auto, patch)


def intent_applied(op: str, fields: dict[str, Any], current: dict[str, Any]) -> bool:
    """Does the server's record already say what this mutation meant to say?

    True after a first try was applied, its reply lost and its key expired: the retry then
    meets a version conflict with itself. Then the job is done, not a conflict.
    """
    if op == "delete":
        return bool(current.get("deleted"))
    if current.get("deleted") and not fields.get("deleted", False):
        return False
    return all(current.get(name) == value for name, value in fields.items())


def conflict_kind(op: str, mine: dict[str, Any], server: dict[str, Any]) -> ConflictKind:
    """What kind of disagreement a refused edit met: the conflict screen's headline."""
    if op == "create":
        return ConflictKind.EXISTS
    if op == "delete":
        return ConflictKind.EDITED_ON_SERVER
    if server.get("deleted") and not mine.get("deleted"):
        return ConflictKind.DELETED_ON_SERVER
    return ConflictKind.VERSION


def conflict_hold(
    entity_key: str,
    op: str,
    mine: dict[str, Any],
    base: dict[str, Any] | None,
    server: dict[str, Any],
    merge: Merge,
) -> ConflictHold:
    """What the queue keeps of a conflict for the person who settles it."""
    kind = conflict_kind(op, mine, server)
    overlapping = tuple(merge.overlapping)
    if kind != ConflictKind.VERSION and not overlapping:
        # A delete against an edit, or an edit against a delete: always a person's call.
        overlapping = ("deleted",)
    return ConflictHold(
        entity_key=entity_key,
        kind=kind,
        op=op,
        base=base,
        mine=mine,
        server=server,
        overlapping=overlapping,
        auto_merged=dict(merge.auto_merged),
    )


@dataclass(frozen=True)
class DraftMerge:
    """Typing kept over a work order (`app.store.drafts`), reopened over its record now."""

    #: What the editor shows: the record now, with the person's typing over it.
    form: dict[str, str]
    #: Fields the person typed that the server also changed, differently: the server's
    #: value (the form holds the person's until they choose).
    overlapping: dict[str, str]
    #: Fields the person did not touch that changed on the server (they follow it).
    from_server: tuple[str, ...]


def merge_draft(base: dict[str, str], typed: dict[str, str], now: dict[str, str]) -> DraftMerge:
    """``base`` is the form the typing began on, ``typed`` the whole form as typed, ``now``
    the record as a form today. Neither side is lost: what only one side changed is taken
    from it, what both changed alike is kept, what both changed differently is named."""
    mine = {name: value for name, value in typed.items() if value != base.get(name)}
    merge = three_way(base, mine, now)
    form = {**now, **mine}
    overlapping = {name: now[name] for name in merge.overlapping}
    from_server = tuple(name for name, side in merge.auto_merged.items() if side == "theirs")
    return DraftMerge(form, overlapping, from_server)
