"""Credentials scenarios against the real keyring stack, run in a throwaway session; prints JSON.

tests/test_credentials.py runs it as a subprocess with a temporary HOME and XDG directories:

    dbus-run-session -- python tests/support_keyring.py secret-service
    python tests/support_keyring.py no-dbus

`secret-service` starts gnome-keyring-daemon on the private bus, unlocked from stdin, and
exercises app.credentials with keyring's real SecretService backend. `no-dbus` runs with no
session bus at all. The last line of stdout is `RESULT <json>`. The script refuses to run unless
FIELDSYNC_KEYRING_SANDBOX names the current HOME, so it never touches a real account's keyring.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from app import credentials  # noqa: E402

SERVER = "https://fieldsync.example.org"
OTHER_SERVER = "https://other.example.org:8443/api"
TOKEN = "fs-tok-3b7e1c9a0d4f4e21a8c2-SECRET"
SECOND_TOKEN = "fs-tok-9d2a55e0c1b74f0e9e6b-SECRET"
KEYRING_PASSWORD = "sandbox-keyring-password"


def outcome(call: Callable[[], Any]) -> dict[str, Any]:
    """Run `call`; what it returned or raised, as JSON-friendly data."""
    started = time.monotonic()
    try:
        value = call()
    except Exception as exc:
        return {
            "error": type(exc).__name__,
            "message": str(exc),
            "is_credentials_error": isinstance(exc, credentials.CredentialsError),
            "cause": type(exc.__cause__).__name__ if exc.__cause__ else None,
            "seconds": time.monotonic() - started,
        }
    return {"value": value, "seconds": time.monotonic() - started}


def regular_files(*roots: Path) -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                files[str(path)] = path.read_bytes()
    return files


def encodings_of(secret: str) -> list[bytes]:
    """The ways a careless backend would write `secret` to disk (keyrings.alt uses base64)."""
    raw = secret.encode()
    return [raw, base64.b64encode(raw), secret.encode("utf-16-le"), raw.hex().encode()]


def files_containing(files: dict[str, bytes], secret: str) -> list[str]:
    needles = encodings_of(secret)
    return sorted(name for name, data in files.items() if any(n in data for n in needles))


def start_gnome_keyring(scratch: Path) -> dict[str, Any]:
    """Start gnome-keyring-daemon (secrets only) on this session bus, unlocked from stdin."""
    log = scratch / "gnome-keyring.log"
    # Output goes to a file, not a pipe: the daemon forks and would hold a pipe open.
    with log.open("w") as out:
        unlock = subprocess.run(
            ["gnome-keyring-daemon", "--unlock", "--components=secrets"],
            input=KEYRING_PASSWORD.encode(),
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=30,
            check=False,
        )
        start = subprocess.run(
            ["gnome-keyring-daemon", "--start", "--components=secrets"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=30,
            check=False,
        )
    output = log.read_text(errors="replace")
    for line in output.splitlines():
        name, sep, value = line.partition("=")
        if sep and name.isupper() and name.replace("_", "").isalnum():
            os.environ[name] = value
    return {"unlock_rc": unlock.returncode, "start_rc": start.returncode, "output": output}


def wait_for_default_collection(connection: Any, timeout: float = 15.0) -> Any:
    import secretstorage

    deadline = time.monotonic() + timeout
    while True:
        try:
            if secretstorage.check_service_availability(connection):
                collection = secretstorage.get_default_collection(connection)
                if not collection.is_locked():
                    return collection
        except secretstorage.exceptions.SecretStorageException:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("gnome-keyring-daemon did not offer an unlocked default collection")
        time.sleep(0.1)


def secret_service_pid(connection: Any) -> int:
    """The process owning org.freedesktop.secrets on this bus: the daemon started above."""
    from jeepney import DBus

    reply = connection.send_and_get_reply(
        DBus().GetConnectionUnixProcessID("org.freedesktop.secrets")
    )
    return int(reply.body[0])


def stop_process(pid: int, timeout: float = 10.0) -> bool:
    """SIGTERM `pid` (a daemon, so not our child) and wait until it is gone or a zombie."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def fieldsync_items(collection: Any, account: str) -> list[dict[str, Any]]:
    items = collection.search_items({"service": "fieldsync", "username": account})
    return [{"label": item.get_label(), "attributes": item.get_attributes()} for item in items]


def secret_service_scenario(scratch: Path) -> dict[str, Any]:
    import secretstorage

    home = Path(os.environ["HOME"])
    runtime = Path(os.environ["XDG_RUNTIME_DIR"])
    result: dict[str, Any] = {"daemon": start_gnome_keyring(scratch)}
    with closing(secretstorage.dbus_init()) as connection:
        collection = wait_for_default_collection(connection)
        daemon_pid = secret_service_pid(connection)
        result.update(exercise_secret_service(collection, home, runtime))
    result["daemon_stopped"] = stop_process(daemon_pid)
    return result


