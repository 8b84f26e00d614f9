"""Phones for the console's browser tests: the app's real store and sync engine."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.sync.sync_support import FaultTransport, make_store, sync_until_idle

__all__ = ["Phone"]


class Phone:
    """One provisioned device with its own store; `sync()` is one `fieldsync sync` round."""

    def __init__(
        self, server: EmbeddedServer, data_dir: Path, name: str, *, user: str, team: str = ""
    ) -> None:
        self.server = server
        self.name = name
        self.token = server.add_device(name, user=user, team=team)
        self.store: Store = make_store(data_dir / name)
        self.transport = FaultTransport()

    def sync(self, **overrides: Any) -> None:
        def round_() -> None:
            asyncio.run(
                sync_until_idle(
                    self.store, self.server.base_url, self.token, transport=self.transport,
                    **overrides,
                )
            )  # fmt: skip

        # Playwright's sync API keeps an event loop running on this thread: the engine runs
        # its own on another.
        with ThreadPoolExecutor(max_workers=1) as thread:
            thread.submit(round_).result()

    def get(self, path: str) -> httpx.Response:
        return httpx.get(
            self.server.base_url + path, headers={"Authorization": f"Bearer {self.token}"}
        )

    def close(self) -> None:
        self.store.close()
