"""`fieldsync` commands that talk to the server: login, sync, worker, dead, conflicts."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import getpass
import json
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.cli import (
    JOB_ID,
    SignInNeeded,
    UsageError,
    bounded_int,
    command,
    open_store,
    parse_assignments,
    positive_float,
    print_json,
)
from app.credentials import get_token, normalize_server_url, redact, store_token
from app.events import AuthRequired
from app.process import settle_collector
from app.store.deadletters import get_dead, list_dead
from app.store.errors import WorkerLockHeldError
from app.store.lock import WorkerLock
from app.store.settings import read_setting, write_setting
from app.store.store import Store
from app.sync.conflicts import Conflicts
from app.sync.errors import SyncError

# The engine, its transport (httpx) and the desktop's D-Bus parts are imported by the commands
# that use them: every `fieldsync` command builds this module's parsers, and a command on the
# local store (`fieldsync list`, `create`) would pay a fifth of a second of CPU for them.
if TYPE_CHECKING:
    from app.sync.engine import SyncEngine
    from app.sync.sync_now import SyncReport

__all__ = ["add_parsers"]

SERVER_KEY = "server_url"


def server_url(args: argparse.Namespace, store: Store) -> str:
    url = args.server or read_setting(store, SERVER_KEY)
    if not url:
        raise UsageError("no server: pass --server URL (login remembers it)")
    return _normalized(url)


def _normalized(url: str) -> str:
    try:
        return normalize_server_url(url)
    except ValueError as exc:
        raise UsageError(f"--server: {exc}") from None


def token_for(url: str) -> str:
    return get_token(url)  # CredentialsError: no keyring, or no token stored (exit 1)


def make_engine(args: argparse.Namespace, store: Store) -> SyncEngine:
    from app.sync.engine import SyncConfig, SyncEngine

    url = server_url(args, store)
    token = token_for(url)
    config = SyncConfig(server_url=url, batch_size=args.batch_size)
    return SyncEngine(store, config, token=lambda: token)


@command("login")
def cmd_login(args: argparse.Namespace) -> int:
    if not args.server:
        raise UsageError("login needs --server URL")
    url = _normalized(args.server)
    if sys.stdin.isatty():
        token = getpass.getpass(f"Device token for {url}: ")
    else:
        token = sys.stdin.readline()
    token = token.strip()
    if not token:
        raise UsageError("no token given")
    verified = asyncio.run(_check_token(url, token))
    if verified is False:
        raise SignInNeeded(f"{url} refused this token (401): ask an admin for a new one")
    # The server is remembered first: a headless device without a keyring still syncs with
    # FIELDSYNC_TOKEN, and the keyring's failure below says so.
    with open_store(args) as store, store.db.atomic():
        write_setting(store, SERVER_KEY, url)
    store_token(url, token)
    note = "" if verified else " (server not reachable now: the token was not checked)"
    print(f"signed in to {url}{note}")
    return 0


async def _check_token(url: str, token: str) -> bool | None:
    from app.sync.transport import ServerClient

    client = ServerClient(url, lambda: token)
    try:
        reply = await client.changes(None, 1)
    except SyncError:
        return None
    finally:
        await client.aclose()
    return reply.status != 401


def _no_worker_running(store: Store) -> None:
    probe = WorkerLock(store.data_dir)
    try:
        probe.acquire()
    except WorkerLockHeldError as exc:
        raise UsageError(str(exc)) from None
    probe.release()


@command("sync")
def cmd_sync(args: argparse.Namespace) -> int:
    """Without --until-idle, one "Sync now" as the app's button does it, said in its words;
    with it, deliver and reconcile until nothing can move without a person."""
    with open_store(args) as store:
        _no_worker_running(store)
        engine = make_engine(args, store)
        settle_collector()  # 20,000 replies: 60 ms of collections in a 2 s drain
        if not args.until_idle:
            return _sync_now(engine, args.timeout or 60.0)
        try:
            idle = asyncio.run(engine.run_until_idle(args.timeout))
        except WorkerLockHeldError as exc:
            raise UsageError(str(exc)) from None
        depth = store.stats()["queue_depth"]
    if engine.auth_paused:
        print(f"fieldsync: {engine.last_error}", file=sys.stderr)
        return 3
    summary = ", ".join(f"{k} {v}" for k, v in depth.items() if v)
    if not idle:
        why = f": {engine.last_error}" if engine.last_error else ""
        print(f"fieldsync: not idle before the timeout ({summary}){why}", file=sys.stderr)
        return 1
    print(f"idle: {summary or 'nothing queued'}")
    return 0


def _sync_now(engine: SyncEngine, limit_s: float) -> int:
    from app.sync.sync_now import SyncProblem, report_in_words

    try:
        report = asyncio.run(_one_pass(engine, limit_s))
    except WorkerLockHeldError as exc:
        raise UsageError(str(exc)) from None
    if report is None:
        why = f": {engine.last_error}" if engine.last_error else ""
        print(f"fieldsync: not synced before the timeout{why}", file=sys.stderr)
        return 1
    if report.problem is None:
        print(report_in_words(report))
        return 0
    words = report_in_words(report)
    if report.problem is SyncProblem.STOPPED:
        words = "Not synced: the sync engine stopped."
    detail = f" ({report.detail})" if report.detail else ""
    print(f"fieldsync: {words}{detail}", file=sys.stderr)
    return 3 if report.problem is SyncProblem.SIGNED_OUT else 1


async def _one_pass(engine: SyncEngine, limit_s: float) -> SyncReport | None:
    """Flush, pull and revalidate once (None: not done within ``limit_s``), then stop."""
    runner = asyncio.create_task(engine.run())
    try:
        async with asyncio.timeout(limit_s):
            return await engine.sync_now()
    except TimeoutError:
        return None
    finally:
        await engine.stop()
        if runner.done():
            runner.result()  # the lock held by another worker, a storage error: say it
        else:
            runner.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await runner


@command("worker")
def cmd_worker(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    with open_store(args) as store:
        if not args.wait_for_lock:
            _no_worker_running(store)  # systemd restarts it: exit, and try again then
        engine = make_engine(args, store)
        settle_collector()
        refused = asyncio.run(_run_worker(engine, store.data_dir))
    if refused:
        # Exit, so the service manager restarts it (Restart=on-failure) and it reads the
        # token again: after `fieldsync login` it delivers without a person restarting it.
        print(f"fieldsync: worker stopped: {refused}. Sign in: fieldsync login", file=sys.stderr)
        return 3
    return 0


async def _run_worker(engine: SyncEngine, data_dir: Path) -> str | None:
    """Deliver until SIGTERM/SIGINT (None) or until the server refuses the token (why)."""
    from app.desktop.launch import worker_notifier
    from app.desktop.network import NetworkWatch
    from app.desktop.sleep import SleepGuard

    loop = asyncio.get_running_loop()
    stopping = asyncio.Event()
    refused: list[str] = []

    def on_event(event: object) -> None:
        if isinstance(event, AuthRequired):
            refused.append(event.reason)
            loop.call_soon_threadsafe(stopping.set)

    engine.events.subscribe(on_event)
    notifier = worker_notifier(engine, data_dir)
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    guard = SleepGuard(engine)
    guard.subscribe(engine.events)
    runner = asyncio.create_task(engine.run())
    # Notifications, logind's sleep and wake, NetworkManager's hint: the desktop's parts.
    desktop = [
        asyncio.create_task(notifier.run()),
        asyncio.create_task(guard.run()),
        asyncio.create_task(NetworkWatch(engine).run()),
    ]
    print("worker: delivering", flush=True)
    waiter = asyncio.create_task(stopping.wait())
    await asyncio.wait({runner, waiter}, return_when=asyncio.FIRST_COMPLETED)
    await engine.stop()
    waiter.cancel()
    # The last notice (signed out, say) is shown before the worker goes.
    await notifier.drain(timeout_s=3.0)
    for task in desktop:
        task.cancel()
    await asyncio.gather(*desktop, return_exceptions=True)
    with contextlib.suppress(asyncio.CancelledError):
        await runner
    print("worker: stopped", flush=True)
    return refused[0] if refused else None


@command("dead")
def cmd_dead(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        if args.action == "list":
            jobs = list_dead(store)
            if args.json:
                print_json([_dead_json(job) for job in jobs])
            for job in [] if args.json else jobs:
                print(f"{job.id}  {job.op:<6} {job.entity_id}  {job.last_error}")
            return 0
        if args.id is None:
            raise UsageError(f"dead {args.action} needs a job id")
        if args.action == "show":
            shown = get_dead(store, args.id)
            if shown is None:
                raise UsageError(f"no dead job {args.id}")
            print_json(_dead_json(shown))
        elif args.action == "retry":
            payload = None
            if args.fields:
                edited = get_dead(store, args.id)
                if edited is None:
                    raise UsageError(f"no dead job {args.id}")
                payload = _edited_payload(
                    edited.entity_id, edited.payload, parse_assignments(args.fields)
                )
            key = store.queue.retry_dead(args.id, payload)
            print(f"queued again (idempotency key {key})")
        elif args.action == "discard":
            Conflicts(store).give_up(args.id)
            print(f"discarded job {args.id} (kept in the audit log)")
    return 0


def _edited_payload(
    entity_id: str, payload: dict[str, Any], fields: dict[str, Any]
) -> dict[str, Any]:
    """The dead job's payload with ``fields`` set, checked by the mutation contract."""
    from app.mutations import validate_mutation
    from app.records import ValidationError, format_validation_error

    merged = {**payload.get("fields", {}), **fields}
    try:
        checked = validate_mutation(str(payload.get("op")), entity_id, merged)
    except ValidationError as exc:
        raise UsageError(format_validation_error(exc)) from None
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return {**payload, "op": checked.op, "fields": checked.fields}


