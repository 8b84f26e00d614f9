"""app.credentials: token resolution, refusal of unusable and plaintext keyrings, redaction.

The integration tests run tests/support_keyring.py against a real gnome-keyring Secret Service
inside `dbus-run-session`, and without any session bus, each in a temporary HOME.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import keyring.errors
import pytest
from keyring.backend import KeyringBackend
from keyring.backends import fail, null
from keyrings.alt.file import PlaintextKeyring

from app import credentials
from app.credentials import (
    REDACTED,
    CredentialsError,
    InsecureKeyringError,
    KeyringAccessError,
    KeyringLockedError,
    NoKeyringError,
    NoTokenError,
    scrub,
)

REPO = Path(__file__).resolve().parent.parent
SCENARIO_SCRIPT = Path(__file__).with_name("support_keyring.py")
SERVER = "https://fieldsync.example.org"
TOKEN = "fs-tok-unit-5e1f0c-SECRET"
REQUIRED_BINARIES = ("dbus-run-session", "dbus-daemon", "gnome-keyring-daemon")

# The session scenarios' own constants, repeated so a typo there cannot hide a leak here.
SESSION_TOKENS = ("fs-tok-3b7e1c9a0d4f4e21a8c2-SECRET", "fs-tok-9d2a55e0c1b74f0e9e6b-SECRET")


class MemoryKeyring(KeyringBackend):
    """A recommended-priority backend in memory. `viable = False` keeps keyring's own
    detection from ever choosing it, in this process or any test that runs after."""

    viable = False
    priority: float = 5

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        try:
            del self.secrets[(service, username)]
        except KeyError:
            raise keyring.errors.PasswordDeleteError("no such password") from None


class LowPriorityKeyring(MemoryKeyring):
    priority = 0.5


class KeyringsAltLookalike(MemoryKeyring):
    """Any keyrings.alt backend is refused, whatever priority it claims (its EncryptedKeyring
    needs pycryptodome to be constructed, so this stands in for the rest of the package)."""

    __module__ = "keyrings.alt.file"


class RaisingKeyring(MemoryKeyring):
    """Fails every call with `error`; set_password's error quotes the secret, as a careless
    backend's might."""

    def __init__(self, error: type[Exception]) -> None:
        super().__init__()
        self.error = error

    def get_password(self, service: str, username: str) -> str | None:
        raise self.error("cannot read")

    def set_password(self, service: str, username: str, password: str) -> None:
        raise self.error(f"cannot store {password!r} for {username}")


class UntouchableKeyring(MemoryKeyring):
    def get_password(self, service: str, username: str) -> str | None:
        raise AssertionError("the keyring must not be consulted")


@pytest.fixture(autouse=True)
def sandbox_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary HOME for every test here: a regression that lets a plaintext backend write
    must not write into the real one."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("FIELDSYNC_TOKEN", raising=False)
    yield home
    credentials.set_backend_for_tests(None)


# --- server URL and redaction ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "account"),
    [
        ("https://fieldsync.example.org", "https://fieldsync.example.org"),
        ("https://fieldsync.example.org/", "https://fieldsync.example.org"),
        ("  HTTPS://FieldSync.Example.org// ", "https://fieldsync.example.org"),
        ("http://127.0.0.1:8000/api/", "http://127.0.0.1:8000/api"),
        ("https://example.org/Tenant/", "https://example.org/Tenant"),
    ],
)
def test_server_url_is_normalised_into_the_keyring_account(given: str, account: str) -> None:
    assert credentials.normalize_server_url(given) == account


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "fieldsync.example.org",
        "ftp://example.org",
        "https://",
        "https://alice:hunter2@example.org",
        "ftp://alice:hunter2@example.org",
        "https://example.org/?token=hunter2",
    ],
)
def test_unusable_server_urls_are_refused_without_quoting_them(bad: str) -> None:
    with pytest.raises(ValueError, match="server URL") as raised:
        credentials.normalize_server_url(bad)
    assert "hunter2" not in str(raised.value)


def test_redact_replaces_every_occurrence() -> None:
    assert credentials.redact(f"a {TOKEN} b {TOKEN}", TOKEN) == "a [redacted] b [redacted]"
    assert credentials.redact("nothing here", TOKEN) == "nothing here"
    assert credentials.redact("empty token leaves text alone", "") == (
        "empty token leaves text alone"
    )


# --- resolution order -----------------------------------------------------------------------


