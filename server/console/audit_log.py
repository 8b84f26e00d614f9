"""The console's audit log: one entry per thing an office user changed."""

from __future__ import annotations

import json
from typing import Any

from server.console.sessions import ConsoleState, Visit

__all__ = ["note"]


def note(state: ConsoleState, visit: Visit, action: str, subject: str, **detail: Any) -> None:
    """Append an entry (call it inside the change's transaction where there is one)."""
    state.tables.Audit.create(
        at=state.settings.clock(),
        actor=visit.user.name,
        action=action,
        subject=subject[:200],
        detail=json.dumps(detail, sort_keys=True),
    )
