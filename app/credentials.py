"""The device token: kept in the system keyring, never in SQLite, logs, exceptions or reprs.

Where `get_token` looks, in order:

1. the `FIELDSYNC_TOKEN` environment variable (service accounts, headless devices);
2. the system keyring (`keyring`, service "fieldsync", account = the normalised server URL);
3. nowhere else: `NoTokenError` tells the person to run `fieldsync login`.

There is no plaintext fallback. A keyring that would keep the token in a file anyone reading
the home directory can decode (keyrings.alt, or any backend keyring itself ranks below its
"recommended" priority of 1) is refused with `InsecureKeyringError`.

    CredentialsError               anything this module reports on purpose
    ├── NoTokenError               no token stored for this server and no FIELDSYNC_TOKEN
    ├── NoKeyringError             no usable keyring: none installed, no D-Bus session,
    │   │                          Secret Service not running, keyring disabled
    │   └── KeyringLockedError     the Secret Service is there but stays locked
    ├── InsecureKeyringError       keyring would store the token in a plaintext-like file
    └── KeyringAccessError         the keyring failed while answering (D-Bus error, refused)

Every function that reaches the keyring may block: a D-Bus round trip, or an unlock prompt that
waits for the person, and secretstorage's unlock has no timeout. Call them through the
single-writer executor (`await executor.run(get_token, url)`, app/executor.py), never on the
Qt/asyncio loop thread; the UI's abort path is to stop waiting, not to cancel the call.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from keyring.backend import KeyringBackend

__all__ = [
    "KEYRING_SERVICE",
    "TOKEN_ENV_VAR",
    "CredentialsError",
    "InsecureKeyringError",
    "KeyringAccessError",
    "KeyringLockedError",
    "NoKeyringError",
    "NoTokenError",
    "delete_token",
    "get_token",
    "normalize_server_url",
    "redact",
    "scrub",
    "set_backend_for_tests",
    "store_token",
    "usable_backend",
]

log = logging.getLogger(__name__)

KEYRING_SERVICE = "fieldsync"
TOKEN_ENV_VAR = "FIELDSYNC_TOKEN"
REDACTED = "[redacted]"

_HEADLESS_HINT = (
    f"on a headless device or for a service account, set the {TOKEN_ENV_VAR} environment "
    "variable instead"
)

_backend_for_tests: KeyringBackend | None = None


class CredentialsError(Exception):
    """Base class of every error this module raises on purpose. Never carries the token."""


class NoTokenError(CredentialsError):
    def __init__(self, server_url: str) -> None:
        super().__init__(
            f"Not signed in to {server_url}: run `fieldsync login --server {server_url}`, "
            f"or set {TOKEN_ENV_VAR} for a service account."
        )
        self.server_url = server_url


class NoKeyringError(CredentialsError):
    def __init__(self, reason: str) -> None:
        super().__init__(
            f"No usable system keyring to keep the Fieldsync token ({reason}). On a desktop, "
            "start and unlock a Secret Service such as gnome-keyring or KWallet, then run "
            f"`fieldsync login`; {_HEADLESS_HINT}."
        )
        self.reason = reason


class KeyringLockedError(NoKeyringError):
    def __init__(self, backend_name: str) -> None:
        CredentialsError.__init__(
            self,
            f"The keyring ({backend_name}) is locked and was not unlocked (the unlock prompt "
            "was dismissed or could not be shown). Unlock it (log in to the desktop session, "
            f"or run `gnome-keyring-daemon --unlock`) and try again; {_HEADLESS_HINT}.",
        )
        self.reason = "locked"


class InsecureKeyringError(CredentialsError):
    def __init__(self, backend_name: str) -> None:
        super().__init__(
            f"Refusing to keep the Fieldsync token in {backend_name}: it stores secrets in a "
            "file that anyone who can read your home directory can decode. Uninstall "
            "keyrings.alt (`pip uninstall keyrings.alt`) or configure keyring to use a Secret "
            "Service (PYTHON_KEYRING_BACKEND=keyring.backends.SecretService.Keyring, or "
            f"`default-keyring` in keyringrc.cfg); {_HEADLESS_HINT}."
        )
        self.backend_name = backend_name


class KeyringAccessError(CredentialsError):
    """The keyring was usable but failed while answering; the message is already redacted."""


def redact(text: str, token: str | None) -> str:
    """`text` with every occurrence of `token` replaced by a marker; for messages and logs."""
    if not token:
        return text
    return text.replace(token, REDACTED)


# What a credential looks like in text a server sends back: an Authorization header a
# misconfigured proxy echoes, or a device token (the server's tokens start with "fst_").
_CREDENTIAL_TEXT = re.compile(r"(?i)\bbearer\s+\S+|\bfst_[A-Za-z0-9_-]+")


def scrub(text: str) -> str:
    """``text`` from a server with anything shaped like a credential replaced by a marker:
    it is stored (last errors) and shown, and the device's token must be in neither."""
    return _CREDENTIAL_TEXT.sub(REDACTED, text)


