"""`fieldsync-server add-user`, `list-users`, `set-user`, `remove-user`, seen from the shell."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from collections.abc import Callable
from unittest import mock

import pytest

from server.cli import main
from server.console.models import console_tables
from server.db.store import open_store
from server.embedded import EmbeddedServer, start_server
from tests.support.console import ConsoleClient
from tests.support.serve import server_command


def _run(db_url: str, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    """The command in this process (a subprocess costs seconds of imports on a busy host)."""
    out, err = io.StringIO(), io.StringIO()
    with (
        mock.patch.object(sys, "stdin", io.StringIO(stdin)),
        contextlib.redirect_stdout(out),
        contextlib.redirect_stderr(err),
    ):
        try:
            code = main([args[0], "--db", db_url, *args[1:]])
        except SystemExit as exit_:  # argparse refusing
            code = int(exit_.code or 0)
    return subprocess.CompletedProcess(args, code, out.getvalue(), err.getvalue())


def test_add_user_from_the_shell(sqlite_url: str) -> None:
    """The installed command, with the password on standard input."""
    added = subprocess.run(
        [*server_command(), "add-user", "--db", sqlite_url, "--name", "ana", "--role",
         "dispatcher", "--password-stdin"],
        input="shell secret\n", capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert _run(sqlite_url, "list-users").stdout.startswith("ana\tdispatcher\t")


def _signs_in(server: EmbeddedServer, name: str, password: str) -> int:
    client = ConsoleClient(server.base_url)
    try:
        return client.sign_in(name, password).status_code
    finally:
        client.close()


def test_users_are_added_listed_changed_and_removed(sqlite_url: str) -> None:
    added = _run(sqlite_url, "add-user", "--name", "ana", "--role", "admin", "--password-stdin",
                 stdin="first secret\n")  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert "first secret" not in added.stdout + added.stderr
    _run(sqlite_url, "add-user", "--name", "bo", "--role", "dispatcher", "--password-stdin",
         stdin="bo's secret\n")  # fmt: skip
    listed = _run(sqlite_url, "list-users")
    rows = [line.split("\t") for line in listed.stdout.splitlines()]
    assert [row[:2] for row in rows] == [["ana", "admin"], ["bo", "dispatcher"]]

    with start_server(sqlite_url) as server:
        assert _signs_in(server, "ana", "first secret") == 303
        changed = _run(sqlite_url, "set-user", "ana", "--password-stdin", stdin="second secret\n")
        assert changed.returncode == 0, changed.stderr
        assert _signs_in(server, "ana", "first secret") == 401
        assert _signs_in(server, "ana", "second secret") == 303
        removed = _run(sqlite_url, "remove-user", "bo")
        assert removed.returncode == 0, removed.stderr
        assert _signs_in(server, "bo", "bo's secret") == 401
    assert [line.split("\t")[0] for line in _run(sqlite_url, "list-users").stdout.splitlines()] == [
        "ana"
    ]


def test_passwords_are_stored_as_argon2_hashes_only(sqlite_url: str) -> None:
    _run(sqlite_url, "add-user", "--name", "ana", "--role", "admin", "--password-stdin",
         stdin="a clear secret\n")  # fmt: skip
    store = open_store(sqlite_url)
    try:
        [row] = console_tables(store).User.select()
        assert row.password_hash.startswith("$argon2id$")
        assert "a clear secret" not in row.password_hash
    finally:
        store.close()


@pytest.mark.parametrize(
    ("args", "stdin", "says"),
    [
        (
            ("add-user", "--name", "x", "--role", "boss", "--password-stdin"),
            "pw\n",
            "invalid choice",
        ),
        (
            ("add-user", "--name", "x", "--role", "admin", "--password-stdin"),
            "\n",
            "password is empty",
        ),
        (("add-user", "--name", "x", "--role", "admin"), "", "--password-stdin"),
        (("set-user", "nobody", "--password-stdin"), "pw\n", "no user named 'nobody'"),
        (("remove-user", "nobody"), "", "no user named 'nobody'"),
        (("set-user", "x"), "", "give --password-stdin, --role or both"),
    ],
)
def test_bad_commands_say_why_and_change_nothing(
    sqlite_url: str, args: tuple[str, ...], stdin: str, says: str
) -> None:
    result = _run(sqlite_url, *args, stdin=stdin)
    assert result.returncode != 0
    assert says in result.stderr
    assert _run(sqlite_url, "list-users").stdout == ""


def test_a_second_user_of_the_same_name_is_refused(sqlite_url: str) -> None:
    args = ("add-user", "--name", "ana", "--role", "admin", "--password-stdin")
    assert _run(sqlite_url, *args, stdin="one\n").returncode == 0
    again = _run(sqlite_url, *args, stdin="two\n")
    assert again.returncode == 1
    assert "user 'ana' already exists" in again.stderr


def test_a_role_change_takes_effect_at_once(
    office: EmbeddedServer, make_client: Callable[[], ConsoleClient]
) -> None:
    client = make_client()
    assert client.sign_in("dan", "dispatcher password 1").status_code == 303
    assert client.get("/console/people").status_code == 403
    assert _run(office.settings.db_url, "set-user", "dan", "--role", "admin").returncode == 0
    # Changing a role ends the user's sessions: they sign in again with the new one.
    assert client.get("/console/people").status_code == 303
    assert client.sign_in("dan", "dispatcher password 1").status_code == 303
    assert client.get("/console/people").status_code == 200
