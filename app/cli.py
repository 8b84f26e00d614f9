"""The `fieldsync` command line: headless devices, scripts and the tests.

Every command exits non-zero with a one-line reason on bad input; `--json` where output is data.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.credentials import CredentialsError
from app.process import without_httpx_cli
from app.store.db import default_data_dir
from app.store.errors import InvalidEditError, StoreError
from app.store.scope import LIST_SCOPES, NO_LONGER_ASSIGNED
from app.store.store import Store
from app.sync.errors import SyncError

__all__ = ["main"]

EXIT_CODES = """exit status:
  0  done
  1  could not finish: storage, network, keyring, or sync not idle before the timeout
  2  bad input: arguments, field values, a file to import (nothing was saved)
  3  the server refused this device's token: sign in again (fieldsync login)
  130  interrupted
  141  the reader of the output went away (| head)"""

Command = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, Command] = {}


class UsageError(Exception):
    """Bad input on the command line: printed as one line, exit status 2."""


class SignInNeeded(Exception):
    """The server refused this device's token: printed as one line, exit status 3."""


def bounded_int(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in [low, high] (SQLite holds 64-bit integers at most)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}")
        return value

    return parse


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value < float("inf"):  # NaN compares false: refused too
        raise argparse.ArgumentTypeError("must be a number of seconds above 0")
    return value


JOB_ID = bounded_int(1, 2**63 - 1)


def command(name: str) -> Callable[[Command], Command]:
    def register(fn: Command) -> Command:
        _COMMANDS[name] = fn
        return fn

    return register


def open_store(args: argparse.Namespace) -> Store:
    data_dir = Path(args.data_dir) if args.data_dir else default_data_dir()
    try:
        return Store(data_dir)
    except OSError as exc:  # the directory itself: a file in its place, a read-only mount
        raise StoreError(f"cannot use {data_dir} as the data directory: {exc.strerror}") from None


def parse_assignments(pairs: Sequence[str]) -> dict[str, Any]:
    """`field=value` words into a dict; `deleted` takes true/false, empty due_date clears."""
    fields: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise UsageError(f"expected field=value, got {pair!r}")
        if name in fields:
            raise UsageError(f"field {name!r} given twice")
        if name == "deleted":
            if value.lower() not in ("true", "false"):
                raise UsageError("deleted takes true or false")
            fields[name] = value.lower() == "true"
        elif name == "due_date" and value == "":
            fields[name] = None
        else:
            fields[name] = value
    return fields


