"""Structured logs: one JSON object per line, carrying the request's correlation id.

The correlation id lives in a context variable set by the HTTP middleware; Starlette copies the
context into the worker threads that run endpoints, so every line logged while serving a request
carries it. Bearer tokens never reach a log call, and the formatter scrubs anything shaped like
one as a second line of defence.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import re
import sys
from contextvars import ContextVar
from typing import Any, TextIO

__all__ = ["JsonFormatter", "configure_logging", "correlation_id", "log_event"]

#: The current request's correlation id (None outside a request).
correlation_id: ContextVar[str | None] = ContextVar("correlation_id", default=None)

_TOKEN_SHAPE = re.compile(r"fst_[A-Za-z0-9_\-]{8,}")
_STANDARD_ATTRS = frozenset(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


def _scrub(text: str) -> str:
    return _TOKEN_SHAPE.sub("fst_[redacted]", text)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line; extra attributes become keys."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        cid = getattr(record, "correlation_id", None) or correlation_id.get()
        if cid is not None:
            entry["correlation_id"] = cid
        for name, value in record.__dict__.items():
            if name not in _STANDARD_ATTRS and name != "correlation_id":
                entry[name] = value
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return _scrub(json.dumps(entry, default=str, ensure_ascii=False))


def log_event(logger: logging.Logger, level: int, msg: str, **fields: Any) -> None:
    """Log `msg` with `fields` as JSON keys and the current correlation id."""
    if logger.isEnabledFor(level):
        logger.log(level, msg, extra={"correlation_id": correlation_id.get(), **fields})


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Send every logger (ours and uvicorn's) through one JSON handler on `stream`."""
    # What the JSON lines never show, records need not collect (the logging HOWTO's
    # "Optimization"): no caller frame walk, thread, process or task name per record.
    logging._srcfile = None  # type: ignore[attr-defined]
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for name in ("uvicorn", "uvicorn.error"):
        uvicorn_logger = logging.getLogger(name)
        uvicorn_logger.handlers[:] = []
        uvicorn_logger.propagate = True
    # The access line is ours (`server.access`, with the correlation id, device and duration):
    # uvicorn's own, a second line per request, cost a tenth of a request's CPU. uvicorn
    # writes it whenever the logger has a handler, its parents' included.
    access = logging.getLogger("uvicorn.access")
    access.handlers[:] = []
    access.propagate = False
