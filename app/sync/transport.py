"""HTTP to the sync server: an httpx.AsyncClient with keep-alive and explicit timeouts.

Returns `Reply` objects for every HTTP answer (the caller classifies them) and raises only
`TransientError` subclasses, translated from httpx here and nowhere else. The token is read
from a provider on every request and never appears in errors or logs. Uploads go through a
sibling (`ServerClient.bulk`) with a connection pool of its own, so an edit or a pull never
waits for a connection a chunk is being sent on.
"""

from __future__ import annotations

import email.utils
import functools
import logging
import os
import ssl
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import orjson

from app.sync.device_report import STATUS_HEADER
from app.sync.errors import MalformedReplyError, from_httpx, parse_retry_after

__all__ = ["BatchItem", "Reply", "ServerClient", "TransportConfig", "detail_words"]

#: Names this store to the server (server/scope/echoes.py): see `ServerClient.install`.
INSTALL_HEADER = "Fieldsync-Install"

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TransportConfig:
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    write_timeout: float = 30.0
    pool_timeout: float = 5.0
    #: True (system CAs), False (never in production), or a CA bundle path for a private CA.
    verify: bool | str = True
    max_connections: int = 4


@dataclass(frozen=True)
class Reply:
    """One HTTP answer. ``body`` is None when the reply was not a JSON object."""

    status: int
    body: dict[str, Any] | None
    retry_after: float | None = None
    replayed: bool = False
    etag: str | None = None
    raw_error: str | None = None

    @property
    def error(self) -> str | None:
        if self.body is None:
            return None
        value = self.body.get("error")
        return value if isinstance(value, str) else None

    @property
    def detail(self) -> str | None:
        """The server's ``detail`` in words, None when it sent none (see `detail_words`)."""
        return None if self.body is None else detail_words(self.body.get("detail"))


_LOCATIONS = ("body", "query", "path", "header")


def detail_words(detail: Any) -> str | None:
    """A reply's ``detail`` as a person can read it: text as it is; the server's list of
    validation errors (FastAPI's ``{"loc": [...], "msg": ...}`` items) as ``field: message``
    joined by "; ", without the ``input`` they echo; anything else as compact JSON."""
    if detail is None or detail == "" or detail == []:
        return None
    if isinstance(detail, str):
        return detail
    if isinstance(detail, list) and all(
        isinstance(item, dict) and isinstance(item.get("msg"), str) for item in detail
    ):
        return "; ".join(_validation_words(item) for item in detail)
    return orjson.dumps(detail).decode()


def _validation_words(item: dict[str, Any]) -> str:
    where = item.get("loc")
    parts = [part for part in where if isinstance(part, str)] if isinstance(where, list) else []
    if parts and parts[0] in _LOCATIONS:
        parts = parts[1:]
    return f"{'.'.join(parts)}: {item['msg']}" if parts else str(item["msg"])


@dataclass(frozen=True)
class BatchItem:
    idempotency_key: str
    mutation: dict[str, Any]
    correlation_id: str = field(default_factory=lambda: str(uuid.uuid4()))


def _parse_body(response: httpx.Response) -> tuple[dict[str, Any] | None, str | None]:
    if not response.content:
        return None, "empty reply"
    try:
        data = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return None, f"reply is not JSON ({response.headers.get('content-type', 'no type')})"
    if not isinstance(data, dict):
        return None, "reply is not a JSON object"
    return data, None


def _ssl_verify(verify: bool | str) -> bool | ssl.SSLContext:
    """A CA bundle path becomes an SSL context: httpx 0.28 deprecates ``verify=<str>`` (a
    DeprecationWarning on every client, an error under the test suite's warning filter).
    ``True`` is the default trust store, loaded once per process and shared by every client,
    as httpx's docs advise: each client built its own, 30 ms of CPU to read the CA bundle."""
    if isinstance(verify, str):
        return ssl.create_default_context(cafile=verify)
    if verify is True:
        return _default_ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    return verify


@functools.cache
def _default_ssl_context(cert_file: str | None, cert_dir: str | None) -> ssl.SSLContext:
    """What httpx builds for ``verify=True`` (it reads the two variables itself): one per
    value of them, so a bundle named in the environment later is still honoured."""
    return httpx.create_ssl_context()


