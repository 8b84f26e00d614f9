"""The FastAPI application: `create_app(settings)` wires the store, routes and middleware."""

from __future__ import annotations

import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI

from server.admission.middleware import AdmissionMiddleware, admission_for
from server.console.mount import mount_console
from server.db.idempotency import abandon_claims, prune_expired
from server.db.store import open_store
from server.devices.ratelimit import RateLimiter, SharedRateLimiter
from server.http import (
    CorrelationMiddleware,
    ServerContext,
    install_error_handlers,
    undeclared_routes,
)
from server.logs import log_event
from server.metrics import Metrics
from server.openapi.inputs import exact_document
from server.routes import (
    attachments,
    changes,
    conflicts,
    health,
    me,
    mutations,
    pins,
    search,
    uploads,
)
from server.scope.legacy import finish_legacy_ends
from server.scope.prune import prune_scope_entries
from server.settings import Settings
from server.uploads.blobs import BlobStore, RunningHashes, attachments_root
from server.uploads.lifecycle import (
    prune_expired_uploads,
    prune_unused_files,
    unfinished_upload_ids,
)
from server.uploads.locks import upload_locks

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


#: A lock file outlives its upload this long before it is removed (a request may still be
#: finishing on it).
_LOCK_FILE_GRACE_S = 3600.0


def _prune_forever(context: ServerContext, stop: threading.Event) -> None:
    while True:
        try:
            removed = prune_expired(context.store, context.settings)
            log_event(logger, logging.INFO, "pruned idempotency keys", removed=removed)
            removed = prune_expired_uploads(context.store, context.blobs, context.settings)
            removed += prune_unused_files(context.store, context.blobs, context.settings)
            live = unfinished_upload_ids(context.store)
            removed += context.locks.prune(live, context.settings.clock() - _LOCK_FILE_GRACE_S)
            log_event(logger, logging.INFO, "pruned uploads and files", removed=removed)
            told = finish_legacy_ends(context.store)
            if told:
                log_event(logger, logging.INFO, "ended legacy scopes", out_of_scope=told)
            removed = prune_scope_entries(context.store)
            log_event(logger, logging.INFO, "pruned scope entries", removed=removed)
        except Exception:
            logger.exception("pruning keys, uploads or scope entries failed; will retry")
        if stop.wait(context.settings.prune_interval_seconds):
            return


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the server for `settings` (opening the database and creating its schema)."""
    settings = settings or Settings()
    store = open_store(settings.db_url)
    shared = settings.rate_limit_shared
    limiter: RateLimiter | SharedRateLimiter
    if store.is_postgres if shared is None else shared:
        limiter = SharedRateLimiter(
            store, settings.rate_limit_burst, settings.rate_limit_per_second, settings.clock
        )
    else:
        limiter = RateLimiter(
            settings.rate_limit_burst, settings.rate_limit_per_second, settings.monotonic
        )
    blobs = BlobStore(attachments_root(settings))
    context = ServerContext(
        settings=settings,
        store=store,
        limiter=limiter,
        metrics=Metrics(),
        blobs=blobs,
        hashes=RunningHashes(),
        locks=upload_locks(store, blobs.root / "locks", settings.upload_lock_wait_seconds),
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        abandoned = abandon_claims(context.store, context.settings)
        if abandoned:
            # Left by a server that died mid-request: retries take them over at once.
            log_event(logger, logging.WARNING, "abandoned idempotency claims", count=abandoned)
        stop = threading.Event()
        pruner = threading.Thread(
            target=_prune_forever, args=(context, stop), name="prune-keys", daemon=True
        )
        pruner.start()
        try:
            yield
        finally:
            stop.set()
            pruner.join(timeout=10)
            context.locks.close()
            context.store.close()

    app = FastAPI(
        title="Fieldsync sync server",
        version="1",
        summary="Idempotent, version-checked work-order sync",
        lifespan=lifespan,
    )
    app.state.server = context
    install_error_handlers(app)
    admission = admission_for(settings)
    if admission is not None:  # inside the correlation middleware: refusals are logged too
        app.add_middleware(AdmissionMiddleware, admission=admission, metrics=context.metrics)
    app.add_middleware(CorrelationMiddleware, settings=settings)
    app.include_router(mutations.router)
    app.include_router(changes.router)
    app.include_router(me.router)
    app.include_router(search.router)
    app.include_router(pins.router)
    app.include_router(conflicts.router)
    app.include_router(uploads.router)
    app.include_router(attachments.router)
    mount_console(app, settings, store)
    app.include_router(health.router)
    undeclared = undeclared_routes(app)
    if undeclared:  # deny by default: a route that says nothing about access never serves
        raise RuntimeError(f"routes without an access action: {', '.join(undeclared)}")

    generated_openapi = app.openapi
    exact: dict[str, Any] = {}

    def openapi() -> dict[str, Any]:
        if not exact:
            exact.update(exact_document(generated_openapi(), settings))
        return exact

    app.openapi = openapi  # type: ignore[method-assign]
    return app
