"""Authentication, per-device key isolation, and tokens never stored or logged in clear."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from server.auth import revoke_device
from server.embedded import EmbeddedServer, provision_device
from tests.support.api import ServerApi, create_body
from tests.support.serve import ServerProcess


@pytest.mark.parametrize(
    "authorization", [None, "Bearer", "Bearer fst_wrong", "Basic dXNlcjpwYXNz", "fst_x"]
)
def test_missing_or_invalid_token_is_401(server: EmbeddedServer, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    for method, path in [("GET", "/v1/changes"), ("POST", "/v1/mutations"),
                         ("GET", "/v1/conflicts"), ("GET", "/metrics")]:  # fmt: skip
        response = httpx.request(method, server.base_url + path, headers=headers)
        assert response.status_code == 401, path
        assert response.json() == {"error": "unauthorized"}


def test_health_needs_no_token(server: EmbeddedServer) -> None:
    response = httpx.get(server.base_url + "/healthz")
    assert (response.status_code, response.json()) == (200, {"status": "ok"})


def test_revoked_token_is_401(server: EmbeddedServer, api: ServerApi) -> None:
    assert api.client.get("/v1/changes").status_code == 200
    assert revoke_device(server.store, "phone-1")
    assert api.client.get("/v1/changes").status_code == 401


def test_keys_are_scoped_per_device(make_api: object) -> None:
    one = make_api("phone-1")  # type: ignore[operator]
    two = make_api("phone-2")  # type: ignore[operator]
    body = create_body()
    first = one.mutate(body, key="same-key")
    assert first.status_code == 201
    # Another device's identical key is a different request: it never sees phone-1's answer.
    second = two.mutate(body, key="same-key")
    assert second.status_code == 409
    assert "Idempotent-Replayed" not in second.headers
    assert second.json()["error"] == "version_conflict"
    three = make_api("phone-3")  # type: ignore[operator]
    assert three.mutate(create_body(), key="same-key").status_code == 201


def test_metrics_need_an_admin(api: ServerApi, admin: ServerApi) -> None:
    assert api.client.get("/metrics").status_code == 403
    assert admin.client.get("/metrics").status_code == 200


def test_token_never_appears_in_the_database_or_the_logs(tmp_path: Path) -> None:
    path = tmp_path / "server.sqlite3"
    db_url = f"sqlite:///{path}"
    token = provision_device(db_url, "phone-1")
    with ServerProcess(db_url) as process:
        api = ServerApi(process.base_url, token)
        try:
            body = create_body()
            api.mutate(body, key="k1", **{"X-Correlation-ID": "corr-1"})
            api.mutate(body, key="k1", **{"X-Correlation-ID": "corr-2"})
            httpx.get(
                process.base_url + "/v1/changes", headers={"Authorization": f"Bearer {token}x"}
            )
        finally:
            api.close()
        process.wait_for(lambda e: e.get("correlation_id") == "corr-2" and e["msg"] == "request")
    log = "".join(process.lines)
    assert token not in log
    assert token[4:20] not in log
    request_lines = [e for e in process.entries() if e.get("msg") == "request"]
    assert request_lines
    assert all(e.get("correlation_id") for e in request_lines)
    assert {e["device"] for e in request_lines if e["correlation_id"] in ("corr-1", "corr-2")} == {
        "phone-1"
    }
    # One access line per request, ours: uvicorn's own would repeat it without the device.
    first = [e["logger"] for e in process.entries() if e.get("correlation_id") == "corr-1"]
    assert first == ["server.access"]
    with sqlite3.connect(path) as connection:
        dump = "\n".join(connection.iterdump())
    connection.close()
    assert token not in dump
    assert token[4:20] not in dump