def test_environment_token_wins_without_consulting_the_keyring() -> None:
    token = credentials.get_token(
        SERVER, backend=UntouchableKeyring(), environ={"FIELDSYNC_TOKEN": " env-token\n"}
    )
    assert token == "env-token"


def test_environment_token_wins_even_without_any_keyring() -> None:
    environ = {"FIELDSYNC_TOKEN": "service-account"}
    assert credentials.get_token(SERVER, backend=fail.Keyring(), environ=environ) == (
        "service-account"
    )
    assert credentials.get_token(SERVER, backend=PlaintextKeyring(), environ=environ) == (
        "service-account"
    )


def test_process_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FIELDSYNC_TOKEN", "from-os-environ")
    assert credentials.get_token(SERVER, backend=UntouchableKeyring()) == "from-os-environ"


def test_empty_environment_token_falls_through_to_the_keyring() -> None:
    backend = MemoryKeyring()
    credentials.store_token(SERVER, TOKEN, backend=backend)
    assert credentials.get_token(SERVER, backend=backend, environ={"FIELDSYNC_TOKEN": ""}) == (
        TOKEN
    )


def test_store_get_delete_round_trip_under_the_normalised_account() -> None:
    backend = MemoryKeyring()
    credentials.store_token(SERVER + "/", TOKEN, backend=backend)
    assert backend.secrets == {("fieldsync", SERVER): TOKEN}
    assert credentials.get_token(SERVER, backend=backend, environ={}) == TOKEN
    assert credentials.delete_token(SERVER + "/", backend=backend) is True
    assert credentials.delete_token(SERVER, backend=backend) is False
    assert backend.secrets == {}


def test_missing_token_tells_the_person_to_log_in() -> None:
    with pytest.raises(NoTokenError, match="fieldsync login") as raised:
        credentials.get_token(SERVER + "/", backend=MemoryKeyring(), environ={})
    assert SERVER in str(raised.value)
    assert "FIELDSYNC_TOKEN" in str(raised.value)


def test_backend_injected_for_tests_is_used_when_none_is_passed() -> None:
    backend = MemoryKeyring()
    credentials.set_backend_for_tests(backend)
    credentials.store_token(SERVER, TOKEN)
    assert credentials.get_token(SERVER, environ={}) == TOKEN
    assert credentials.usable_backend() is backend


def test_empty_token_is_not_stored() -> None:
    backend = MemoryKeyring()
    with pytest.raises(ValueError, match="empty"):
        credentials.store_token(SERVER, "  ", backend=backend)
    assert backend.secrets == {}


# --- unusable and insecure keyrings ---------------------------------------------------------


@pytest.mark.parametrize("backend", [fail.Keyring(), null.Keyring()], ids=["fail", "null"])
def test_no_keyring_says_what_to_do(backend: KeyringBackend) -> None:
    with pytest.raises(NoKeyringError) as raised:
        credentials.store_token(SERVER, TOKEN, backend=backend)
    message = str(raised.value)
    assert "FIELDSYNC_TOKEN" in message
    assert "gnome-keyring" in message
    assert "KWallet" in message
    assert TOKEN not in message


@pytest.mark.parametrize(
    "backend_class",
    [PlaintextKeyring, KeyringsAltLookalike, LowPriorityKeyring],
    ids=["keyrings.alt-plaintext", "keyrings.alt-any-priority", "priority-below-1"],
)
def test_plaintext_like_keyrings_are_refused_before_they_write(
    backend_class: type[KeyringBackend], sandbox_home: Path
) -> None:
    backend = backend_class()
    name = f"{backend_class.__module__}.{backend_class.__qualname__}"
    with pytest.raises(InsecureKeyringError) as raised:
        credentials.store_token(SERVER, TOKEN, backend=backend)
    message = str(raised.value)
    assert name in message
    assert "pip uninstall keyrings.alt" in message
    assert "FIELDSYNC_TOKEN" in message
    assert TOKEN not in message
    with pytest.raises(InsecureKeyringError):
        credentials.get_token(SERVER, backend=backend, environ={})
    with pytest.raises(InsecureKeyringError):
        credentials.delete_token(SERVER, backend=backend)
    assert list(sandbox_home.rglob("*")) == []


# --- failures while talking to a keyring ----------------------------------------------------


def test_locked_keyring_asks_to_unlock_it() -> None:
    with pytest.raises(KeyringLockedError, match="locked") as raised:
        credentials.get_token(
            SERVER, backend=RaisingKeyring(keyring.errors.KeyringLocked), environ={}
        )
    assert isinstance(raised.value, NoKeyringError)
    assert "FIELDSYNC_TOKEN" in str(raised.value)


