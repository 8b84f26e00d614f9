"""`fieldsync-server add-user`, `list-users`, `set-user`, `remove-user`: the office's people.

    fieldsync-server add-user --name ana --role admin --password-stdin < password.txt
    fieldsync-server set-user ana --password-stdin      # or --role dispatcher
    fieldsync-server remove-user ana
    fieldsync-server list-users                         # name, role, created (tab-separated)

A password never appears on the command line (where `ps` shows it to everyone): it is read
from standard input (`--password-stdin`, its first line) or asked for on the terminal.
"""

from __future__ import annotations

import argparse
import getpass
import sys
from collections.abc import Callable

from server.console.models import console_tables
from server.console.users import ROLES, UserExistsError, add_user, list_users, remove_user, set_user
from server.db.store import Store

__all__ = ["USER_COMMANDS", "add_user_commands"]


def add_user_commands(command: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """Add the four subcommands through the CLI's `command(name, help)` (which adds --db)."""
    add = command("add-user", "add an office user of the console")
    add.add_argument("--name", required=True)
    add.add_argument("--role", choices=ROLES, required=True)
    _password_option(add)
    change = command("set-user", "change an office user's password or role")
    _name_options(change)
    change.add_argument("--role", choices=ROLES, default=None)
    _password_option(change)
    remove = command("remove-user", "remove an office user (and end their sessions)")
    _name_options(remove)
    command("list-users", "list the office users")


def _name_options(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("name", nargs="?", default=None)
    sub.add_argument("--name", dest="name_option", default=None, help="the same as NAME")


def _password_option(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--password-stdin",
        action="store_true",
        help="read the password from standard input (its first line)",
    )


def _name(args: argparse.Namespace) -> str | None:
    name: str | None = args.name if args.name is not None else args.name_option
    if name is None:
        print(f"{args.command}: give the user's name", file=sys.stderr)
    return name


def _password(args: argparse.Namespace) -> str | None:
    if args.password_stdin:
        line = sys.stdin.readline()
        return line[:-1] if line.endswith("\n") else line
    if not sys.stdin.isatty():
        print(f"{args.command}: give --password-stdin to read the password", file=sys.stderr)
        return None
    first = getpass.getpass("Password: ")
    if first != getpass.getpass("Password again: "):
        print("the passwords differ", file=sys.stderr)
        return None
    return first


def _add(store: Store, args: argparse.Namespace) -> int:
    password = _password(args)
    if password is None:
        return 2
    try:
        user = add_user(console_tables(store), args.name, args.role, password)
    except UserExistsError:
        print(f"user {args.name!r} already exists", file=sys.stderr)
        return 1
    print(f"Added {user.role} {user.name!r}.")
    return 0


def _set(store: Store, args: argparse.Namespace) -> int:
    name = _name(args)
    if name is None:
        return 2
    if not args.password_stdin and args.role is None:
        print("set-user: give --password-stdin, --role or both", file=sys.stderr)
        return 2
    password = _password(args) if args.password_stdin else None
    if args.password_stdin and password is None:
        return 2
    user = set_user(console_tables(store), name, role=args.role, password=password)
    if user is None:
        print(f"no user named {name!r}", file=sys.stderr)
        return 1
    print(f"User {user.name!r} changed ({user.role}); their sessions were ended.")
    return 0


def _remove(store: Store, args: argparse.Namespace) -> int:
    name = _name(args)
    if name is None:
        return 2
    if not remove_user(console_tables(store), name):
        print(f"no user named {name!r}", file=sys.stderr)
        return 1
    print(f"Removed {name!r}.")
    return 0


def _list(store: Store, args: argparse.Namespace) -> int:
    for user in list_users(console_tables(store)):
        print(f"{user.name}\t{user.role}\t{user.created_at}")
    return 0


#: Each command with what it does (for "cannot … user: …") and its handler.
USER_COMMANDS: dict[str, tuple[str, Callable[[Store, argparse.Namespace], int]]] = {
    "add-user": ("add", _add),
    "set-user": ("change", _set),
    "remove-user": ("remove", _remove),
    "list-users": ("list", _list),
}
