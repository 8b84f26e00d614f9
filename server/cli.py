"""`fieldsync-server`: serve the sync API and manage device tokens.

    fieldsync-server serve --db URL --host 127.0.0.1 --port 8750 [--workers 4]
                           [--rate-limit-scope auto|database|process] [--worker-search all|scope]
                           [--max-in-flight 16] [--max-queued 256]
                           [--attachments-dir DIR] [--max-upload-mib 100]
                           [--device-unfinished-mib 1024] [--user-stored-mib 20480]
                           [--min-free-disk-mib 512]
    fieldsync-server add-device --name phone-1 --role worker [--user ana] [--team north]
                                                   # token on the last stdout line
    fieldsync-server set-device phone-1 --user ana --team south
    fieldsync-server revoke-device phone-1
    fieldsync-server list-devices   # name, role, created, state, user, team, sees,
                                    # unfinished uploads, stored files (tab-separated)
    fieldsync-server prune-keys
    fieldsync-server add-user --name ana --role admin|dispatcher --password-stdin
    fieldsync-server set-user ana --password-stdin | remove-user ana | list-users

Every subcommand takes `--db URL` (default `FIELDSYNC_SERVER_DB`, else a SQLite file in the
XDG data dir).
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from app.process import settle_collector
from server.auth import (
    ROLES,
    DeviceExistsError,
    DeviceInfo,
    add_device,
    list_devices,
    revoke_device,
    set_device,
)
from server.console.cli import USER_COMMANDS, add_user_commands
from server.db.idempotency import prune_expired
from server.db.store import Store, open_store
from server.logs import configure_logging, log_event
from server.settings import Settings, default_db_url
from server.uploads.budgets import DeviceUse, device_use, mib

if TYPE_CHECKING:
    from fastapi import FastAPI

# The web stack (FastAPI, uvicorn, the app's routes and console: 0.7 s of CPU) is imported by
# `serve` alone, and by a `--workers` supervisor only in the workers it spawns: every other
# subcommand is a short run against the database that an admin, a script or a test waits on.

__all__ = ["main"]

logger = logging.getLogger("server.cli")
_DAY = 86_400.0
_MIB = 1024 * 1024

#: The byte sizes `serve` takes in MiB, by their Settings field; the option is the field's
#: name with "_bytes" read as "-mib" (max_upload_bytes: --max-upload-mib).
_MIB_OPTIONS: dict[str, str] = {
    "max_upload_bytes": "largest attachment accepted (tus Upload-Length)",
    "device_unfinished_bytes": (
        "what one device's unfinished uploads may announce together (507 above it)"
    ),
    "user_stored_bytes": (
        "what one user's stored files and unfinished uploads may reach (507 above it)"
    ),
    "min_free_disk_bytes": "uploads stop this short of a full disk (507), leaving room for edits",
}


def _mib_flag(setting: str) -> str:
    return "--" + setting.removesuffix("_bytes").replace("_", "-") + "-mib"


def _sizes(args: argparse.Namespace) -> dict[str, Any]:
    """The Settings fields of the MiB options, in bytes."""
    return {
        setting: int(getattr(args, setting.removesuffix("_bytes") + "_mib") * _MIB)
        for setting in _MIB_OPTIONS
    }


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fieldsync-server", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)

    def command(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text)
        sub.add_argument("--db", default=None, help="database URL (sqlite:///… or postgresql://…)")
        return sub

    serve = command("serve", "run the HTTP API")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8750, help="0 picks a free port")
    serve.add_argument("--log-level", default="info", choices=["debug", "info", "warning"])
    serve.add_argument(
        "--workers",
        type=_positive_int,
        default=1,
        help="server processes sharing the port",
    )
    defaults = Settings(db_url="unused")
    serve.add_argument("--rate-limit-burst", type=int, default=defaults.rate_limit_burst)
    serve.add_argument(
        "--rate-limit-per-second",
        type=float,
        default=defaults.rate_limit_per_second,
        help="0 disables the per-device rate limit",
    )
    serve.add_argument(
        "--rate-limit-scope",
        choices=("auto", "database", "process"),
        default="auto",
        help="where the buckets live: the database (shared by every process on it) or each"
        " process; auto: the database on PostgreSQL or with --workers above 1",
    )
    serve.add_argument(
        "--max-in-flight",
        type=int,
        default=defaults.max_in_flight_requests,
        help="device requests each process works on at once (0: no bound); more wait or"
        " are answered 429 with Retry-After",
    )
    serve.add_argument(
        "--max-queued",
        type=int,
        default=defaults.max_queued_requests,
        help="device requests each process lets wait for a turn (the rest: 429)",
    )
    serve.add_argument(
        "--worker-search",
        choices=("all", "scope"),
        default=defaults.worker_search,
        help="what a worker's search reaches: the whole organisation, or its scope",
    )
    serve.add_argument(
        "--key-retention-days",
        type=float,
        default=defaults.idempotency_retention_seconds / _DAY,
        help="keep idempotency keys this long; must exceed the longest offline period",
    )

    serve.add_argument(
        "--console-secure-cookies",
        action="store_true",
        help="mark the console's session cookie Secure (when served behind TLS)",
    )
    serve.add_argument(
        "--attachments-dir",
        default=None,
        help="where attachment files live (default: attachments/ beside a SQLite database)",
    )
    for setting, help_text in _MIB_OPTIONS.items():
        serve.add_argument(
            _mib_flag(setting),
            type=float,
            default=getattr(defaults, setting) / _MIB,
            help=help_text,
        )
    serve.add_argument(
        "--attachment-types",
        default=",".join(defaults.attachment_content_types),
        help="comma-separated media types an attachment may have (type/* for a family)",
    )
    serve.add_argument(
        "--upload-expiry-days",
        type=float,
        default=defaults.upload_expiry_seconds / _DAY,
        help="an unfinished upload is removed this long after its last chunk",
    )

    add = command("add-device", "provision a device and print its token once")
    add.add_argument("--name", required=True)
    add.add_argument("--role", choices=ROLES, default="worker")
    _person_options(
        add,
        "the person using it (default: the name)",
        "the person's team (default: none)",
        team_default="",
    )

    change = command("set-device", "change a device's user or team")
    change.add_argument("name")
    _person_options(change, "the person now using it", 'their team ("" for none)')

    revoke = command("revoke-device", "revoke a device's token")
    revoke.add_argument("name")

    command("list-devices", "list provisioned devices")
    add_user_commands(command)
    prune = command("prune-keys", "delete expired idempotency keys now")
    prune.add_argument("--key-retention-days", type=float, default=30.0)
    return parser


def _person_options(
    sub: argparse.ArgumentParser, user_help: str, team_help: str, team_default: str | None = None
) -> None:
    """`--user` and `--team`: who uses a device; `None` is "not given"."""
    sub.add_argument("--user", default=None, help=user_help)
    sub.add_argument("--team", default=team_default, help=team_help)


def _sees(device: DeviceInfo) -> str:
    """What the device's feed carries, for list-devices' last column."""
    if device.role == "admin":
        return "everything"
    if device.legacy:
        return "everything (from before scopes: set-device to scope it)"
    if device.ending_legacy:
        return "its scope (still ending everything from before scopes: set-device finishes it)"
    return "its scope"


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


@dataclasses.dataclass(frozen=True)
class _ServeApp:
    """The app factory each server process calls; picklable, so workers can be spawned."""

    settings: Settings
    log_level: str
    supervisor_pid: int | None = None

    def __call__(self) -> FastAPI:
        from server.app import create_app
        from server.supervision import end_with_supervisor

        configure_logging(self.log_level)  # a spawned worker starts with no logging set up
        if self.supervisor_pid is not None:
            end_with_supervisor(self.supervisor_pid)
        app = create_app(self.settings)
        settle_collector()
        return app


# uvicorn's supervisor kills a worker that does not answer its ping within this time, and a
# starting worker answers only once it has imported the app: its default of 5 s killed every
# worker of a busy host while it was still importing, restarting them forever.
_WORKER_HEALTHCHECK_S = 60


def _shared_limit(args: argparse.Namespace) -> bool | None:
    if args.rate_limit_scope == "auto":
        return True if args.workers > 1 else None
    return bool(args.rate_limit_scope == "database")


def _serve(args: argparse.Namespace, db_url: str) -> int:
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from server.listen import listening_socket, uvicorn_config

    configure_logging(args.log_level)
    settings = Settings(
        db_url=db_url,
        rate_limit_burst=args.rate_limit_burst,
        rate_limit_per_second=args.rate_limit_per_second,
        rate_limit_shared=_shared_limit(args),
        worker_search=args.worker_search,
        max_in_flight_requests=args.max_in_flight,
        max_queued_requests=args.max_queued,
        idempotency_retention_seconds=args.key_retention_days * _DAY,
        attachments_dir=args.attachments_dir,
        attachment_content_types=tuple(
            kind.strip() for kind in args.attachment_types.split(",") if kind.strip()
        ),
        upload_expiry_seconds=args.upload_expiry_days * _DAY,
        console_secure_cookies=args.console_secure_cookies,
        **_sizes(args),
    )
    # Create the schema once here, before any worker races another to it.
    open_store(db_url).close()
    sock = listening_socket(args.host, args.port)
    host, port = sock.getsockname()[:2]
    url_host = f"[{host}]" if ":" in host else host
    log_event(
        logger, logging.INFO, "listening", url=f"http://{url_host}:{port}", port=port,
        workers=args.workers,
    )  # fmt: skip
    config = uvicorn_config(
        _ServeApp(settings, args.log_level, os.getpid() if args.workers > 1 else None),
        factory=True,
        log_level=args.log_level,
        workers=args.workers,
        timeout_worker_healthcheck=_WORKER_HEALTHCHECK_S,
    )
    try:
        if args.workers > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
    return 0


def _add_device(store: Store, args: argparse.Namespace) -> int:
    try:
        token = add_device(store, args.name, args.role, user=args.user, team=args.team)
    except DeviceExistsError:
        print(f"device {args.name!r} already exists", file=sys.stderr)
        return 1
    print(f"Added {args.role} device {args.name!r}. Its token (shown only now):")
    print(token)
    return 0


def _set_device(store: Store, args: argparse.Namespace) -> int:
    if args.user is None and args.team is None:
        print("set-device: give --user, --team or both", file=sys.stderr)
        return 2
    changed = set_device(store, args.name, user=args.user, team=args.team)
    if changed is None:
        print(f"no device named {args.name!r}", file=sys.stderr)
        return 1
    print(f"Device {changed.name!r}: user {changed.user!r}, team {changed.team!r}.")
    return 0


#: The commands that say who uses a device (checked by the rules), by what they do to it.
_PERSON_COMMANDS: dict[str, tuple[str, Callable[[Store, argparse.Namespace], int]]] = {
    "add-device": ("add", _add_device),
    "set-device": ("change", _set_device),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    db_url = args.db or default_db_url()
    if args.command == "serve":
        return _serve(args, db_url)
    store = open_store(db_url)
    try:
        for commands, noun in ((USER_COMMANDS, "user"), (_PERSON_COMMANDS, "device")):
            if args.command in commands:
                action, run = commands[args.command]
                try:
                    return run(store, args)
                except ValueError as error:  # a name, role, password, user or team refused
                    print(f"cannot {action} {noun}: {error}", file=sys.stderr)
                    return 2
        if args.command == "revoke-device":
            if not revoke_device(store, args.name):
                print(f"no active device named {args.name!r}", file=sys.stderr)
                return 1
            print(f"Revoked {args.name!r}.")
        elif args.command == "list-devices":
            use = device_use(store)
            for device in list_devices(store):
                state = f"revoked {device.revoked_at}" if device.revoked_at else "active"
                held = use.get(device.name, DeviceUse())
                print(
                    f"{device.name}\t{device.role}\t{device.created_at}\t{state}"
                    f"\t{device.user}\t{device.team}\t{_sees(device)}"
                    f"\tuploading {mib(held.unfinished)}\tstored {mib(held.stored)}"
                )
        elif args.command == "prune-keys":
            settings = dataclasses.replace(
                Settings(db_url=db_url),
                idempotency_retention_seconds=args.key_retention_days * _DAY,
            )
            print(f"Pruned {prune_expired(store, settings)} idempotency keys.")
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
