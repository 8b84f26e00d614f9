"""Fixtures: a private D-Bus (session and system) for one test, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.dbus import PrivateBus, private_bus


@pytest.fixture
def dbus() -> Iterator[PrivateBus]:
    with private_bus() as running:
        yield running
