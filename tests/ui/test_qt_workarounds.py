"""The PySide6 reference-count workarounds of ui/qt.py hold for as long as a session lasts.

Each test crosses the defect far more often than a None's or True's own reference count would
survive unprotected (a few thousand on CPython 3.11), in a child interpreter, so a regression
shows as that child aborting instead of this test run.
"""

from __future__ import annotations

import subprocess
import sys

CROSSINGS = 200_000

_NONE_THROUGH_QVARIANT = f"""
import sys
from ui.qt import QObject, Signal, QCoreApplication
from PySide6.QtCore import Property

app = QCoreApplication([])

class Model(QObject):
    changed = Signal()
    def _row(self):
        return {{"due_date": None, "team": None}}
    row = Property("QVariantMap", _row, notify=changed)

model = Model()
for _ in range({CROSSINGS}):
    model.property("row")
print("survived")
"""

_TRUE_FROM_EMIT = f"""
from ui.qt import QObject, Signal, QCoreApplication

app = QCoreApplication([])

class Probe(QObject):
    fired = Signal()

probe = Probe()
for _ in range({CROSSINGS}):
    probe.fired.emit()
print("survived")
"""


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_empty_fields_read_through_qvariant_do_not_abort_the_interpreter() -> None:
    result = _run(_NONE_THROUGH_QVARIANT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "survived"


def test_signal_emits_do_not_abort_the_interpreter() -> None:
    result = _run(_TRUE_FROM_EMIT)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "survived"