def test_store_failure_never_carries_the_token() -> None:
    backend = RaisingKeyring(keyring.errors.PasswordSetError)
    with pytest.raises(KeyringAccessError) as raised:
        credentials.store_token(SERVER, TOKEN, backend=backend)
    error = raised.value
    assert "[redacted]" in str(error)
    assert error.__cause__ is None
    assert error.__suppress_context__
    printed = "".join(traceback.format_exception(error))
    assert TOKEN not in printed
    assert TOKEN not in repr(error)


def test_dbus_level_failure_is_a_credentials_error() -> None:
    with pytest.raises(KeyringAccessError, match="ConnectionRefusedError"):
        credentials.get_token(SERVER, backend=RaisingKeyring(ConnectionRefusedError), environ={})


def test_bugs_are_not_disguised_as_keyring_failures() -> None:
    with pytest.raises(TypeError):
        credentials.get_token(SERVER, backend=RaisingKeyring(TypeError), environ={})


def test_token_never_reaches_the_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="app.credentials")
    backend = MemoryKeyring()
    credentials.store_token(SERVER, TOKEN, backend=backend)
    credentials.get_token(SERVER, backend=backend, environ={})
    credentials.get_token(SERVER, backend=backend, environ={"FIELDSYNC_TOKEN": TOKEN})
    credentials.delete_token(SERVER, backend=backend)
    assert caplog.records
    assert TOKEN not in caplog.text


# --- real Secret Service and no D-Bus at all (subprocesses in a temporary HOME) --------------


def require_binaries() -> None:
    missing = [name for name in REQUIRED_BINARIES if shutil.which(name) is None]
    if missing:
        pytest.fail(
            f"{', '.join(missing)} not found: the keyring tests need a real Secret Service. "
            "Install the Debian packages gnome-keyring and dbus (`sh scripts/system-deps.sh`, "
            "or `sudo apt-get install gnome-keyring dbus`).",
            pytrace=False,
        )


def sandbox_env(root: Path) -> dict[str, str]:
    """A minimal environment: temp HOME and XDG dirs, no DISPLAY, no session bus, no token."""
    home = root / "home"
    runtime = root / "runtime"
    home.mkdir()
    runtime.mkdir(mode=0o700)
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_RUNTIME_DIR": str(runtime),
        "PYTHONPATH": str(REPO),
        "FIELDSYNC_KEYRING_SANDBOX": str(home),
    }


def sandbox_processes(home: str) -> list[int]:
    """Processes still running with this sandbox's environment (a daemon that outlived the bus)."""
    marker = f"FIELDSYNC_KEYRING_SANDBOX={home}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def run_scenario(root: Path, scenario: str, *, in_dbus_session: bool) -> dict[str, Any]:
    env = sandbox_env(root)
    command = [sys.executable, "-W", "error", str(SCENARIO_SCRIPT), scenario]
    if in_dbus_session:
        command = ["dbus-run-session", "--", *command]
    try:
        completed = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, check=False
        )
    finally:
        leftovers = sandbox_processes(env["HOME"])
        for pid in leftovers:
            os.kill(pid, signal.SIGTERM)
    failure = (
        f"{scenario} scenario failed (exit {completed.returncode})\n"
        f"stdout:\n{completed.stdout}\nstderr:\n{completed.stderr}"
    )
    assert completed.returncode == 0, failure
    result_lines = [line for line in completed.stdout.splitlines() if line.startswith("RESULT ")]
    assert result_lines, failure
    result: dict[str, Any] = json.loads(result_lines[-1].removeprefix("RESULT "))
    result["leftover_processes"] = leftovers
    result["stderr"] = completed.stderr
    return result