def _dead_json(job: Any) -> dict[str, Any]:
    data = {k: v for k, v in job.__dict__.items() if k != "attempts"}
    data["attempts"] = [a.__dict__ for a in job.attempts]
    return data


@command("conflicts")
def cmd_conflicts(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        conflicts = Conflicts(store)
        if args.action == "list":
            views = conflicts.views()
            if args.json:
                print_json([v.to_json() for v in views])
            for v in [] if args.json else views:
                print(f"{v.job_id}  {v.kind:<18} {v.status:<10} {v.entity_id}  {v.title}")
            return 0
        if args.action in ("review", "decide"):
            return asyncio.run(_review(args, store))
        if args.id is None:
            raise UsageError(f"conflicts {args.action} needs a job id")
        if args.action == "show":
            print_json(conflicts.get(args.id).to_json())
        elif args.action == "resolve":
            choice = _choice(args)
            print(conflicts.resolve(args.id, choice))
        elif args.action == "escalate":
            conflicts.escalate(args.id, args.note)
            print("sent to an admin at the next sync; the record waits for review")
    return 0


def _choice(args: argparse.Namespace) -> Any:
    picked = [name for name in ("mine", "theirs", "restore") if getattr(args, name)]
    if args.field:
        if picked:
            raise UsageError("use --field or one of --mine/--theirs/--restore, not both")
        choices: dict[str, str] = {}
        for item in args.field:
            name, sep, side = item.partition("=")
            if not sep or side not in ("mine", "theirs"):
                raise UsageError(f"--field takes F=mine or F=theirs, got {item!r}")
            choices[name] = side
        return choices
    if len(picked) != 1:
        raise UsageError("choose one of --mine, --theirs, --restore or --field F=mine|theirs")
    return picked[0]


async def _review(args: argparse.Namespace, store: Store) -> int:
    from app.sync.transport import ServerClient

    url = server_url(args, store)
    token = token_for(url)
    client = ServerClient(url, lambda: token)
    try:
        if args.action == "review":
            reply = await client.conflicts(args.status)
            _refused(reply.status)
            if reply.status != 200 or reply.body is None:
                raise SyncError(f"the server answered {reply.status}: {_body(reply, token)}")
            print_json(reply.body.get("conflicts", []))
            return 0
        if args.review_id is None:
            raise UsageError("conflicts decide needs --review-id ID")
        if bool(args.dismiss) == bool(args.set):
            # Neither would keep the server's record and drop the worker's edit unasked.
            raise UsageError("conflicts decide needs --set field=value ... or --dismiss")
        if args.dismiss:
            reply = await client.dismiss_conflict(args.review_id)
        else:
            detail = await client.conflict(args.review_id)
            body = (detail.body or {}).get("conflict") or {}
            fields = parse_assignments(args.set or [])
            current = body.get("server") or {}
            reply = await client.resolve_conflict(
                args.review_id,
                {"fields": fields, "base_version": current.get("version")},
            )
        _refused(reply.status)
        if reply.status != 200:
            raise SyncError(f"the server answered {reply.status}: {_body(reply, token)}")
        print_json(reply.body)
        return 0
    finally:
        await client.aclose()


def _refused(status: int) -> None:
    if status == 401:
        raise SignInNeeded("the server refused this device's token (401): fieldsync login")


def _body(reply: Any, token: str) -> str:
    """A reply body for a message: one line, never the token (a misconfigured proxy may
    echo the Authorization header back)."""
    return redact(json.dumps(reply.body)[:500], token)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("login", help="store this device's token in the system keyring")
    p = sub.add_parser(
        "sync", help='deliver queued edits and pull server changes once: "3 sent, 12 received"'
    )
    p.add_argument("--until-idle", action="store_true", help="wait until nothing is pending")
    p.add_argument("--timeout", type=positive_float, default=None, help="give up after S seconds")
    p.add_argument("--batch-size", type=bounded_int(1, 500), default=100)
    p = sub.add_parser("worker", help="deliver in the background until SIGTERM/SIGINT")
    p.add_argument("--batch-size", type=bounded_int(1, 500), default=100)
    p.add_argument(
        "--wait-for-lock",
        action="store_true",
        help="stand by while the app (or another worker) delivers, instead of exiting "
        "(the session autostart entry, where no service manager restarts the worker)",
    )
    p = sub.add_parser("dead", help="review dead-lettered edits")
    p.add_argument("action", choices=("list", "show", "retry", "discard"))
    p.add_argument("id", nargs="?", type=JOB_ID)
    p.add_argument("fields", nargs="*", metavar="field=value", help="retry with edited fields")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("conflicts", help="list, resolve or escalate conflicts")
    p.add_argument("action", choices=("list", "show", "resolve", "escalate", "review", "decide"))
    p.add_argument("id", nargs="?", type=JOB_ID)
    p.add_argument("--json", action="store_true")
    p.add_argument("--mine", action="store_true")
    p.add_argument("--theirs", action="store_true")
    p.add_argument("--restore", action="store_true")
    p.add_argument("--field", action="append", metavar="F=mine|theirs")
    p.add_argument("--note")
    p.add_argument("--status", default="open", choices=("open", "resolved", "dismissed"))
    p.add_argument("--review-id")
    p.add_argument("--dismiss", action="store_true")
    p.add_argument("--set", action="append", metavar="field=value", help="decide: merged fields")
