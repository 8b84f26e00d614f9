"""A person's choice, field by field, between this device's side and the server's.

Conflict resolution on the device (`conflicts.py`) and the admin's review of an escalated
conflict (`review.py`) both ask it: "mine" keeps the device's value, "theirs" the server's.
Both derive from `FieldChoiceViewModel`, which holds the choices and the QML slot `choose`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

from ui.qt import QObject, Signal, Slot
from ui.viewmodels.base import ViewModel

__all__ = ["SIDES", "FieldChoiceViewModel", "FieldChoices"]

Case = TypeVar("Case")

SIDES = ("mine", "theirs")


class FieldChoices:
    """The side chosen for each field so far."""

    def __init__(self) -> None:
        self._sides: dict[str, str] = {}

    def choose(self, field: str, side: str) -> None:
        if side not in SIDES:
            raise ValueError(f"side must be mine or theirs, not {side!r}")
        self._sides[field] = side

    def choose_all(self, fields: Iterable[str], side: str) -> None:
        """The same side for every one of ``fields``, in place of what was chosen."""
        self.clear()
        for field in fields:
            self.choose(field, side)

    def side(self, field: str) -> str:
        """ "mine", "theirs", or "" while undecided."""
        return self._sides.get(field, "")

    def unresolved(self, fields: Iterable[str]) -> int:
        """How many of ``fields`` still wait for a choice."""
        return sum(1 for field in fields if field not in self._sides)

    def clear(self) -> None:
        self._sides = {}

    def as_dict(self) -> dict[str, str]:
        return dict(self._sides)


class FieldChoiceViewModel(ViewModel, Generic[Case]):
    """A view-model where a person decides one case (a conflict) at a time, choosing a side
    for each field that differs.

    A subclass declares its own ``changed = Signal()`` (its properties notify by it), which
    `choose` and `_show_case` emit.
    """

    changed: Signal

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._current: Case | None = None
        self._choices = FieldChoices()

    def _show_case(self, case: Case | None) -> None:
        """Show ``case`` (None: none), with nothing chosen yet."""
        self._current = case
        self._choices.clear()
        self.changed.emit()

    @Slot(str, str)
    def choose(self, field: str, side: str) -> None:
        self._choices.choose(field, side)
        self.changed.emit()
