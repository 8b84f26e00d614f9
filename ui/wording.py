"""Plain words for what the core reports: ages, sizes, sync badges and failure reasons."""

from __future__ import annotations

import datetime as dt
import time

from app.states import Connectivity, Reason
from app.words import (
    FIELD_LABELS,
    PRIORITY_WORDS,
    STATUS_WORDS,
    field_label,
    value_in_words,
)

__all__ = [
    "CONNECTIVITY_WORDS",
    "FIELD_LABELS",
    "PRIORITY_WORDS",
    "STATUS_WORDS",
    "ago",
    "discard_question",
    "field_label",
    "last_synced",
    "number",
    "reason_in_words",
    "iso_when",
    "kind_in_words",
    "size_in_words",
    "time_until",
    "value_in_words",
    "when",
]


def _span(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{int(seconds)} s"
    if seconds < 3600:
        return f"{int(seconds // 60)} min"
    if seconds < 86400:
        hours = int(seconds // 3600)
        return f"{hours} h {int(seconds % 3600 // 60)} min"
    return f"{int(seconds // 86400)} d"


def ago(seconds: float | None) -> str:
    if seconds is None:
        return "never"
    if seconds < 5:
        return "just now"
    return f"{_span(seconds)} ago"


def number(n: int) -> str:
    """A count as a person reads it: 1,200."""
    return f"{n:,}"


#: The status bar's word for each connectivity state the engine publishes.
CONNECTIVITY_WORDS: dict[str, str] = {
    Connectivity.ONLINE: "Online",
    # The server answers; the failures are counted beside it.
    Connectivity.DEGRADED: "Online",
    Connectivity.OFFLINE: "Offline",
    Connectivity.UNREACHABLE: "Server unreachable",
    Connectivity.SIGNED_OUT: "Signed out",
    Connectivity.PAUSED: "Paused",
    Connectivity.CONNECTING: "Connecting…",
    Connectivity.STOPPED: "Sync is not running",
}


def last_synced(at: float | None, now: float) -> str:
    """`Last synced just now` / `… 12 s ago` / `… 5 min ago` / `… today 09:12` /
    `… yesterday 14:02` / `… 27 Nov 14:02` / `Never synced`, in local time."""
    if at is None:
        return "Never synced"
    age = max(0.0, now - at)
    if age < 5:
        return "Last synced just now"
    if age < 60:
        return f"Last synced {int(age)} s ago"
    if age < 3600:
        return f"Last synced {int(age // 60)} min ago"
    moment, today = dt.datetime.fromtimestamp(at), dt.datetime.fromtimestamp(now).date()
    clock = moment.strftime("%H:%M")
    if moment.date() == today:
        return f"Last synced today {clock}"
    if moment.date() == today - dt.timedelta(days=1):
        return f"Last synced yesterday {clock}"
    return f"Last synced {moment.day} {moment.strftime('%b')} {clock}"


def time_until(at: float | None, now: float) -> str:
    if at is None:
        return "soon"
    delta = at - now
    return "now" if delta < 1 else f"in {_span(delta)}"


_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


def _local_words(moment: dt.datetime, now: dt.datetime) -> str:
    """ "14:02 today", "14:02 yesterday", "14:02 on Monday" (this week), "14:02 on 29 Nov",
    "14:02 on 29 Nov 2025": a local time a person reads at a glance, and that follows "at"."""
    clock = moment.strftime("%H:%M")
    days = (now.date() - moment.date()).days
    if days == 0:
        return f"{clock} today"
    if days == 1:
        return f"{clock} yesterday"
    if days == -1:
        return f"{clock} tomorrow"
    if 1 < days < 7:
        return f"{clock} on {_WEEKDAYS[moment.weekday()]}"
    day = f"{moment.day} {_MONTHS[moment.month - 1]}"
    if moment.year != now.year:
        day += f" {moment.year}"
    return f"{clock} on {day}"


def when(timestamp: float | None, now: float | None = None) -> str:
    """A device-clock epoch time in local words (never an ISO string)."""
    if timestamp is None:
        return "—"
    current = dt.datetime.fromtimestamp(time.time() if now is None else now)
    return _local_words(dt.datetime.fromtimestamp(timestamp), current)


def size_in_words(n_bytes: int) -> str:
    size = float(n_bytes)
    for unit in ("bytes", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{int(size)} {unit}" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


_KINDS = {
    "rejected": "Refused by the server",
    "auth": "Not signed in",
    "not_found": "Gone from the server",
    "too_large": "Too large",
    "gave_up": "Gave up after retries",
    "other": "Other",
}


def kind_in_words(kind: str) -> str:
    return _KINDS.get(kind, kind)


_LEADS: dict[str, str] = {
    Reason.SIGNED_OUT: "The server did not accept this device's sign-in.",
    Reason.FORBIDDEN: "The server did not accept this device's sign-in.",
    Reason.INVALID: "The server refused the change as invalid.",
    Reason.KEY_REUSED: "The server refused the change as invalid.",
    Reason.NOT_FOUND: "The work order no longer exists on the server.",
    Reason.TOO_LARGE: "The change is too large for the server.",
    Reason.UNSUPPORTED_TYPE: "The server refused the file.",
    Reason.GAVE_UP: "Could not reach the server after many tries.",
    Reason.TIMEOUT: "The server took too long to answer.",
    Reason.NETWORK: "Could not reach the server.",
    Reason.SERVER_BUSY: "The server had a problem.",
    Reason.SERVER_ERROR: "The server had a problem.",
    Reason.RATE_LIMITED: "The server had a problem.",
}


def reason_in_words(code: str | None, detail: str | None = None) -> str:
    """One sentence a field worker understands, from the attempt's reason code (a
    ``Reason``), keeping the recorded words (the server's reason) at the end."""
    text = (detail or "").strip()
    lead = _LEADS.get(code or "")
    if lead is None:
        if not text:
            return "No reason was recorded."
        lead = "The change could not be delivered."
    return f"{lead} ({text})" if text else lead


def iso_when(value: str | None, now: float | None = None) -> str:
    """The server's ISO-8601 UTC time in the device's local time and words, as `when` shows;
    a value that is no time at all is shown as "an unknown time", never raw."""
    if not value:
        return "—"
    try:
        moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return "an unknown time"
    if moment.tzinfo is None:  # the server writes UTC; a bare time is UTC too
        moment = moment.replace(tzinfo=dt.UTC)
    return when(moment.timestamp(), now)


def discard_question(op: str) -> str:
    """What the failed-changes page asks before it discards a change of this kind: a create
    the server never had takes its work order off the device, and its photos' uploads along
    (app.store.store.Store.discard)."""
    if op == "create":
        return (
            "Discard this change? It will not be sent to the server. It creates the work "
            "order, so the work order leaves this device and its photos are discarded with "
            "it: they will not be uploaded. A copy is kept in the audit log."
        )
    return (
        "Discard this change? It will not be sent to the server. A copy is kept in the audit log."
    )