def set_backend_for_tests(backend: KeyringBackend | None) -> None:
    """Use `backend` instead of keyring's choice until called again with None."""
    global _backend_for_tests
    _backend_for_tests = backend


def normalize_server_url(server_url: str) -> str:
    """The keyring account for a server: scheme and host lowercased, no trailing slash.

    A user name or password inside the URL is refused: it would end up in the account name,
    which keyrings do not treat as secret.
    """
    # The messages never quote the URL: a mistyped one may carry a password or a token.
    parts = urlsplit(server_url.strip())
    if parts.username is not None or parts.password is not None:
        raise ValueError("the server URL must not contain a user name or password")
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise ValueError("the server URL must start with http:// or https:// and name a host")
    if parts.query or parts.fragment:
        raise ValueError("the server URL must not contain a query or fragment")
    try:
        parts.port  # noqa: B018 - raises on a port that is not a number in 0-65535
    except ValueError:
        raise ValueError("the server URL's port must be a number from 1 to 65535") from None
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", ""))


def _backend_name(backend: KeyringBackend) -> str:
    cls = type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"


def _secret_service_diagnosis() -> str | None:
    """Why the Secret Service backend is not viable, in keyring's words; None if it is."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        from keyring.backends import SecretService

        SecretService.Keyring.priority  # noqa: B018 - evaluating it probes D-Bus
    except Exception as exc:  # keyring reports non-viability as RuntimeError or ImportError
        return str(exc)
    return None


def usable_backend(backend: KeyringBackend | None = None) -> KeyringBackend:
    """The keyring backend Fieldsync will use, after refusing unusable and insecure ones.

    A chainer (keyring's default when several backends are viable) is replaced by its
    highest-priority member, the one it writes to, so a token never comes back from a
    lower-ranked plaintext file that happens to sit further down the chain.
    """
    # keyring (0.1 s of CPU to import) only once a token is asked for: `fieldsync list` and
    # the other commands on the local store never load it.
    from keyring.backends import chainer, fail, null

    if backend is None:
        backend = _backend_for_tests if _backend_for_tests is not None else _detected_backend()
    if isinstance(backend, chainer.ChainerBackend):
        members = list(backend.backends)
        if not members:
            raise NoKeyringError(_no_backend_reason())
        backend = members[0]
    if isinstance(backend, fail.Keyring):
        raise NoKeyringError(_no_backend_reason())
    if isinstance(backend, null.Keyring):
        raise NoKeyringError(
            "keyring is disabled: the null backend is configured (PYTHON_KEYRING_BACKEND "
            "or keyringrc.cfg)"
        )
    name = _backend_name(backend)
    if type(backend).__module__.split(".")[:2] == ["keyrings", "alt"]:
        raise InsecureKeyringError(name)
    try:
        priority = float(backend.priority)
    except Exception as exc:  # a configured backend that is not viable here
        raise NoKeyringError(f"{name} is not available: {exc}") from exc
    if priority < 1:
        raise InsecureKeyringError(f"{name} (priority {priority:g})")
    return backend


def _detected_backend() -> KeyringBackend:
    import keyring

    try:
        return keyring.get_keyring()
    except Exception as exc:
        # keyring raises RuntimeError (or ImportError) when the backend named in
        # PYTHON_KEYRING_BACKEND or keyringrc.cfg cannot run here.
        raise NoKeyringError(f"keyring could not load its configured backend: {exc}") from exc


def _no_backend_reason() -> str:
    diagnosis = _secret_service_diagnosis()
    if diagnosis:
        return f"keyring found no recommended backend; Secret Service: {diagnosis}"
    return "keyring found no recommended backend"


def _keyring_failure(
    backend: KeyringBackend, action: str, exc: Exception, token: str | None = None
) -> CredentialsError:
    """Translate a backend failure, at the one place keyring errors cross into Fieldsync."""
    import keyring.errors

    name = _backend_name(backend)
    if isinstance(exc, keyring.errors.KeyringLocked):
        return KeyringLockedError(name)
    if isinstance(exc, keyring.errors.NoKeyringError):
        return NoKeyringError(redact(str(exc), token))
    if isinstance(exc, keyring.errors.InitError):
        return NoKeyringError(f"{name} could not open its collection: {redact(str(exc), token)}")
    detail = redact(f"{type(exc).__name__}: {exc}", token)
    return KeyringAccessError(f"Could not {action} in {name} ({detail}).")


def _is_keyring_failure(exc: Exception) -> bool:
    """Errors of the keyring stack (keyring, secretstorage, jeepney, D-Bus sockets)."""
    import keyring.errors

    if isinstance(exc, keyring.errors.KeyringError | OSError):
        return True
    module = type(exc).__module__
    return module.split(".")[0] in ("secretstorage", "jeepney", "dbus", "keyrings")


def get_token(
    server_url: str,
    *,
    backend: KeyringBackend | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """The token for `server_url`: FIELDSYNC_TOKEN if set, else the keyring. May block."""
    environ = os.environ if environ is None else environ
    account = normalize_server_url(server_url)
    from_env = environ.get(TOKEN_ENV_VAR, "").strip()
    if from_env:
        log.debug("token for %s from %s", account, TOKEN_ENV_VAR)
        return from_env
    chosen = usable_backend(backend)
    try:
        token = chosen.get_password(KEYRING_SERVICE, account)
    except Exception as exc:
        if not _is_keyring_failure(exc):
            raise
        raise _keyring_failure(chosen, "read the token", exc) from exc
    if not token:
        raise NoTokenError(account)
    log.debug("token for %s from %s", account, _backend_name(chosen))
    return str(token)


def store_token(server_url: str, token: str, *, backend: KeyringBackend | None = None) -> None:
    """Keep `token` for `server_url` in the keyring, replacing any earlier one. May block."""
    account = normalize_server_url(server_url)
    if not token.strip():
        raise ValueError("the token is empty")
    chosen = usable_backend(backend)
    try:
        chosen.set_password(KEYRING_SERVICE, account, token)
    except Exception as exc:
        if not _is_keyring_failure(exc):
            raise
        # `from None`: the original exception may quote its arguments; only a redacted
        # description of it leaves this module.
        raise _keyring_failure(chosen, "store the token", exc, token) from None
    log.info("token for %s stored in %s", account, _backend_name(chosen))


def delete_token(server_url: str, *, backend: KeyringBackend | None = None) -> bool:
    """Forget the stored token for `server_url`; False if there was none. May block.

    FIELDSYNC_TOKEN is not touched: it belongs to whoever set the environment.
    """
    account = normalize_server_url(server_url)
    chosen = usable_backend(backend)
    try:
        if chosen.get_password(KEYRING_SERVICE, account) is None:
            return False
        chosen.delete_password(KEYRING_SERVICE, account)
    except Exception as exc:
        if not _is_keyring_failure(exc):
            raise
        raise _keyring_failure(chosen, "delete the token", exc) from exc
    log.info("token for %s deleted from %s", account, _backend_name(chosen))
    return True
