"""Steps a UI test takes through the whole app: let it settle, tap a control, open a row."""

from __future__ import annotations

from typing import Any

from tests.ui.conftest import Runner
from tests.ui.qml_driver import click, find
from ui.viewmodels.app import AppViewModel


def settle(run: Runner, app_vm: AppViewModel) -> None:
    """Until the view-models are idle, then a moment for QML to repaint."""
    run(app_vm.wait_idle())
    run.pause(0.05)


def tap(run: Runner, app_vm: AppViewModel, window: Any, name: str) -> None:
    click(window, find(window, name))
    settle(run, app_vm)


def open_row(run: Runner, app_vm: AppViewModel, window: Any, index: int) -> None:
    """Tap the list's row `index` and wait until the editor has read its work order."""
    tap(run, app_vm, window, f"workOrderRow_{index}")
    run.until(lambda: app_vm.editor.loaded)
