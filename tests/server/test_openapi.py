"""`/openapi.json` tells the truth: every answer, errors included, matches its documented schema,
and numbers beyond what the database can hold are refused with 422 instead of crashing (500)."""

from __future__ import annotations

from typing import Any

import httpx
import jsonschema_rs
import pytest

from server.embedded import start_server
from tests.support.api import ServerApi, create_body, new_id

BEYOND_SQLITE = 2**63  # one more than SQLite's largest INTEGER


class Spec:
    """The server's published schema, checking answers against the operation they came from."""

    def __init__(
        self, document: dict[str, Any], validators: dict[tuple[str, str, str], Any] | None = None
    ) -> None:
        self.document = document
        self.checked: set[tuple[str, str, int]] = set()
        self._validators = {} if validators is None else validators  # of `document`

    @classmethod
    def served_by(cls, client: httpx.Client) -> Spec:
        return cls(client.get("/openapi.json").json())

    def check(self, template: str, response: httpx.Response) -> None:
        method = response.request.method.lower()
        documented = self.document["paths"][template][method]["responses"]
        status = str(response.status_code)
        assert status in documented, f"{method} {template}: {status} undocumented"
        self.checked.add((method, template, response.status_code))
        content = documented[status].get("content")
        if response.status_code == 304 or content is None:  # 304, 204, HEAD: no body
            assert content is None
            assert not response.content
            self.check_headers(documented[status], response)
            return
        media_type = response.headers["content-type"].split(";")[0]
        [(documented_type, body)] = content.items()
        assert documented_type.split(";")[0] in (media_type, "*/*")
        if media_type != "application/json":
            return
        validator = self._validators.get((method, template, status))
        if validator is None:
            schema = {**body["schema"], "components": self.document["components"]}
            validator = jsonschema_rs.validator_for(schema)
            self._validators[(method, template, status)] = validator
        errors = [error.message for error in validator.iter_errors(response.json())]
        assert not errors, f"{method} {template} {status}: {response.text}: {errors}"

    def check_headers(self, documented: dict[str, Any], response: httpx.Response) -> None:
        for name, header in documented.get("headers", {}).items():
            if name in response.headers:
                check = jsonschema_rs.validator_for(header["schema"])
                assert check.is_valid(response.headers[name]), (name, response.headers[name])


_documents: list[dict[str, Any]] = []
_validators: dict[tuple[str, str, str], Any] = {}


@pytest.fixture
def spec(api: ServerApi) -> Spec:
    """The schema the first server of this process served (every server here runs the same
    code, and generating it costs each 0.3 s), with no answer checked yet."""
    if not _documents:
        _documents.append(api.client.get("/openapi.json").json())
    return Spec(_documents[0], _validators)


def raise_conflict(api: ServerApi, record: dict[str, Any], key: str | None = None) -> Any:
    body = {"entity_id": record["id"], "base_version": record["version"],
            "mine": {"status": "cancelled"}, "note": None}  # fmt: skip
    return api.client.post("/v1/conflicts", json=body, headers={"Idempotency-Key": key or new_id()})


@pytest.mark.parametrize("conflict_id", [0, -1, BEYOND_SQLITE, 2**64, 10**30])
def test_conflict_ids_out_of_range_are_invalid_not_a_crash(
    admin: ServerApi, conflict_id: int
) -> None:
    for response in (
        admin.client.get(f"/v1/conflicts/{conflict_id}"),
        admin.client.post(f"/v1/conflicts/{conflict_id}/dismiss"),
        admin.client.post(
            f"/v1/conflicts/{conflict_id}/resolve", json={"fields": {}, "base_version": 1}
        ),
    ):
        assert response.status_code == 422, response.text
        body = response.json()
        assert body["error"] == "invalid_payload"
        assert [issue["loc"] for issue in body["detail"]] == [["path", "conflict_id"]]


def test_the_largest_conflict_id_is_merely_not_found(admin: ServerApi) -> None:
    largest = BEYOND_SQLITE - 1
    response = admin.client.get(f"/v1/conflicts/{largest}")
    assert (response.status_code, response.json()) == (404, {"error": "not_found"})
    assert admin.client.post(f"/v1/conflicts/{largest}/dismiss").status_code == 404


def test_since_beyond_the_sequence_range_is_invalid_not_a_crash(api: ServerApi) -> None:
    too_big = api.client.get("/v1/changes", params={"since": str(BEYOND_SQLITE)})
    assert too_big.status_code == 422
    assert too_big.json() == {"error": "invalid_payload", "detail": "since: not a change token"}
    largest = api.client.get("/v1/changes", params={"since": str(BEYOND_SQLITE - 1)})
    assert largest.status_code == 200
    assert largest.json() == {"changes": [], "next": str(BEYOND_SQLITE - 1), "has_more": False}


@pytest.mark.parametrize("base_version", [2**31, BEYOND_SQLITE])
def test_conflict_base_version_beyond_a_version_column_is_invalid_not_a_crash(
    api: ServerApi, base_version: int
) -> None:
    record = api.create()
    response = raise_conflict(api, {**record, "version": base_version})
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body", "base_version"]
    assert raise_conflict(api, {**record, "version": 2**31 - 1}).status_code == 201


def test_mutation_answers_match_the_documented_schema(api: ServerApi, spec: Spec) -> None:
    mutations = "/v1/mutations"
    created = api.mutate(create_body(), key="create")
    spec.check(mutations, created)
    record = created.json()["record"]
    spec.check(mutations, api.update(record["id"], 1, title="Seal replaced"))
    spec.check(mutations, api.update(record["id"], 1, title="stale"))  # 409 version_conflict
    spec.check(mutations, api.mutate(create_body(record["id"])))  # 409 for an existing id
    spec.check(mutations, api.update(new_id(), 1, title="nowhere"))  # 404
    spec.check(mutations, api.update(record["id"], 2, colour="red"))  # 422 with a list
    spec.check(mutations, api.update(record["id"], 2))  # 422 with a sentence
    spec.check(mutations, api.mutate(create_body(), key="create"))  # 422 key reused
    spec.check(mutations, api.client.post(mutations, json=create_body()))  # 400 no key
    spec.check(mutations, api.mutate(create_body(), key="k" * 256))  # 400 key too long
    unreadable = api.client.post(
        mutations,
        content=b"\xff\xfe{",
        headers={"Idempotency-Key": new_id(), "Content-Type": "application/json"},
    )
    assert unreadable.json() == {"error": "bad_request"}
    spec.check(mutations, unreadable)
    spec.check(mutations, api.mutate(create_body(notes="x" * 70_000)))  # 413
    batch = api.batch([{**create_body(), "idempotency_key": new_id()}, {"idempotency_key": 7}])
    spec.check("/v1/mutations/batch", batch)
    assert [result["status"] for result in batch.json()["results"]] == [201, 400]
    statuses = {status for method, template, status in spec.checked if template == mutations}
    assert statuses == {200, 201, 400, 404, 409, 413, 422}


def test_record_and_feed_answers_match_the_documented_schema(api: ServerApi, spec: Spec) -> None:
    record = api.create()
    path = "/v1/records/{entity_id}"
    spec.check(path, api.client.get(f"/v1/records/{record['id']}"))
    spec.check(
        path, api.client.get(f"/v1/records/{record['id']}", headers={"If-None-Match": '"1"'})
    )
    spec.check(path, api.client.get(f"/v1/records/{new_id()}"))
    spec.check("/v1/changes", api.client.get("/v1/changes"))
    spec.check("/v1/changes", api.client.get("/v1/changes", params={"since": "abc"}))
    spec.check("/v1/changes", api.client.get("/v1/changes", params={"limit": 0}))
    anonymous = httpx.get(f"{api.base_url}/v1/changes")
    spec.check("/v1/changes", anonymous)
    assert anonymous.status_code == 401
    spec.check("/metrics", api.client.get("/metrics"))  # 403 for a worker
    assert {status for *_, status in spec.checked} == {200, 304, 401, 403, 404, 422}


def test_review_queue_answers_match_the_documented_schema(
    api: ServerApi, admin: ServerApi, spec: Spec
) -> None:
    record = api.create()
    one, resolve, dismiss = (
        "/v1/conflicts/{conflict_id}",
        "/v1/conflicts/{conflict_id}/resolve",
        "/v1/conflicts/{conflict_id}/dismiss",
    )
    raised = raise_conflict(api, record)
    spec.check("/v1/conflicts", raised)
    spec.check("/v1/conflicts", raise_conflict(api, {**record, "id": "not-a-uuid"}))  # 422
    spec.check("/v1/conflicts", raise_conflict(api, {**record, "id": new_id()}))  # 404
    spec.check("/v1/conflicts", api.client.get("/v1/conflicts", params={"status": "bogus"}))
    conflict_id = raised.json()["conflict"]["id"]
    spec.check("/v1/conflicts", admin.client.get("/v1/conflicts"))
    spec.check(one, api.client.get(f"/v1/conflicts/{conflict_id}"))
    spec.check(one, api.client.get(f"/v1/conflicts/{BEYOND_SQLITE}"))  # 422
    merged = {"fields": {"status": "done"}, "base_version": 1}
    spec.check(resolve, api.client.post(f"/v1/conflicts/{conflict_id}/resolve", json=merged))
    api.update(record["id"], 1, title="moved meanwhile")
    moved = admin.client.post(f"/v1/conflicts/{conflict_id}/resolve", json=merged)
    assert moved.json()["error"] == "version_conflict"
    spec.check(resolve, moved)
    resolved = admin.client.post(
        f"/v1/conflicts/{conflict_id}/resolve", json={**merged, "base_version": 2}
    )
    spec.check(resolve, resolved)
    spec.check(one, admin.client.get(f"/v1/conflicts/{conflict_id}"))  # with its audit trail
    not_open = admin.client.post(f"/v1/conflicts/{conflict_id}/dismiss")
    assert not_open.json()["error"] == "conflict_not_open"
    spec.check(dismiss, not_open)
    other = raise_conflict(api, api.create()).json()["conflict"]["id"]
    spec.check(dismiss, admin.client.post(f"/v1/conflicts/{other}/dismiss"))
    spec.check(dismiss, admin.client.post("/v1/conflicts/999/dismiss"))  # 404
    spec.check("/metrics", admin.client.get("/metrics"))
    assert {status for *_, status in spec.checked} == {200, 201, 403, 404, 409, 422}


def test_rate_limited_answers_match_the_documented_schema(sqlite_url: str) -> None:
    with start_server(sqlite_url, rate_limit_burst=2, rate_limit_per_second=0.01) as limited:
        api = ServerApi(limited.base_url, limited.add_device("runaway"))
        try:
            spec = Spec.served_by(api.client)
            answers = [api.client.get("/v1/changes") for _ in range(3)]
            assert [answer.status_code for answer in answers] == [200, 200, 429]
            for answer in answers:
                spec.check("/v1/changes", answer)
        finally:
            api.close()


def test_since_with_non_ascii_digits_is_invalid_not_a_crash(api: ServerApi) -> None:
    # Found by schemathesis: "²".isdigit() is true, int("²") raises.
    for token in ("²", "٣", "1²"):
        reply = api.client.get("/v1/changes", params={"since": token})
        assert reply.status_code == 422, token
        assert reply.json() == {"error": "invalid_payload", "detail": "since: not a change token"}


def validator(spec: Spec, schema: dict[str, Any]) -> Any:
    document = {**schema, "components": spec.document["components"]}
    return jsonschema_rs.validator_for(document, validate_formats=True)


def operation(spec: Spec, method: str, path: str) -> dict[str, Any]:
    found: dict[str, Any] = spec.document["paths"][path][method]
    return found


def parameter(spec: Spec, method: str, path: str, name: str) -> dict[str, Any]:
    [found] = [p for p in operation(spec, method, path)["parameters"] if p["name"] == name]
    return found


def body_schema(spec: Spec, method: str, path: str) -> dict[str, Any]:
    content = operation(spec, method, path)["requestBody"]["content"]["application/json"]
    schema: dict[str, Any] = content["schema"]
    return schema


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("/v1/conflicts", "GET, POST"),
        ("/v1/conflicts/1", "GET"),
        ("/v1/conflicts/1/resolve", "POST"),
        ("/v1/mutations", "POST"),
        ("/healthz", "GET"),
    ],
)
def test_a_405_names_every_method_the_path_serves(
    api: ServerApi, spec: Spec, path: str, allowed: str
) -> None:
    template = path.replace("/1", "/{conflict_id}")
    documented = ", ".join(sorted(method.upper() for method in spec.document["paths"][template]))
    assert documented == allowed
    for method in ("OPTIONS", "PUT", "DELETE", "PATCH"):
        refused = api.client.request(method, path)
        assert refused.status_code == 405, (method, path)
        assert refused.headers["Allow"] == allowed
        assert refused.json() == {"error": "method_not_allowed"}


@pytest.mark.parametrize("path", ["/v1/mutations", "/v1/conflicts"])
def test_the_idempotency_key_is_documented_as_the_server_checks_it(
    api: ServerApi, spec: Spec, path: str
) -> None:
    header = parameter(spec, "post", path, "Idempotency-Key")
    assert header["required"] is True
    check = validator(spec, header["schema"])
    record = api.create()
    body = (
        create_body()
        if path == "/v1/mutations"
        else {"entity_id": record["id"], "base_version": 1, "mine": {"status": "done"}}
    )
    for key in ("k", "k" * 255, "k" * 256, "a b", "a\tb", "ÿ", "\xa0"):
        sent = body if path != "/v1/mutations" else {**body, "entity_id": new_id()}
        answer = api.client.post(
            path, json=sent, headers={"Idempotency-Key": key.encode("latin-1")}
        )
        assert answer.status_code != 500, key
        assert check.is_valid(key) == (answer.status_code != 400), (key, answer.text)


def test_the_change_token_is_documented_as_the_server_checks_it(api: ServerApi, spec: Spec) -> None:
    check = validator(spec, parameter(spec, "get", "/v1/changes", "since")["schema"])
    tokens = ["", "0", "007", "0" * 19, "0" * 20, str(BEYOND_SQLITE - 1), str(BEYOND_SQLITE),
              "9" * 19, str(BEYOND_SQLITE - 1)[:-1] + "6", "-1", "1²", " 1", "1e3"]  # fmt: skip
    for token in tokens:
        answer = api.client.get("/v1/changes", params={"since": token})
        assert answer.status_code in (200, 422), token
        assert check.is_valid(token) == (answer.status_code == 200), token
    status = parameter(spec, "get", "/v1/conflicts", "status")["schema"]
    assert status == {"type": "string", "enum": ["open", "resolved", "dismissed"]}


def test_mutation_bodies_are_documented_as_the_server_checks_them(
    api: ServerApi, spec: Spec
) -> None:
    """Each body is refused by the document exactly when the server refuses it (422): pydantic's
    lax reading of JSON (`"yes"` as true, `0` as a date, `true` as version 1) is gone."""
    check = validator(spec, body_schema(spec, "post", "/v1/mutations"))
    record = api.create()

    def update(base_version: Any = 1, **fields: Any) -> dict[str, Any]:
        return {"entity_id": record["id"], "op": "update", "base_version": base_version,
                "fields": fields}  # fmt: skip

    bodies = [
        create_body(), create_body(due_date="2030-02-28"), create_body(deleted=True),
        create_body(deleted="yes"), create_body(deleted=1), create_body(due_date=0),
        create_body(due_date="2030-02-28T00:00:00"), create_body(due_date="2030-02-30"),
        create_body(title="   "), create_body(title="a\x00b"), create_body(title="tab\there"),
        create_body(priority="urgent"), create_body(colour="red"),
        {**create_body(), "base_version": 1}, {**create_body(), "extra": 1},
        create_body(new_id().upper()), create_body("{" + new_id() + "}"),
        create_body(new_id().replace("-", "")), create_body("urn:uuid:" + new_id()),
        update(), update(title="x"), update(1.0, title="x"), update(True, title="x"),
        update("1", title="x"), update(0, title="x"), update(site=None), update(title=None),
        {"entity_id": record["id"], "op": "delete", "base_version": 1},
        {"entity_id": record["id"], "op": "delete", "base_version": 1, "fields": {"deleted": 1}},
        {"entity_id": record["id"], "op": "delete", "base_version": 1, "fields": {"title": "x"}},
        {"entity_id": record["id"], "op": "merge", "base_version": 1, "fields": {}},
    ]  # fmt: skip
    for body in bodies:
        answer = api.mutate(body)
        assert answer.status_code in (200, 201, 404, 409, 422), (body, answer.text)
        assert check.is_valid(body) == (answer.status_code != 422), (body, answer.text)


def test_review_bodies_are_documented_as_the_server_checks_them(
    api: ServerApi, admin: ServerApi, spec: Spec
) -> None:
    raising = validator(spec, body_schema(spec, "post", "/v1/conflicts"))
    record = api.create()
    bodies = [
        {"entity_id": record["id"], "mine": {}},
        {"entity_id": record["id"], "base_version": 1, "mine": {"status": "done"}, "note": "n"},
        {"entity_id": record["id"], "base_version": True, "mine": {}},
        {"entity_id": record["id"], "base_version": 2**31, "mine": {}},
        {"entity_id": record["id"], "mine": {"deleted": "no"}},
        {"entity_id": record["id"], "mine": {}, "note": "bell\x07"},
        {"entity_id": record["id"].replace("-", ""), "mine": {}},
    ]
    for body in bodies:
        answer = raise_conflict_body(api, body)
        assert answer.status_code in (201, 422), (body, answer.text)
        assert raising.is_valid(body) == (answer.status_code == 201), (body, answer.text)
    resolving = validator(spec, body_schema(spec, "post", "/v1/conflicts/{conflict_id}/resolve"))
    conflict_id = raise_conflict(api, record).json()["conflict"]["id"]
    path = f"/v1/conflicts/{conflict_id}/resolve"
    for body in (
        {"fields": {"status": "done"}, "base_version": "1"},
        {"fields": {"due_date": 20300101}, "base_version": 1},
        {"fields": {"status": "done"}, "base_version": 1.0},
    ):
        answer = admin.client.post(path, json=body)
        assert answer.status_code in (200, 422), (body, answer.text)
        assert resolving.is_valid(body) == (answer.status_code == 200), (body, answer.text)


def raise_conflict_body(api: ServerApi, body: dict[str, Any]) -> httpx.Response:
    return api.client.post("/v1/conflicts", json=body, headers={"Idempotency-Key": new_id()})


def evaluate(expression: Any, response: httpx.Response) -> Any:
    """The runtime expressions the document's links use: `$response.body#/json/pointer`."""
    if isinstance(expression, dict):
        return {name: evaluate(value, response) for name, value in expression.items()}
    if not (isinstance(expression, str) and expression.startswith("$response.body#/")):
        return expression
    value = response.json()
    for step in expression.removeprefix("$response.body#/").split("/"):
        value = value[int(step)] if isinstance(value, list) else value[step]
    return value


def follow(
    spec: Spec, client: httpx.Client, link: dict[str, Any], response: httpx.Response
) -> httpx.Response:
    [(path, method)] = [
        (path, method)
        for path, operations in spec.document["paths"].items()
        for method, candidate in operations.items()
        if candidate["operationId"] == link["operationId"]
    ]
    for name, expression in link.get("parameters", {}).items():
        path = path.replace("{" + name + "}", str(evaluate(expression, response)))
    body = evaluate(link.get("requestBody"), response)
    headers = {"Idempotency-Key": new_id()} if method == "post" else {}
    return client.request(method.upper(), path, json=body, headers=headers)


def test_links_lead_from_what_was_created_to_what_takes_its_id(
    api: ServerApi, admin: ServerApi, spec: Spec
) -> None:
    """What schemathesis's stateful phase does, by hand: each link resolves against a real
    answer and the operation it names accepts what it carries."""
    created = api.mutate(create_body())
    links = operation(spec, "post", "/v1/mutations")["responses"]["201"]["links"]
    assert set(links) == {"GetRecord", "RaiseConflict"}
    assert follow(spec, api.client, links["GetRecord"], created).json() == created.json()
    raised = follow(spec, api.client, links["RaiseConflict"], created)
    assert raised.status_code == 422  # the link gives entity and version, the client its values
    body = {**evaluate(links["RaiseConflict"]["requestBody"], created), "mine": {"site": "B"}}
    raised = raise_conflict_body(api, body)
    assert raised.status_code == 201, raised.text
    conflict_links = operation(spec, "post", "/v1/conflicts")["responses"]["201"]["links"]
    assert set(conflict_links) == {"GetConflict", "ResolveConflict", "DismissConflict"}
    read = follow(spec, admin.client, conflict_links["GetConflict"], raised)
    assert read.json()["conflict"]["id"] == raised.json()["conflict"]["id"]
    resolved = follow(spec, admin.client, conflict_links["ResolveConflict"], raised)
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["record"]["site"] == "B"
    again = raise_conflict_body(api, {**body, "base_version": 2})
    dismissed = follow(spec, admin.client, conflict_links["DismissConflict"], again)
    assert dismissed.json()["conflict"]["status"] == "dismissed"
    page = api.client.get("/v1/changes")
    [changed_link] = operation(spec, "get", "/v1/changes")["responses"]["200"]["links"].values()
    updated = follow(spec, api.client, changed_link, page)
    assert updated.status_code == 200, updated.text
    assert updated.json()["record"]["status"] == "in_progress"


@pytest.mark.parametrize("written", [" 1", "+1", "1_0", "1.0", "١"])
def test_a_number_in_a_url_is_written_in_digits(
    api: ServerApi, admin: ServerApi, written: str
) -> None:
    """The document says integer; pydantic alone would also read these as 1 (or 10)."""
    refused = api.client.get("/v1/changes", params={"limit": written})
    assert refused.status_code == 422
    assert [issue["loc"] for issue in refused.json()["detail"]] == [["query", "limit"]]
    refused = admin.client.get(f"/v1/conflicts/{written}")
    assert refused.status_code == 422
    assert [issue["loc"] for issue in refused.json()["detail"]] == [["path", "conflict_id"]]
    assert api.client.get("/v1/changes", params={"limit": "007"}).status_code == 200
    assert admin.client.get("/v1/conflicts/007").status_code == 404


def test_upload_answers_match_the_documented_schema(api: ServerApi, spec: Spec) -> None:
    from tests.support.tus import TUS, chunk_checksum, create_upload, file_metadata, patch

    record = api.create()
    data = b"x" * 1000
    uploads, one = "/v1/uploads", "/v1/uploads/{upload_id}"
    spec.check(uploads, api.client.options(uploads))
    created = create_upload(api.client, len(data), file_metadata(record["id"], data))
    spec.check(uploads, created)
    location = created.headers["Location"]
    spec.check(uploads, create_upload(api.client, 10, file_metadata(new_id(), data)))  # 404
    spec.check(uploads, create_upload(api.client, 1, {"filename": "a"}))  # 422
    spec.check(uploads, create_upload(api.client, 2**30, file_metadata(record["id"], data)))
    program = file_metadata(record["id"], b"x", content_type="application/x-sh")
    spec.check(uploads, create_upload(api.client, 1, program))  # 415
    spec.check(uploads, api.client.post(uploads))  # 412
    spec.check(one, api.client.head(location, headers=TUS))
    spec.check(one, api.client.head(f"/v1/uploads/{'0' * 32}", headers=TUS))  # 404
    spec.check(one, patch(api.client, location, 0, data[:10]))  # 204
    spec.check(one, patch(api.client, location, 0, data[:10]))  # 409
    bad = {"Upload-Checksum": chunk_checksum(b"other")}
    spec.check(one, patch(api.client, location, 10, data[10:20], **bad))  # 460
    spec.check(one, patch(api.client, location, 10, data[10:20], **{"Upload-Checksum": "md5 x"}))
    spec.check(one, api.client.patch(location, headers={**TUS, "Upload-Offset": "10"}))  # 415
    spec.check(one, patch(api.client, location, 10, data[10:] + b"extra"))  # 413
    spec.check(one, patch(api.client, location, 10, data[10:]))  # complete
    spec.check(one, api.client.delete(location, headers=TUS))  # 409 complete
    other = create_upload(api.client, len(data), file_metadata(record["id"], data))
    spec.check(one, api.client.delete(other.headers["Location"], headers=TUS))  # 204
    [attached] = api.client.get(f"/v1/records/{record['id']}").json()["record"]["attachments"]
    file = "/v1/attachments/{attachment_id}"
    thumbnail = f"{file}/thumbnail"
    spec.check("/v1/records/{entity_id}", api.client.get(f"/v1/records/{record['id']}"))
    url = f"/v1/attachments/{attached['id']}"
    spec.check(file, api.client.get(url))
    spec.check(file, api.client.get(url, headers={"Range": "bytes=0-9"}))
    spec.check(file, api.client.get(url, headers={"If-None-Match": f'"{attached["sha256"]}"'}))
    spec.check(thumbnail, api.client.get(f"{url}/thumbnail"))  # 415: not an image
    spec.check(file, api.client.delete(url, headers={"Idempotency-Key": "remove"}))
    spec.check(file, api.client.delete(url))  # 400
    spec.check(file, api.client.get(url))  # 404
    spec.check("/v1/changes", api.client.get("/v1/changes"))
    statuses = {status for method, template, status in spec.checked}
    assert {200, 201, 204, 206, 304, 400, 404, 409, 412, 413, 415, 422, 460} <= statuses