@pytest.fixture(scope="module")
def secret_service(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    require_binaries()
    root = tmp_path_factory.mktemp("secret-service")
    return run_scenario(root, "secret-service", in_dbus_session=True)


@pytest.fixture(scope="module")
def no_dbus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("no-dbus")
    return run_scenario(root, "no-dbus", in_dbus_session=False)


def assert_no_session_token_in(outcome: dict[str, Any]) -> None:
    for token in SESSION_TOKENS:
        assert token not in json.dumps({k: v for k, v in outcome.items() if k != "value"})


def test_secret_service_round_trip(secret_service: dict[str, Any]) -> None:
    result = secret_service
    assert result["daemon"]["unlock_rc"] == 0, result["daemon"]
    # keyrings.alt is installed here, so keyring chains it behind the Secret Service; the
    # chain's top member is used directly and the plaintext file is never read.
    assert result["usable_backend"] == "keyring.backends.SecretService.Keyring"
    assert result["store"] == {"value": None, "seconds": result["store"]["seconds"]}
    assert result["get"]["value"] == SESSION_TOKENS[0]
    assert result["get_with_slash"]["value"] == SESSION_TOKENS[0]
    assert result["env_wins"]["value"] == "from-environment"
    [item] = result["items"]
    assert item["attributes"]["service"] == "fieldsync"
    assert item["attributes"]["username"] == SERVER
    assert result["get_replaced"]["value"] == SESSION_TOKENS[1]
    assert result["items_after_replace"] == 1
    assert result["get_other"]["value"] == SESSION_TOKENS[0]


def test_secret_service_keeps_the_token_encrypted_on_disk(secret_service: dict[str, Any]) -> None:
    changed = secret_service["changed_files"]
    # The assertion below means something only if the keyring really wrote its file.
    assert any(name.endswith("/keyrings/login.keyring") for name in changed), changed
    assert secret_service["files_with_token"] == []
    assert secret_service["files_with_any_token"] == []


def test_secret_service_delete(secret_service: dict[str, Any]) -> None:
    assert secret_service["delete"]["value"] is True
    assert secret_service["get_deleted"]["error"] == "NoTokenError"
    assert "fieldsync login" in secret_service["get_deleted"]["message"]
    assert secret_service["delete_again"]["value"] is False
    assert secret_service["other_survives"]["value"] == SESSION_TOKENS[0]


def test_locked_secret_service_asks_to_unlock(secret_service: dict[str, Any]) -> None:
    assert secret_service["locked"] is True
    for key in ("get_locked", "store_locked"):
        outcome = secret_service[key]
        assert outcome["error"] == "KeyringLockedError", outcome
        assert "gnome-keyring-daemon --unlock" in outcome["message"]
        assert "FIELDSYNC_TOKEN" in outcome["message"]
        assert outcome["seconds"] < 10
        assert_no_session_token_in(outcome)


def test_secret_service_session_leaves_no_daemon_behind(secret_service: dict[str, Any]) -> None:
    assert secret_service["daemon_stopped"] is True
    assert secret_service["leftover_processes"] == []


def test_no_session_bus_says_what_to_do(no_dbus: dict[str, Any]) -> None:
    for key in (
        "explicit_secret_service",
        "configured_secret_service",
        "without_keyrings_alt_get",
        "without_keyrings_alt_store",
        "empty_chainer",
    ):
        outcome = no_dbus[key]
        assert outcome["error"] == "NoKeyringError", (key, outcome)
        assert "FIELDSYNC_TOKEN" in outcome["message"]
        assert "gnome-keyring" in outcome["message"]
        assert "DBUS_SESSION_BUS_ADDRESS" in outcome["message"], (key, outcome)
        assert_no_session_token_in(outcome)
    assert no_dbus["without_keyrings_alt_choice"] == "keyring.backends.fail.Keyring"


def test_keyrings_alt_default_is_detected_and_refused(no_dbus: dict[str, Any]) -> None:
    assert no_dbus["default_choice"] == "keyrings.alt.file.PlaintextKeyring"
    for key in ("default_store", "default_get"):
        outcome = no_dbus[key]
        assert outcome["error"] == "InsecureKeyringError", outcome
        assert "keyrings.alt.file.PlaintextKeyring" in outcome["message"]
        assert_no_session_token_in(outcome)
    assert no_dbus["files_with_token"] == []
    assert no_dbus["keyring_files"] == []


def test_environment_token_wins_without_a_session_bus(no_dbus: dict[str, Any]) -> None:
    assert no_dbus["env_wins"]["value"] == SESSION_TOKENS[1]


def test_credentials_errors_share_one_base() -> None:
    for error in (NoTokenError, NoKeyringError, KeyringLockedError, InsecureKeyringError):
        assert issubclass(error, CredentialsError)
    assert issubclass(KeyringAccessError, CredentialsError)


def test_text_from_a_server_loses_anything_shaped_like_a_credential() -> None:
    # A misconfigured proxy echoing the Authorization header: the reply text is stored as a
    # job's last error and shown by `dead list`.
    echoed = "400: got header Bearer fst_SECRET_ECHO_123 (and fst_other-Token_9)"
    assert scrub(echoed) == f"400: got header {REDACTED} (and {REDACTED})"
    assert scrub("title: at most 200 characters") == "title: at most 200 characters"
