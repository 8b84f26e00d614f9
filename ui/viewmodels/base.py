"""The view-model bases: owned tasks, timers stopped on close, a `message` toast, list roles.

Every view-model derives from `ViewModel` (a QObject) or `ListViewModel` (a
QAbstractListModel whose rows QML reads by role name). Both give it:

- `self._tasks`, a `TaskOwner`: slots call `self._tasks.start(coro, name)`; a StoreError a
  task raises is a condition of the device and is told through `message` (a toast), anything
  else reaches the crash handler (or ``on_error``);
- `self._timer(interval_ms, on_timeout, single_shot=False)`: a QTimer the view-model owns and
  `aclose()` stops;
- `wait_idle()` (until every started task has finished: tests, screenshots) and `aclose()`
  (stop the timers, cancel what is left: the window's abort path).

`notified(bool, "_busy", changed)` is a read-only property that shows an attribute as it is
(`busy = notified(bool, "_busy", changed)` in the class body), for the many that only do that;
`settable(str, "_search", searchChanged, on_change)` is one QML may also set: a different
value is stored, ``on_change(view_model)`` runs (reload, restart a timer), then it notifies.

`await self._carry_out(core_call, "Not added")` runs what a person asked of the core: refused,
the toast says "Not added: <why>" and it returns `REFUSED`; done, it returns the call's
result, which the caller words (the engine wakes by itself on the operation's OpChanges).

A `ListViewModel` names its roles once in `ROLE_NAMES`, keeps its rows in `self._rows` and
says what a row shows for a role in `_value(row, name)`; `roleNames`, `rowCount`, `data`,
`get(row)` (every role of a row, for QML and tests) and `repaint(rows, names)` come from here.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Final, Generic, TypeVar, cast

from app.store.errors import StoreError
from ui.qt import (
    Property,
    QAbstractListModel,
    QByteArray,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    Qt,
    QTimer,
    Signal,
    Slot,
    connect,
)
from ui.tasks import TaskOwner

if TYPE_CHECKING:
    from ui.qt import TypedProperty
    from ui.services import Services

__all__ = ["REFUSED", "Index", "ListViewModel", "Refused", "ViewModel", "notified", "settable"]

Row = TypeVar("Row")
Result = TypeVar("Result")
Value = TypeVar("Value", bool, int, float, str)
Index = QModelIndex | QPersistentModelIndex
OnError = Callable[[BaseException], None]


def notified(type_: type[Value], attr: str, notify: Signal) -> TypedProperty[Value]:
    """A read-only Qt property of type ``type_`` showing the attribute ``attr`` as it is,
    notified by ``notify``."""

    def read(view_model: object) -> Value:
        return cast(Value, getattr(view_model, attr))

    read.__name__ = attr.lstrip("_")
    return Property(type_, read, notify=notify)


def settable(
    type_: type[Value], attr: str, notify: Signal, on_change: Callable[[Any], object]
) -> TypedProperty[Value]:
    """A Qt property QML may set, shown from the attribute ``attr``: a value that differs is
    stored, then ``on_change(view_model)`` runs, then ``notify`` is emitted."""

    def read(view_model: object) -> Value:
        return cast(Value, getattr(view_model, attr))

    def write(view_model: QObject, value: Value) -> None:
        if value != getattr(view_model, attr):
            setattr(view_model, attr, value)
            on_change(view_model)
            notify.__get__(view_model, type(view_model)).emit()

    read.__name__ = attr.lstrip("_")
    return Property(type_, read, write, notify=notify)


class Refused:
    """What `_carry_out` returns when the core refused (the toast has said why)."""


REFUSED: Final = Refused()


class _Owner:
    """The tasks and timers of one view-model (a mixin: Qt's classes hold the Signals)."""

    _tasks: TaskOwner
    _timers: list[QTimer]
    _say: Callable[[str], None]
    _services: Services

    def _own(
        self,
        on_error: OnError | None,
        on_condition: Callable[[str], None] | None,
        say: Callable[[str], None],
    ) -> None:
        self._tasks = TaskOwner(on_error, on_condition=on_condition)
        self._timers = []
        self._say = say

    async def _carry_out(
        self,
        action: Awaitable[Result],
        refused: str,
        errors: tuple[type[Exception], ...] = (StoreError,),
    ) -> Result | Refused:
        """Await ``action``, a core operation a person asked for. One of ``errors``: say
        "<refused>: <why>" and return `REFUSED`. Done: return the result."""
        try:
            return await action
        except errors as exc:
            self._say(f"{refused}: {exc}")
            return REFUSED

    def _timer(
        self, interval_ms: int, on_timeout: Callable[[], None], *, single_shot: bool = False
    ) -> QTimer:
        timer = QTimer(cast(QObject, self), singleShot=single_shot, interval=interval_ms)
        connect(timer.timeout, on_timeout)
        self._timers.append(timer)
        return timer

    async def wait_idle(self) -> None:
        await self._tasks.wait_idle()

    async def aclose(self) -> None:
        for timer in self._timers:
            timer.stop()
        await self._tasks.aclose()


class ViewModel(_Owner, QObject):
    """A view-model of notified properties and slots.

    Signals:
        message(str)  — something to tell the person once (a toast)
    """

    message = Signal(str)

    def __init__(
        self,
        parent: QObject | None = None,
        *,
        on_error: OnError | None = None,
        conditions_as_messages: bool = True,
    ) -> None:
        super().__init__(parent)
        say = self.message.emit
        self._own(on_error, say if conditions_as_messages else None, say)


class ListViewModel(_Owner, QAbstractListModel, Generic[Row]):
    """A list of rows QML reads by role name.

    Signals:
        message(str)  — something to tell the person once (a toast)
    """

    message = Signal(str)
    #: The roles a row has, in the order QML and `get` list them.
    ROLE_NAMES: ClassVar[tuple[str, ...]] = ()
    _ROLES: ClassVar[dict[str, int]] = {}
    _ROLE_BY_NUMBER: ClassVar[dict[int, str]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        first = int(Qt.ItemDataRole.UserRole) + 1
        cls._ROLES = {name: first + i for i, name in enumerate(cls.ROLE_NAMES)}
        cls._ROLE_BY_NUMBER = {number: name for name, number in cls._ROLES.items()}

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._own(None, self.message.emit, self.message.emit)
        self._rows: list[Row] = []

    def _value(self, row: Row, name: str) -> Any:
        """What ``row`` shows for the role ``name``."""
        raise NotImplementedError

    def roleNames(self) -> dict[int, QByteArray]:
        return {number: QByteArray(name.encode()) for name, number in self._ROLES.items()}

    def rowCount(self, parent: Index = QModelIndex()) -> int:  # noqa: B008
        return 0 if parent.isValid() else len(self._rows)

    def data(self, index: Index, role: int = Qt.ItemDataRole.DisplayRole) -> Any:
        if not index.isValid() or not 0 <= index.row() < len(self._rows):
            return None
        name = "title" if role == Qt.ItemDataRole.DisplayRole else self._ROLE_BY_NUMBER.get(role)
        return None if name is None else self._value(self._rows[index.row()], name)

    @Slot(int, result="QVariantMap")
    def get(self, row: int) -> dict[str, Any]:
        """Every role of one row, for QML and tests ({} past the end)."""
        if not 0 <= row < len(self._rows):
            return {}
        return {name: self._value(self._rows[row], name) for name in self.ROLE_NAMES}

    def repaint(self, rows: Iterable[int] | None = None, names: Iterable[str] = ()) -> None:
        """Tell the view that ``rows`` (every row if None) changed in the roles ``names``
        (every role if none)."""
        roles = [self._ROLES[name] for name in names]
        if rows is None:
            if self._rows:
                self.dataChanged.emit(self.index(0), self.index(len(self._rows) - 1), roles)
            return
        for i in rows:
            self.dataChanged.emit(self.index(i), self.index(i), roles)
