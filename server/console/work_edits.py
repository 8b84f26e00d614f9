"""Writing work orders from the console: create, edit, reassign, through the domain code.

Each write is an ordinary mutation (validated by the contract's rules, version-checked,
numbered in the change feed, restamped into the scopes it enters and leaves) made by
"<user> (console)", with a console audit entry in the same transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from server.console.audit_log import note
from server.console.sessions import ConsoleState, Visit
from server.db.idempotency import Reply
from server.records.history import Author
from server.records.mutations import InvalidMutation, apply_mutation, validate_mutation

__all__ = ["EditRefused", "actor_name", "create_work_order", "edit_work_order", "reassign"]


class EditRefused(Exception):
    """The change was not made; `words` say why (for the page)."""

    def __init__(self, words: str, status: int) -> None:
        super().__init__(words)
        self.words = words
        self.status = status


def actor_name(visit: Visit) -> str:
    return f"{visit.user.name} (console)"


def _words(detail: Any) -> str:
    if isinstance(detail, list):
        return "; ".join(
            f"{'.'.join(str(p) for p in item.get('loc', []) if p != 'fields')}: {item.get('msg')}"
            for item in detail
        )
    return str(detail)


def _refusal(reply: Reply) -> EditRefused:
    error = reply.body.get("error")
    if error == "version_conflict":
        return EditRefused("The work order changed meanwhile: here it is as it is now.", 409)
    if error == "not_found":
        return EditRefused("There is no such work order.", 404)
    return EditRefused(f"Refused: {error}", reply.status)


def _apply(state: ConsoleState, visit: Visit, raw: dict[str, Any], action: str) -> dict[str, Any]:
    try:
        mutation = validate_mutation(raw)
    except InvalidMutation as error:
        raise EditRefused(_words(error.detail), 422) from None
    with state.store.write_transaction() as sequence:
        reply = apply_mutation(
            state.store,
            mutation,
            actor_name(visit),
            sequence,
            creator=visit.user.name,
            author=Author(visit.user.name, "console"),
        )
        if reply.status not in (200, 201):
            raise _refusal(reply)
        note(state, visit, action, mutation.entity_id, **mutation.fields)
    record: dict[str, Any] = reply.body["record"]
    return record


def create_work_order(state: ConsoleState, visit: Visit, fields: dict[str, Any]) -> dict[str, Any]:
    raw = {"entity_id": str(uuid.uuid4()), "op": "create", "base_version": None, "fields": fields}
    return _apply(state, visit, raw, "work_order.create")


def edit_work_order(
    state: ConsoleState, visit: Visit, entity_id: str, base_version: int, fields: dict[str, Any]
) -> dict[str, Any]:
    raw = {"entity_id": entity_id, "op": "update", "base_version": base_version, "fields": fields}
    return _apply(state, visit, raw, "work_order.edit")


def reassign(
    state: ConsoleState,
    visit: Visit,
    entity_ids: Sequence[str],
    *,
    assignee: str | None,
    team: str | None,
) -> int:
    """Give every one of `entity_ids` the new assignee and/or team, all or none; the count."""
    fields: dict[str, Any] = {}
    if assignee is not None:
        fields["assignee"] = assignee
    if team is not None:
        fields["team"] = team
    if not fields:
        raise EditRefused("Give a new assignee, a new team, or both.", 422)
    orders = state.store.tables.WorkOrder
    mutations = []
    for entity_id in entity_ids:
        row = orders.get_or_none(orders.id == entity_id)
        if row is None:
            raise EditRefused(f"There is no work order {entity_id}.", 404)
        raw = {"entity_id": entity_id, "op": "update", "base_version": row.version,
               "fields": fields}  # fmt: skip
        try:
            mutations.append(validate_mutation(raw))
        except InvalidMutation as error:
            raise EditRefused(_words(error.detail), 422) from None
    with state.store.write_transaction() as sequence:
        for mutation in mutations:
            reply = apply_mutation(
                state.store,
                mutation,
                actor_name(visit),
                sequence,
                creator=visit.user.name,
                author=Author(visit.user.name, "console"),
            )
            if reply.status != 200:
                # The whole reassignment rolls back: half of a bulk change is a surprise.
                raise _refusal(reply)
            note(state, visit, "work_order.reassign", mutation.entity_id, **fields)
    return len(mutations)
