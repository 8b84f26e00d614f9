"""The access matrix (issue 20): every operation of `/openapi.json` × six callers × the kinds
of thing it touches (work order, attachment, upload, conflict, pin), in both modes, on SQLite
and PostgreSQL. The expected outcomes are the one table below, `EXPECTED`; an operation
without a row fails `test_every_operation_has_a_row`.

Callers, in the order of each row: `admin`; `holder`, a worker whose scope holds the target
(team north); `stranger`, a worker whose scope never held it (team east); `lost`, a worker
that held it and lost it (moved from north to south); `revoked`, a revoked token; `anonymous`,
no token. Targets: work order W of team north (version 2), its photo A, the holder's
unfinished upload U of W, the holder's conflict C on W, and the pin of W.

An outcome is the status code; `200+`/`200-` say whether a list (feed, search, conflicts)
carries the target; a batch's is its one item's status. `x|y` is `x` in scope mode
(`--worker-search scope`), `y` in `all` mode. Requests never change what later rows read:
writes are stale (409 when allowed), and the rows that remove something come last.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from PIL import Image

from server.auth import revoke_device, set_device
from server.db.store import open_store
from server.embedded import EmbeddedServer, start_server
from tests.support.api import ServerApi, new_id
from tests.support.postgres import PostgresCluster
from tests.support.tus import TUS, create_upload, file_metadata, upload_whole

CALLERS = ("admin", "holder", "stranger", "lost", "revoked", "anonymous")

#: (method, path) → {target kind: outcomes of CALLERS}. Written in the order the test runs it.
EXPECTED: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {
    ("GET", "/healthz"): {"none": ("200", "200", "200", "200", "200", "200")},
    ("GET", "/metrics"): {"none": ("200", "403", "403", "403", "401", "401")},
    ("GET", "/v1/me"): {"none": ("200", "200", "200", "200", "401", "401")},
    ("OPTIONS", "/v1/uploads"): {"none": ("204", "204", "204", "204", "204", "204")},
    ("GET", "/v1/changes"): {
        "work order": ("200+", "200+", "200-", "200-", "401", "401"),
        "attachment": ("200+", "200+", "200-", "200-", "401", "401"),
    },
    ("GET", "/v1/records"): {
        "work order": ("200+", "200+", "200-|200+", "200-|200+", "401", "401"),
    },
    ("GET", "/v1/records/{entity_id}"): {
        "work order": ("200", "200", "404|200", "404|200", "401", "401"),
    },
    ("GET", "/v1/attachments/{attachment_id}"): {
        "attachment": ("200", "200", "404|200", "404|200", "401", "401"),
    },
    ("GET", "/v1/attachments/{attachment_id}/thumbnail"): {
        "attachment": ("200", "200", "404|200", "404|200", "401", "401"),
    },
    ("GET", "/v1/conflicts"): {"conflict": ("200+", "200+", "200-", "200-", "401", "401")},
    ("GET", "/v1/conflicts/{conflict_id}"): {
        "conflict": ("200", "200", "404", "404", "401", "401"),
    },
    ("HEAD", "/v1/uploads/{upload_id}"): {"upload": ("404", "200", "404", "404", "401", "401")},
    ("PATCH", "/v1/uploads/{upload_id}"): {
        "upload": ("404", "409", "404", "404", "401", "401"),
    },
    ("POST", "/v1/mutations"): {
        "work order": ("409", "409", "404|409", "409", "401", "401"),
    },
    ("POST", "/v1/mutations/batch"): {
        "work order": ("409", "409", "404|409", "409", "401", "401"),
    },
    ("POST", "/v1/conflicts"): {"conflict": ("201", "201", "404|201", "201", "401", "401")},
    ("POST", "/v1/uploads"): {"upload": ("201", "201", "404|201", "201", "401", "401")},
    ("POST", "/v1/conflicts/{conflict_id}/resolve"): {
        "conflict": ("409", "403", "403", "403", "401", "401"),
    },
    ("POST", "/v1/pins/{entity_id}"): {
        "pin": ("200", "200", "404|200", "404|200", "401", "401"),
    },
    ("DELETE", "/v1/pins/{entity_id}"): {
        "pin": ("200", "200", "404|200", "404|200", "401", "401"),
    },
    ("POST", "/v1/conflicts/{conflict_id}/dismiss"): {
        "conflict": ("200", "403", "403", "403", "401", "401"),
    },
    ("DELETE", "/v1/uploads/{upload_id}"): {
        "upload": ("404", "204", "404", "404", "401", "401"),
    },
    ("DELETE", "/v1/attachments/{attachment_id}"): {
        "attachment": ("200", "200", "404|200", "200", "401", "401"),
    },
}

KINDS = ("none", "work order", "attachment", "upload", "conflict", "pin")


def jpeg() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 120, 60)).save(out, "JPEG")
    return out.getvalue()


@dataclass
class World:
    """One server, seeded once: the callers and the targets."""

    server: EmbeddedServer
    callers: dict[str, httpx.Client]
    order: dict[str, Any]
    attachment: str
    upload: str
    conflict: int
    word: str
    closers: list[ServerApi] = field(default_factory=list)


def _seed(server: EmbeddedServer) -> World:
    url = server.settings.db_url
    apis = {
        "admin": ServerApi(server.base_url, server.add_device("m-office", "admin")),
        "holder": ServerApi(server.base_url, server.add_device("m-ana", team="north")),
        "stranger": ServerApi(server.base_url, server.add_device("m-eve", team="east")),
        "lost": ServerApi(server.base_url, server.add_device("m-lou", team="north")),
        "revoked": ServerApi(server.base_url, server.add_device("m-rex", team="north")),
    }
    office, holder = apis["admin"], apis["holder"]
    word = uuid.uuid4().hex[:12]
    order = office.create(title=f"matrix pump {word}", team="north")
    assert office.update(order["id"], 1, notes="version two").status_code == 200
    order = office.client.get(f"/v1/records/{order['id']}").json()["record"]
    _, sent = upload_whole(office.client, order["id"], jpeg())
    data = b"half a file"
    created = create_upload(holder.client, len(data), file_metadata(order["id"], data))
    assert created.status_code == 201, created.text
    raised = holder.client.post(
        "/v1/conflicts",
        json={"entity_id": order["id"], "base_version": 1, "mine": {"title": "mine"}},
        headers={"Idempotency-Key": new_id()},
    )
    assert raised.status_code == 201, raised.text
    apis["lost"].pull(None, 100)  # it held W (version 2) …
    store = open_store(url)
    try:
        assert set_device(store, "m-lou", team="south") is not None  # … and lost it
        assert revoke_device(store, "m-rex")
    finally:
        store.close()
    callers = {name: api.client for name, api in apis.items()}
    callers["anonymous"] = httpx.Client(base_url=server.base_url, timeout=30.0)
    return World(
        server,
        callers,
        order,
        sent["attachment_id"],
        created.headers["Location"].rsplit("/", 1)[1],
        int(raised.json()["conflict"]["id"]),
        word,
        list(apis.values()),
    )


@pytest.fixture(scope="module", params=["sqlite-scope", "sqlite-all", "postgres-scope",
                                        "postgres-all"])  # fmt: skip
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, World]]:
    backend, mode = str(request.param).split("-")
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('matrix') / 'server.sqlite3'}"
    else:
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        url = cluster.create_database(f"matrix_{mode}_{uuid.uuid4().hex[:8]}")
    with start_server(url, worker_search=mode, rate_limit_per_second=0) as server:
        seeded = _seed(server)
        yield mode, seeded
        seeded.callers["anonymous"].close()
        for api in seeded.closers:
            api.close()


def _listed(response: httpx.Response, found: Callable[[dict[str, Any]], bool]) -> str:
    if response.status_code != 200:
        return str(response.status_code)
    return "200+" if found(response.json()) else "200-"


def _stale_update(world: World) -> dict[str, Any]:
    return {"entity_id": world.order["id"], "op": "update", "base_version": 1,
            "fields": {"notes": "stale"}}  # fmt: skip


def _feed(world: World, kind: str) -> Callable[[dict[str, Any]], bool]:
    def found(page: dict[str, Any]) -> bool:
        mine = [c for c in page["changes"] if c["id"] == world.order["id"] and "title" in c]
        if kind == "attachment":
            return any(world.attachment in {a["id"] for a in c.get("attachments", [])}
                       for c in mine)  # fmt: skip
        return bool(mine)

    return found


def _request(world: World, client: httpx.Client, method: str, path: str, kind: str) -> str:
    """Send the operation about the target of `kind`; its outcome as the table writes it."""
    w, key = world, {"Idempotency-Key": new_id()}
    order_id = w.order["id"]
    if path == "/v1/changes":
        return _listed(client.get(path, params={"limit": 1000}), _feed(w, kind))
    if path == "/v1/records":
        return _listed(
            client.get(path, params={"q": w.word}),
            lambda body: order_id in {r["id"] for r in body["records"]},
        )
    if path == "/v1/conflicts" and method == "GET":
        return _listed(
            client.get(path), lambda body: w.conflict in {c["id"] for c in body["conflicts"]}
        )
    if path == "/v1/mutations":
        return str(client.post(path, json=_stale_update(w), headers=key).status_code)
    if path == "/v1/mutations/batch":
        answer = client.post(path, json={"mutations": [{"idempotency_key": new_id(),
                                                         **_stale_update(w)}]})  # fmt: skip
        if answer.status_code != 200:
            return str(answer.status_code)
        return str(answer.json()["results"][0]["status"])
    if path == "/v1/conflicts" and method == "POST":
        body = {"entity_id": order_id, "base_version": 1, "mine": {"notes": "review"}}
        return str(client.post(path, json=body, headers=key).status_code)
    if path == "/v1/uploads" and method == "POST":
        data = f"a file about {kind}".encode()
        return str(create_upload(client, len(data), file_metadata(order_id, data)).status_code)
    target = {
        "{entity_id}": order_id,
        "{attachment_id}": w.attachment,
        "{upload_id}": w.upload,
        "{conflict_id}": str(w.conflict),
    }
    url = path
    for name, value in target.items():
        url = url.replace(name, value)
    headers: dict[str, str] = dict(key) if method in ("POST", "DELETE") else {}
    if "/v1/uploads" in path:
        headers.update(TUS)
    content: bytes | None = None
    json_body: Any = None
    if method == "PATCH":
        headers.update({"Upload-Offset": "5", "Content-Type": "application/offset+octet-stream"})
        content = b"more"
    if path.endswith("/resolve"):
        json_body = {"fields": {"notes": "merged"}, "base_version": 1}
    answer = client.request(method, url, headers=headers, content=content, json=json_body)
    return str(answer.status_code)


def _expected(cell: str, mode: str) -> str:
    scope, _, everyone = cell.partition("|")
    return everyone if mode == "all" and everyone else scope


def test_every_operation_has_a_row(world: tuple[str, World]) -> None:
    _, seeded = world
    document = httpx.get(f"{seeded.server.base_url}/openapi.json").json()
    operations = {
        (method.upper(), path)
        for path, item in document["paths"].items()
        for method in item
        if method in ("get", "head", "post", "put", "patch", "delete", "options")
    }
    assert operations == set(EXPECTED), "each operation needs its row in EXPECTED"
    for row in EXPECTED.values():
        assert set(row) <= set(KINDS)
        assert all(len(outcomes) == len(CALLERS) for outcomes in row.values())


def test_the_matrix(world: tuple[str, World]) -> None:
    mode, seeded = world
    wrong = []
    for (method, path), row in EXPECTED.items():
        for kind, outcomes in row.items():
            for caller, cell in zip(CALLERS, outcomes, strict=True):
                got = _request(seeded, seeded.callers[caller], method, path, kind)
                if got != _expected(cell, mode):
                    wrong.append(f"{method} {path} [{kind}] {caller}: {got}, not {cell}")
    assert wrong == []
