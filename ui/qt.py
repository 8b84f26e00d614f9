"""The one door to Qt: every `ui/` module imports PySide6 names from here, never directly.

Keeps the binding swappable in one place (as qutebrowser's `qt/` package and Anki's
`aqt/qt`) and offers `connect()`, a typed helper that refuses to wire a signal to something that
is not callable, which PySide otherwise reports only when the signal fires.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar, overload

from PySide6.QtCore import Property as _QtProperty
from PySide6.QtCore import (
    QAbstractListModel,
    QByteArray,
    QCoreApplication,
    QElapsedTimer,
    QEventLoop,
    QMetaObject,
    QModelIndex,
    QObject,
    QPersistentModelIndex,
    QSize,
    Qt,
    QTimer,
    QUrl,
    Signal,
    SignalInstance,
    Slot,
    qInstallMessageHandler,
)
from PySide6.QtGui import QColor, QFont, QGuiApplication, QImage, QPainter, QPalette
from PySide6.QtNetwork import QLocalServer, QLocalSocket
from PySide6.QtQml import QQmlApplicationEngine, QQmlEngine
from PySide6.QtQuick import QQuickItem, QQuickWindow
from PySide6.QtQuickControls2 import QQuickStyle
from PySide6.QtTest import QTest
from PySide6.QtWidgets import QApplication, QMessageBox

try:  # QNetworkInformation is newer than the rest of QtNetwork; a trimmed build may lack it.
    from PySide6.QtNetwork import QNetworkInformation
except ImportError:  # pragma: no cover
    QNetworkInformation = None  # type: ignore[assignment,misc]

T = TypeVar("T")

if TYPE_CHECKING:

    class TypedProperty(Generic[T]):
        """What mypy sees of a Qt property: reading it on an instance gives its value."""

        def __get__(self, obj: object, owner: type | None = None) -> T: ...

        def __set__(self, obj: object, value: T) -> None: ...

    @overload
    def Property(
        type_: object,
        fget: Callable[[Any], T],
        fset: Callable[[Any, T], None] | None = None,
        *,
        notify: Any = None,
        constant: bool = False,
    ) -> TypedProperty[T]: ...

    @overload
    def Property(
        type_: object, *, notify: Any = None, constant: bool = False
    ) -> Callable[[Callable[[Any], T]], TypedProperty[T]]: ...

    def Property(type_: object, *args: Any, **kwargs: Any) -> Any: ...

else:
    # WORKAROUND: PySide6's stubs type a property read on an instance as `Property`, and
    # its type argument as a Python type (not "QVariantMap"): mypy sees the typed view
    # above, Qt gets the real class.
    Property = _QtProperty

#: Flags for `processEvents` (kept apart from the name qasync uses for its loop class).
QEventLoopFlags = QEventLoop.ProcessEventsFlag

__all__ = [
    "Property",
    "QAbstractListModel",
    "QApplication",
    "QByteArray",
    "QColor",
    "QCoreApplication",
    "QElapsedTimer",
    "QEventLoopFlags",
    "QFont",
    "QGuiApplication",
    "QLocalServer",
    "QLocalSocket",
    "QImage",
    "QMessageBox",
    "QMetaObject",
    "QModelIndex",
    "QNetworkInformation",
    "QObject",
    "QPainter",
    "QPalette",
    "QPersistentModelIndex",
    "QQmlApplicationEngine",
    "QQmlEngine",
    "QQuickItem",
    "QQuickStyle",
    "QQuickWindow",
    "QSize",
    "QTest",
    "QTimer",
    "QUrl",
    "Qt",
    "Signal",
    "SignalInstance",
    "Slot",
    "connect",
    "qInstallMessageHandler",
]


def _signal_emit_drops_true() -> bool:
    """True if `SignalInstance.emit()` returns True without owning a reference to it."""

    class _Probe(QObject):
        fired = Signal()

    probe = _Probe()
    before = sys.getrefcount(True)
    for _ in range(10):
        probe.fired.emit()
    return sys.getrefcount(True) < before - 5


def _pin_true() -> None:
    """WORKAROUND: PySide6 6.12 on CPython 3.11 returns `True` from every `Signal.emit()`
    without taking a reference, so each emit drops True's reference count by one; after a few
    hundred emits CPython aborts ("bool_dealloc: deallocating True or False"). Python 3.12+
    makes True immortal, so only older interpreters need this. True is a static object that is
    never freed, so giving it 2**40 extra references is harmless and moves the abort out of
    reach. Remove once PySide6 returns a new reference (or the app requires Python 3.12)."""
    if sys.version_info >= (3, 12) or not _signal_emit_drops_true():
        return
    refcount = ctypes.c_ssize_t.from_address(id(True))
    refcount.value += 1 << 40


_pin_true()


def _variant_drops_none() -> bool:
    """True if a None that travels through a QVariant comes back without its reference."""

    class _Probe(QObject):
        changed = Signal()

        def _nothing(self) -> None:
            return None

        nothing = _QtProperty("QVariant", _nothing, notify=changed)  # type: ignore[arg-type]

    probe = _Probe()
    before = sys.getrefcount(None)
    for _ in range(10):
        probe.property("nothing")
    return sys.getrefcount(None) < before - 5


def _pin_none() -> None:
    """WORKAROUND, the twin of `_pin_true`: PySide6 6.12 on CPython 3.11 loses one reference
    to None each time a None crosses a QVariant (a view-model's map or list with an empty
    field, read by QML, a slot answering nothing). Each read costs one; a long session, or the
    UI test suite, drains None's count and CPython aborts ("none_dealloc: deallocating None").
    None is a static object that is never freed, so 2**40 extra references are harmless. Remove
    with `_pin_true`."""
    if sys.version_info >= (3, 12) or not _variant_drops_none():
        return
    refcount = ctypes.c_ssize_t.from_address(id(None))
    refcount.value += 1 << 40


_pin_none()


def connect(signal: SignalInstance, slot: Callable[..., Any]) -> None:
    """Connect `signal` to `slot`, failing at wiring time rather than at emit time."""
    if not isinstance(signal, SignalInstance):
        raise TypeError(f"connect() needs a bound signal, got {type(signal).__name__}")
    if not callable(slot):
        raise TypeError(f"connect() needs a callable slot, got {type(slot).__name__}")
    if not signal.connect(slot):
        raise RuntimeError(f"could not connect {signal} to {slot!r}")
