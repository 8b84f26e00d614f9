"""Text a client can send that JSON or PostgreSQL cannot carry back: NUL, a lone surrogate, NaN.

Each used to turn a request into a 500 (the whole batch with it). Checked on SQLite and on
PostgreSQL, where a NUL cannot be stored at all.
"""

from __future__ import annotations

import json

from tests.support.api import ServerApi, create_body, new_id


def raw_post(api: ServerApi, path: str, text: str, **headers: str) -> tuple[int, object]:
    """POST a JSON text as written (``\\ud800`` and ``NaN`` are what json.dumps would refuse)."""
    response = api.client.post(
        path, content=text.encode(), headers={"Content-Type": "application/json", **headers}
    )
    return response.status_code, response.json()


def check_unrepresentable_input_is_refused_not_a_crash(api: ServerApi) -> None:
    good = create_body()
    items = [
        json.dumps({"idempotency_key": "good", **good}),
        json.dumps({"idempotency_key": "a\u0000b", **create_body()}),
        '{"idempotency_key": "\\ud800", ' + json.dumps(create_body())[1:],
        '{"idempotency_key": NaN, ' + json.dumps(create_body())[1:],
    ]
    status, body = raw_post(api, "/v1/mutations/batch", '{"mutations": [' + ", ".join(items) + "]}")
    assert status == 200, body
    assert isinstance(body, dict)
    results = body["results"]
    assert [r["status"] for r in results] == [201, 400, 400, 400]
    assert [r["idempotency_key"] for r in results] == ["good", "a\u0000b", None, None]
    assert [r["body"]["error"] for r in results[1:]] == ["invalid_idempotency_key"] * 2 + [
        "missing_idempotency_key"
    ]
    assert api.client.get(f"/v1/records/{good['entity_id']}").status_code == 200

    single = json.dumps(create_body())
    for text in (
        single.replace(f'"{json.loads(single)["entity_id"]}"', '"\\ud800"'),
        single[:-1] + ', "extra": NaN}',
    ):
        status, body = raw_post(api, "/v1/mutations", text, **{"Idempotency-Key": new_id()})
        assert status == 422, (text, body)
        assert isinstance(body, dict)
        assert body["error"] == "invalid_payload"

    record = api.create()
    status, body = raw_post(
        api,
        "/v1/conflicts",
        json.dumps({"entity_id": record["id"], "mine": {"title": "x"}, "note": "bad\u0000note"}),
        **{"Idempotency-Key": new_id()},
    )
    assert status == 422, body
