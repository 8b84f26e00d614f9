"""The `fieldsync` command line: headless devices, scripts and the tests.

Every command exits non-zero with a one-line reason on bad input; `--json` where output is data.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from app.credentials import CredentialsError
from app.store.db import default_data_dir
from app.store.errors import InvalidEditError, StoreError
from app.store.store import Store
from app.sync.errors import SyncError

__all__ = ["main"]

Command = Callable[[argparse.Namespace], int]
_COMMANDS: dict[str, Command] = {}


class UsageError(Exception):
    """Bad input on the command line: printed as one line, exit status 2."""


def command(name: str) -> Callable[[Command], Command]:
    def register(fn: Command) -> Command:
        _COMMANDS[name] = fn
        return fn

    return register


def open_store(args: argparse.Namespace) -> Store:
    return Store(Path(args.data_dir) if args.data_dir else default_data_dir())


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
        rows = store.cache.query(search=args.search, status=args.status, limit=args.limit)
    if args.json:
        print_json(rows)
        return 0
    for row in rows:
        badge = "synced" if row["pending_edits"] == 0 else f"pending ({row['pending_edits']})"
        print(f"{row['id']}  {row['status']:<11} {badge:<12} {row['title']}")
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
    path = Path(args.file)

    def records() -> Any:
        try:
            with path.open(encoding="utf-8") as fh:
                for line_no, line in enumerate(fh, start=1):
                    if not line.strip():
                        continue
                    try:
                        record = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise UsageError(f"{path}:{line_no}: not JSON ({exc.msg})") from None
                    if not isinstance(record, dict):
                        raise UsageError(f"{path}:{line_no}: expected a JSON object")
                    yield record
        except OSError as exc:
            raise UsageError(f"cannot read {path}: {exc.strerror}") from None

    with open_store(args) as store:
        created = store.import_records(records())
    if args.json:
        print_json({"created": len(created), "ids": created})
    else:
        print(f"imported {len(created)} work orders")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fieldsync", description=__doc__)
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
    p.add_argument("--limit", type=int, default=1000)

    p = sub.add_parser("show", help="one work order from the local cache")
    p.add_argument("id")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser("import", help="bulk offline creates from a JSON-lines file")
    p.add_argument("file")
    p.add_argument("--json", action="store_true")

    from app import cli_sync  # registers its commands; imports this module

    cli_sync.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return _COMMANDS[args.command](args)
    except (UsageError, StoreError, SyncError, CredentialsError) as exc:
        print(f"fieldsync: {exc}", file=sys.stderr)
        return 2 if isinstance(exc, (UsageError, InvalidEditError)) else 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
