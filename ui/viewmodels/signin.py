"""Sign-in: server URL and device token, kept in the system keyring (never in SQLite).

The keyring may block (D-Bus, an unlock prompt), so `store_token` runs on the executor. Every
`CredentialsError` is shown as written: it already says what to do (start a Secret Service, or
use FIELDSYNC_TOKEN on a headless device).
"""

from __future__ import annotations

from collections.abc import Callable

from app.credentials import CredentialsError, normalize_server_url, store_token
from ui.qt import Property, QObject, Signal, Slot, connect
from ui.services import Services
from ui.viewmodels.base import ViewModel, notified, settable

__all__ = ["SignInViewModel"]

StoreToken = Callable[[str, str], None]


class SignInViewModel(ViewModel):
    """Signals:
    changed()
    signedIn(str server_url, str token)  — the token is handed to the running engine
    message(str)  — from ViewModel: a storage condition while saving the token
    """

    changed = Signal()
    signedIn = Signal(str, str)

    def __init__(
        self,
        services: Services,
        parent: QObject | None = None,
        *,
        store_token_fn: StoreToken = store_token,
    ) -> None:
        super().__init__(parent)
        self._services = services
        self._store_token = store_token_fn
        self._server_url = services.server_url
        self._token = ""
        self._error = ""
        self._reason = ""
        self._busy = False
        connect(services.bridge.authRequired, self.on_bridge_auth_required)

    def on_bridge_auth_required(self, server_url: str, reason: str) -> None:
        self._server_url = server_url or self._server_url
        self._reason = f"Sign in again: {reason}" if reason else "Sign in again."
        self.changed.emit()

    def _server_url_typed(self) -> None:
        self._error = ""  # the error was about the address as it was

    serverUrl = settable(str, "_server_url", changed, _server_url_typed)

    @Slot(str)
    def setToken(self, token: str) -> None:
        """Write-only: the token is never readable back from the view-model."""
        self._token = token
        self._error = ""
        self.changed.emit()

    @Property(bool, notify=changed)
    def canSignIn(self) -> bool:
        return bool(self._server_url.strip() and self._token.strip()) and not self._busy

    error = notified(str, "_error", changed)
    reason = notified(str, "_reason", changed)
    busy = notified(bool, "_busy", changed)

    @Slot()
    def signIn(self) -> None:
        try:
            url = normalize_server_url(self._server_url)
        except ValueError as exc:
            self._error = f"Check the server address: {exc}"
            self.changed.emit()
            return
        if not self._token.strip():
            self._error = "Paste the device token your administrator gave you."
            self.changed.emit()
            return
        self._busy = True
        self.changed.emit()
        self._tasks.start(self._sign_in(url, self._token.strip()), "sign-in")

    async def _sign_in(self, url: str, token: str) -> None:
        try:
            await self._services.executor.run(self._store_token, url, token)
        except (CredentialsError, ValueError) as exc:
            self._error = str(exc)
            return
        finally:
            self._busy = False
            self.changed.emit()
        self._token = ""
        self._reason = ""
        self._error = ""
        self.changed.emit()
        self.signedIn.emit(url, token)
