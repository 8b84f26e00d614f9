"""A stand-in for the sync engine at the UI's edge: what the UI drives of it, recorded."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass
from typing import Any


@dataclass
class FakeReport:
    sent: int = 0
    received: int = 0
    failed: int = 0
    conflicts: int = 0
    problem: str | None = None
    detail: str = ""


class FakeEngine:
    """Counts wakes and "Sync now" calls; answers "Sync now" with ``report``."""

    def __init__(self) -> None:
        self.wakes = 0
        self.revalidated: list[str] = []
        self.config: Any = None
        self.sync_calls = 0
        self.report = FakeReport()

    def wake(self) -> None:
        self.wakes += 1

    async def sync_now(self) -> FakeReport:
        self.sync_calls += 1
        await asyncio.sleep(0)
        return self.report

    def set_sync_on_metered(self, enabled: bool) -> None:
        self.config = dataclasses.replace(self.config, sync_on_metered=enabled)
        self.wake()

    def revalidate(self, entity_id: str) -> None:
        self.revalidated.append(entity_id)

    def set_os_hint(self, online: bool | None, metered: bool = False) -> None:
        pass

    def health(self) -> dict[str, Any]:
        return {"server": "online", "server_reason": "", "mutations": "ok", "clock_skew_s": 900}


class FakeClock:
    """A wall clock the test moves by hand."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds
