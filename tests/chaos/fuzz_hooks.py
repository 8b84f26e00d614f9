"""Schemathesis hooks for `tests/chaos/test_fuzz_server.py` (loaded with `SCHEMATHESIS_HOOKS`).

A client reuses an `Idempotency-Key` only to retry the same request: the server answers a key
sent again with another body `422 idempotency_key_reused`, by contract. No schema can say
"unique", so the generator, which draws keys like "0" again and again, is made to keep that
obligation: a key already sent with another request is swapped for a fresh one. Retries of the
same request keep their key (they must replay), and the key's own rules are still fuzzed.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import schemathesis

_HEADER = "Idempotency-Key"
_first_request: dict[str, str] = {}


def _fingerprint(case: Any) -> str:
    body = json.dumps(case.body, sort_keys=True, default=repr) if case.body is not None else ""
    return f"{case.method} {case.formatted_path} {body}"


@schemathesis.hook
def before_call(context: Any, case: Any, kwargs: dict[str, Any]) -> None:
    sent = (case.headers or {}).get(_HEADER)
    if not isinstance(sent, str):
        return
    key = sent.strip(" \t")  # what the server reads: HTTP drops a value's outer whitespace
    request = _fingerprint(case)
    if _first_request.setdefault(key, request) != request:
        fresh = str(uuid.uuid4())
        case.headers[_HEADER] = fresh
        _first_request[fresh] = request


# A tus chunk (`PATCH /v1/uploads/{id}`, creation-with-upload) is raw bytes, like octet-stream.
schemathesis.serializer.alias("application/offset+octet-stream", "application/octet-stream")