class ServerClient:
    """The device's view of the server's HTTP API."""

    def __init__(
        self,
        base_url: str,
        token: Callable[[], str],
        config: TransportConfig | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        on_clock_skew: Callable[[float], None] | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._token = token
        #: This store's id, sent with writes and pulls: the feed then leaves out what this
        #: install wrote itself, which it holds from the replies (server/scope/echoes.py).
        self.install: str | None = None
        self.config = config or TransportConfig()
        self._on_clock_skew = on_clock_skew
        self._transport = transport
        self._bulk: ServerClient | None = None
        cfg = self.config
        self._client = httpx.AsyncClient(
            base_url=self.base_url,
            timeout=httpx.Timeout(
                connect=cfg.connect_timeout,
                read=cfg.read_timeout,
                write=cfg.write_timeout,
                pool=cfg.pool_timeout,
            ),
            limits=httpx.Limits(
                max_connections=cfg.max_connections, max_keepalive_connections=cfg.max_connections
            ),
            verify=_ssl_verify(cfg.verify),
            transport=transport,
            follow_redirects=False,
        )

    def bulk(self) -> ServerClient:
        """The client for large bodies (uploads): the same server, token and timeouts, its
        own connections. Made once; closed with this one."""
        if self._bulk is None:
            self._bulk = ServerClient(
                self.base_url,
                self._token,
                self.config,
                transport=self._transport,
                on_clock_skew=self._on_clock_skew,
            )
        return self._bulk

    async def aclose(self) -> None:
        if self._bulk is not None:
            await self._bulk.aclose()
        await self._client.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        headers: dict[str, str] | None = None,
        params: dict[str, Any] | None = None,
        auth: bool = True,
        correlation_id: str | None = None,
    ) -> Reply:
        all_headers = {"X-Correlation-ID": correlation_id or str(uuid.uuid4())}
        if auth:
            all_headers["Authorization"] = f"Bearer {self._token()}"
        all_headers.update(headers or {})
        try:
            if json_body is not None:
                all_headers["Content-Type"] = "application/json"
            response = await self._client.request(
                method,
                path,
                content=None if json_body is None else orjson.dumps(json_body),
                headers=all_headers,
                params=params,
            )
        except httpx.HTTPError as exc:
            raise from_httpx(exc) from None
        self._note_date(response.headers.get("date"))
        if response.status_code == 304:
            return Reply(304, None, etag=response.headers.get("etag"))
        body, problem = _parse_body(response)
        return Reply(
            status=response.status_code,
            body=body,
            retry_after=parse_retry_after(response.headers.get("retry-after")),
            replayed=response.headers.get("idempotent-replayed", "").lower() == "true",
            etag=response.headers.get("etag"),
            raw_error=problem,
        )

    def _note_date(self, value: str | None) -> None:
        if not value or self._on_clock_skew is None:
            return
        try:
            server_time = email.utils.parsedate_to_datetime(value).timestamp()
        except (TypeError, ValueError):
            return
        self._on_clock_skew(server_time - time.time())

    async def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: Any = None,
    ) -> httpx.Response:
        """A request whose reply is not JSON (the tus upload protocol): the bearer token is
        added, httpx errors are translated; ``content`` may be an async byte iterator
        (streamed, with its ``Content-Length`` given in ``headers``)."""
        all_headers = {"Authorization": f"Bearer {self._token()}", **(headers or {})}
        try:
            response = await self._client.request(method, url, headers=all_headers, content=content)
        except httpx.HTTPError as exc:
            raise from_httpx(exc) from None
        self._note_date(response.headers.get("date"))
        return response

    def same_server(self, url: str) -> str | None:
        """``url`` (absolute or relative, a ``Location``) resolved on the server, or None
        when it points elsewhere: the token is never sent to another host."""
        base = httpx.URL(self.base_url + "/")
        resolved = base.join(url)
        if (resolved.scheme, resolved.host, resolved.port) != (base.scheme, base.host, base.port):
            return None
        return str(resolved)

    def _install(self) -> dict[str, str]:
        return {INSTALL_HEADER: self.install} if self.install else {}

    # -- endpoints ---------------------------------------------------------------------------

    async def healthz(self) -> bool:
        reply = await self._request("GET", "/healthz", auth=False)
        return reply.status == 200

    async def send_mutation(
        self, idempotency_key: str, mutation: dict[str, Any], correlation_id: str
    ) -> Reply:
        return await self._request(
            "POST",
            "/v1/mutations",
            json_body=mutation,
            headers={"Idempotency-Key": idempotency_key, **self._install()},
            correlation_id=correlation_id,
        )

    async def send_batch(
        self, items: list[BatchItem], correlation_id: str
    ) -> tuple[Reply, list[Reply]]:
        """The whole reply, and one Reply per item when the batch was answered (200)."""
        body = {"mutations": [{"idempotency_key": i.idempotency_key, **i.mutation} for i in items]}
        reply = await self._request(
            "POST",
            "/v1/mutations/batch",
            json_body=body,
            headers=self._install(),
            correlation_id=correlation_id,
        )
        if reply.status != 200 or reply.body is None:
            return reply, []
        results = reply.body.get("results")
        if not isinstance(results, list) or len(results) != len(items):
            raise MalformedReplyError("batch reply does not hold one result per mutation")
        by_key: dict[str, Reply] = {}
        for result in results:
            if not isinstance(result, dict) or not isinstance(result.get("status"), int):
                raise MalformedReplyError("batch result without a status")
            item_body = result.get("body")
            by_key[str(result.get("idempotency_key"))] = Reply(
                status=result["status"],
                body=item_body if isinstance(item_body, dict) else None,
                replayed=bool(result.get("replayed", False)),
                raw_error=None if isinstance(item_body, dict) else "result body is not an object",
            )
        missing = [i.idempotency_key for i in items if i.idempotency_key not in by_key]
        if missing:
            raise MalformedReplyError(f"batch reply lacks {len(missing)} of our keys")
        return reply, [by_key[i.idempotency_key] for i in items]

    async def changes(self, since: str | None, limit: int, status: str | None = None) -> Reply:
        """A page of the feed; ``status`` is the device's report for the office, sent along
        (``app.sync.device_report``)."""
        params: dict[str, Any] = {"limit": limit}
        if since is not None:
            params["since"] = since
        headers = {STATUS_HEADER: status} if status is not None else {}
        headers.update(self._install())
        return await self._request("GET", "/v1/changes", params=params, headers=headers)

    async def record(self, entity_id: str, etag: str | None = None) -> Reply:
        headers = {"If-None-Match": etag} if etag else None
        return await self._request("GET", f"/v1/records/{entity_id}", headers=headers)

    async def me(self) -> Reply:
        """Who this device is: ``{"device", "user", "team", "role"}`` (issue 16)."""
        return await self._request("GET", "/v1/me")

    async def search(self, query: str, limit: int, cursor: str | None = None) -> Reply:
        """Work orders this device may read whose title, site or assignee match ``query``."""
        params: dict[str, Any] = {"q": query, "limit": limit}
        if cursor is not None:
            params["cursor"] = cursor
        return await self._request("GET", "/v1/records", params=params)

    async def set_pin(self, entity_id: str, pinned: bool) -> Reply:
        """Pin ("Keep offline") or unpin a work order; idempotent either way."""
        return await self._request("POST" if pinned else "DELETE", f"/v1/pins/{entity_id}")

    async def raise_conflict(self, idempotency_key: str, body: dict[str, Any]) -> Reply:
        return await self._request(
            "POST", "/v1/conflicts", json_body=body, headers={"Idempotency-Key": idempotency_key}
        )

    async def conflicts(self, status: str = "open") -> Reply:
        return await self._request("GET", "/v1/conflicts", params={"status": status})

    async def conflict(self, review_id: str) -> Reply:
        return await self._request("GET", f"/v1/conflicts/{review_id}")

    async def resolve_conflict(self, review_id: str, body: dict[str, Any]) -> Reply:
        return await self._request("POST", f"/v1/conflicts/{review_id}/resolve", json_body=body)

    async def dismiss_conflict(self, review_id: str) -> Reply:
        return await self._request("POST", f"/v1/conflicts/{review_id}/dismiss", json_body={})

    async def can_review(self) -> bool:
        """Whether this token may decide review-queue conflicts (an admin device).

        Asks the admin-only ``/metrics`` endpoint: 200 for an admin, 403 for a worker. A
        ``/v1/me`` endpoint naming the role would say it directly; there is none yet.
        """
        reply = await self._request("GET", "/metrics")
        return reply.status == 200