def exercise_secret_service(collection: Any, home: Path, runtime: Path) -> dict[str, Any]:
    import keyring

    result: dict[str, Any] = {}

    result["keyring_choice"] = credentials._backend_name(keyring.get_keyring())
    result["usable_backend"] = credentials._backend_name(credentials.usable_backend())

    before = regular_files(home)
    result["store"] = outcome(lambda: credentials.store_token(SERVER + "/", TOKEN))
    after = regular_files(home, runtime)
    result["changed_files"] = sorted(
        name for name, data in after.items() if before.get(name) != data
    )
    result["files_with_token"] = files_containing(after, TOKEN)
    result["items"] = fieldsync_items(collection, SERVER)
    result["get"] = outcome(lambda: credentials.get_token(SERVER))
    result["get_with_slash"] = outcome(lambda: credentials.get_token(SERVER + "//"))
    result["env_wins"] = outcome(
        lambda: credentials.get_token(SERVER, environ={"FIELDSYNC_TOKEN": "from-environment"})
    )

    result["replace"] = outcome(lambda: credentials.store_token(SERVER, SECOND_TOKEN))
    result["get_replaced"] = outcome(lambda: credentials.get_token(SERVER))
    result["items_after_replace"] = len(fieldsync_items(collection, SERVER))
    result["store_other"] = outcome(lambda: credentials.store_token(OTHER_SERVER, TOKEN))
    result["get_other"] = outcome(lambda: credentials.get_token(OTHER_SERVER))
    result["files_with_any_token"] = files_containing(
        regular_files(home, runtime), TOKEN
    ) + files_containing(regular_files(home, runtime), SECOND_TOKEN)

    result["delete"] = outcome(lambda: credentials.delete_token(SERVER))
    result["get_deleted"] = outcome(lambda: credentials.get_token(SERVER))
    result["delete_again"] = outcome(lambda: credentials.delete_token(SERVER))
    result["other_survives"] = outcome(lambda: credentials.get_token(OTHER_SERVER))

    # No DISPLAY: gnome-keyring's prompter cannot open a window, so the unlock is dismissed.
    collection.lock()
    result["locked"] = collection.is_locked()
    result["get_locked"] = outcome(lambda: credentials.get_token(OTHER_SERVER))
    result["store_locked"] = outcome(lambda: credentials.store_token(SERVER, SECOND_TOKEN))
    return result


def no_dbus_scenario(scratch: Path) -> dict[str, Any]:
    import keyring.core
    from keyring.backends import SecretService, chainer

    home = Path(os.environ["HOME"])
    result: dict[str, Any] = {}

    result["explicit_secret_service"] = outcome(
        lambda: credentials.get_token(SERVER, backend=SecretService.Keyring())
    )

    os.environ["PYTHON_KEYRING_BACKEND"] = "keyring.backends.SecretService.Keyring"
    result["configured_secret_service"] = outcome(lambda: credentials.get_token(SERVER))
    del os.environ["PYTHON_KEYRING_BACKEND"]

    # What keyring picks on a machine without keyrings.alt: hide its backends from detection.
    keyring.core.init_backend(limit=lambda kr: not type(kr).__module__.startswith("keyrings."))
    result["without_keyrings_alt_choice"] = credentials._backend_name(keyring.get_keyring())
    result["without_keyrings_alt_get"] = outcome(lambda: credentials.get_token(SERVER))
    result["without_keyrings_alt_store"] = outcome(lambda: credentials.store_token(SERVER, TOKEN))
    result["empty_chainer"] = outcome(
        lambda: credentials.get_token(SERVER, backend=chainer.ChainerBackend())
    )

    # This venv has keyrings.alt installed: keyring now silently picks its plaintext file.
    keyring.core.init_backend()
    result["default_choice"] = credentials._backend_name(keyring.get_keyring())
    result["default_store"] = outcome(lambda: credentials.store_token(SERVER, TOKEN))
    result["default_get"] = outcome(lambda: credentials.get_token(SERVER))
    result["files_with_token"] = files_containing(regular_files(home), TOKEN)
    result["keyring_files"] = sorted(str(p) for p in home.rglob("*") if p.is_file())

    os.environ["FIELDSYNC_TOKEN"] = SECOND_TOKEN
    result["env_wins"] = outcome(lambda: credentials.get_token(SERVER))
    del os.environ["FIELDSYNC_TOKEN"]
    return result


SCENARIOS = {"secret-service": secret_service_scenario, "no-dbus": no_dbus_scenario}


def main() -> None:
    scenario = SCENARIOS[sys.argv[1]]
    home = os.environ.get("HOME", "")
    if not home or os.environ.get("FIELDSYNC_KEYRING_SANDBOX") != home:
        raise SystemExit("refusing to run outside the sandbox HOME the test sets up")
    scratch = Path(home).parent
    print("RESULT " + json.dumps(scenario(scratch)), flush=True)


if __name__ == "__main__":
    main()
