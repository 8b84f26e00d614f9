"""GET /metrics counts what happened to each device's mutations."""

from __future__ import annotations

from tests.support.api import ServerApi, create_body


def test_counters_by_device(api: ServerApi, admin: ServerApi) -> None:
    body = create_body()
    api.mutate(body, key="a")
    api.mutate(body, key="a")
    api.mutate(create_body(), key="a")
    api.mutate(create_body(body["entity_id"]), key="b")
    api.mutate(create_body(title=""), key="c")
    text = admin.client.get("/metrics").text
    for metric in [
        "fieldsync_mutations_applied_total",
        "fieldsync_idempotent_replays_total",
        "fieldsync_idempotency_key_reused_total",
        "fieldsync_version_conflicts_total",
        "fieldsync_mutations_rejected_total",
    ]:
        assert f'{metric}{{device="phone-1"}} 1' in text, metric
    assert admin.client.get("/metrics").headers["content-type"].startswith("text/plain")