def print_json(data: Any) -> None:
    json.dump(data, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")


@command("status")
def cmd_status(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        stats = store.stats()
    if args.json:
        print_json(stats)
        return 0
    depth = stats["queue_depth"]
    print("queue: " + ", ".join(f"{k} {v}" for k, v in depth.items()))
    age = stats["oldest_pending_age_s"]
    print(f"oldest pending: {'none' if age is None else f'{age:.0f} s'}")
    print(f"lease timeouts: {stats['lease_timeouts']}")
    uploads = stats["uploads"]
    print(
        f"uploads: {uploads['waiting']} waiting ({uploads['bytes_waiting']} bytes), "
        f"{uploads['failed']} failed"
    )
    print(f"unsaved drafts: {stats['drafts']}")
    print(f"database: {stats['database_size_bytes']} bytes")
    return 0


@command("create")
def cmd_create(args: argparse.Namespace) -> int:
    fields = parse_assignments(args.fields)
    with open_store(args) as store:
        result = store.record_edit("create", fields.pop("id", None), fields)
    print(result.entity_id)
    return 0


@command("edit")
def cmd_edit(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        store.record_edit("update", args.id, parse_assignments(args.fields))
    return 0


@command("delete")
def cmd_delete(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        store.record_edit("delete", args.id)
    return 0


@command("list")
def cmd_list(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        rows = store.cache.query(
            search=args.search, status=args.status, limit=args.limit, scope=args.scope
        )
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        badge = "synced" if row["pending_edits"] == 0 else f"pending ({row['pending_edits']})"
        left = f"  ({NO_LONGER_ASSIGNED})" if row["no_longer_assigned"] else ""
        print(f"{row['id']}  {row['status']:<11} {badge:<12} {row['title']}{left}")
    return 0


@command("show")
def cmd_show(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        row = store.cache.get(args.id)
    if row is None:
        raise UsageError(f"no work order {args.id} on this device")
    if args.json:
        print_json(row)
    else:
        for key, value in row.items():
            print(f"{key}: {value}")
    return 0


@command("import")
def cmd_import(args: argparse.Namespace) -> int:
    """All or nothing: every line is read and checked before the first is saved, so a bad
    line can be fixed and the file imported again without duplicating the others."""
    path = Path(args.file)
    records: list[dict[str, Any]] = []
    lines: list[int] = []
    try:
        with path.open("rb") as fh:
            for line_no, raw in enumerate(fh, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise UsageError(f"{path}:{line_no}: not UTF-8 text") from None
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise UsageError(f"{path}:{line_no}: not JSON ({exc.msg})") from None
                except RecursionError:
                    raise UsageError(f"{path}:{line_no}: nested too deeply") from None
                if not isinstance(record, dict):
                    raise UsageError(f"{path}:{line_no}: expected a JSON object")
                records.append(record)
                lines.append(line_no)
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror}") from None

    with open_store(args) as store:
        try:
            created = store.import_records(records, labels=[f"{path}:{n}" for n in lines])
        except InvalidEditError as exc:
            raise UsageError(f"{exc} (nothing was imported)") from None
    if args.json:
        print_json({"created": len(created), "ids": created})
    else:
        print(f"imported {len(created)} work orders")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fieldsync",
        description=__doc__,
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--data-dir", help="device data directory (default: XDG data dir)")
    parser.add_argument("--server", help="sync server URL")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("status", help="queue depth, ages, attempts, database size")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("create", help="create a work order; prints its id")
    p.add_argument("fields", nargs="*", metavar="field=value")

    p = sub.add_parser("edit", help="change fields of a work order")
    p.add_argument("id")
    p.add_argument("fields", nargs="+", metavar="field=value")

    p = sub.add_parser("delete", help="delete a work order")
    p.add_argument("id")

    p = sub.add_parser("list", help="work orders from the local cache")
    p.add_argument("--json", action="store_true")
    p.add_argument("--search", default="")
    p.add_argument("--status")
    p.add_argument("--limit", type=bounded_int(1, 1_000_000), default=1000)
    p.add_argument(
        "--scope", choices=LIST_SCOPES, default="all", help="mine, my team's, or pinned only"
    )

    p = sub.add_parser("show", help="one work order from the local cache")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("import", help="bulk offline creates from a JSON-lines file")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")

    from app import cli_attach, cli_scope, cli_sync  # register their commands; import this

    cli_sync.add_parsers(sub)
    cli_scope.add_parsers(sub)
    cli_attach.add_parsers(sub)
    return parser


def _undecodable(argv: Sequence[str]) -> int | None:
    """The position of an argument that was not UTF-8 (Python keeps its bytes as lone
    surrogates, which nothing downstream can store or print), or None."""
    for position, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return position
    return None


def main(argv: Sequence[str] | None = None) -> int:
    without_httpx_cli()
    argv = list(sys.argv[1:] if argv is None else argv)
    bad = _undecodable(argv)
    if bad is not None:
        print(f"fieldsync: argument {bad} is not valid UTF-8 text", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except SignInNeeded as exc:
        print(f"fieldsync: {exc}", file=sys.stderr)
        return 3
    except (UsageError, StoreError, SyncError, CredentialsError) as exc:
        print(f"fieldsync: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (UsageError, InvalidEditError)) else 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`fieldsync list --json | head`): stop quietly, as cat does.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
