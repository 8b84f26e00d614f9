"""The engine against the real server when the feed leaves out the device's own writes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from app.store.settings import install_id
from app.store.store import Store
from server.embedded import EmbeddedServer
from tests.support.api import ServerApi
from tests.sync.sync_support import Fault, FaultTransport, make_store, sync_until_idle


class Recording(FaultTransport):
    """A FaultTransport that keeps the feed pages it answered."""

    def __init__(self) -> None:
        super().__init__()
        self.pages: list[dict[str, Any]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.url.path == "/v1/changes" and response.status_code == 200:
            self.pages.append(response.json())
        return response


def held(store: Store, entity_ids: list[str]) -> dict[str, int | None]:
    return {e: store.cache.get(e)["server_version"] for e in entity_ids}


async def test_a_lost_reply_still_ends_with_the_record_held(
    store: Store, server: EmbeddedServer, token_a: str, api_a: ServerApi
) -> None:
    ids = [store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(30)]
    transport = Recording()
    # The server applies the first batch; its reply never arrives: the jobs go again.
    transport.plan(Fault("lose", path_prefix="/v1/mutations/batch"))
    await sync_until_idle(store, server.base_url, token_a, transport=transport, batch_size=10)
    assert held(store, ids) == dict.fromkeys(ids, 1)
    assert [p["changes"] for p in transport.pages] == [[]] * len(transport.pages)
    # The device passed its own changes: a pull from its token has nothing.
    await sync_until_idle(store, server.base_url, token_a, transport=transport)
    assert transport.pages[-1] == {"changes": [], "next": transport.pages[-2]["next"],
                                   "has_more": False}  # fmt: skip
    assert {r["id"]: r["version"] for r in api_a.all_changes()} == dict.fromkeys(ids, 1)


async def test_a_reinstall_and_a_second_device_get_what_this_one_wrote(
    store: Store,
    other_store: Store,
    server: EmbeddedServer,
    token_a: str,
    token_b: str,
    tmp_path: Path,
) -> None:
    ids = [store.record_edit("create", None, {"title": f"WO {n}"}).entity_id for n in range(5)]
    await sync_until_idle(store, server.base_url, token_a)
    store.record_edit("update", ids[0], {"notes": "edited"})
    await sync_until_idle(store, server.base_url, token_a)
    expected = {ids[0]: 2, **dict.fromkeys(ids[1:], 1)}
    assert held(store, ids) == expected
    # The same person's other device.
    await sync_until_idle(other_store, server.base_url, token_b)
    assert held(other_store, ids) == expected
    # The same device, reinstalled: an empty store, the same token.
    with make_store(tmp_path / "reinstalled") as fresh:
        assert install_id(fresh) != install_id(store)
        mine = fresh.record_edit("create", None, {"title": "after the reinstall"}).entity_id
        transport = Recording()
        await sync_until_idle(fresh, server.base_url, token_a, transport=transport)
        assert held(fresh, [*ids, mine]) == {**expected, mine: 1}
        delivered = [c["id"] for page in transport.pages for c in page["changes"]]
        assert sorted(delivered) == sorted(ids)
