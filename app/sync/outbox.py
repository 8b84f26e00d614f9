"""The escalation outbox: conflicts a person sent to an admin, delivered before each pull.

A conflict marked "escalating" on the device is opened as a review on the server
(``POST /v1/conflicts`` under its review key, so a retry never opens two). The server's answer
decides: opened (escalated, waiting for the admin), refused for good (the conflict is the
person's again, with the server's reason), or refused the token (sync pauses for sign-in).
Anything else is tried again at the next pull.
"""

from __future__ import annotations

import logging

from app.credentials import scrub
from app.executor import StoreExecutor
from app.sync.conflicts import Conflicts
from app.sync.errors import AuthError, ReplyKind, classify_escalation
from app.sync.transport import ServerClient

__all__ = ["EscalationOutbox"]

log = logging.getLogger(__name__)


class EscalationOutbox:
    def __init__(self, conflicts: Conflicts, client: ServerClient, executor: StoreExecutor):
        self.conflicts = conflicts
        self.client = client
        self.executor = executor

    async def send_pending(self) -> list[str]:
        """Send every escalation waiting on the device. Returns why the server refused some
        (one line each, for the engine's last error); raises AuthError on a 401."""
        refusals: list[str] = []
        for item in await self.executor.run(self.conflicts.pending_escalations):
            reply = await self.client.raise_conflict(item["review_key"], item["body"])
            conflict = (reply.body or {}).get("conflict")
            verdict = classify_escalation(reply.status, reply.error)
            if (
                verdict.kind is ReplyKind.SUCCESS
                and isinstance(conflict, dict)
                and "id" in conflict
            ):
                await self.executor.run(
                    self.conflicts.mark_escalated, item["job_id"], str(conflict["id"])
                )
            elif verdict.kind is ReplyKind.AUTH:
                raise AuthError("the server refused this device's token")
            elif verdict.kind is ReplyKind.PERMANENT:
                # Refused for good (too large, invalid): the person decides again, told why.
                why = reply.detail or reply.error
                problem = scrub(f"{why} ({reply.status})")[:500]
                await self.executor.run(self.conflicts.escalation_refused, item["job_id"], problem)
                refusal = (
                    f"the server refused to send conflict {item['job_id']} for review: {problem}"
                )
                log.warning("%s", refusal)
                refusals.append(refusal)
        return refusals
