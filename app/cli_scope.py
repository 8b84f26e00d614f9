"""`fieldsync` commands of scoped sync (issue 16): pin, unpin, search, whoami.

``pin``/``unpin`` are saved on the device first and sent at once; without the server they
wait and go before the next pull (``fieldsync sync`` or the worker), so the command succeeds
and says so. ``search`` needs the server: without it, it says so and exits 1.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from app.cli import SignInNeeded, UsageError, bounded_int, command, open_store, print_json
from app.cli_sync import server_url, token_for
from app.executor import StoreExecutor
from app.store.scope import read_identity
from app.store.store import Store
from app.sync.errors import AuthError

# What talks to the server (httpx) is imported by the commands that do: building the parsers
# of every `fieldsync` command must not load it (app/cli_sync.py says why).
if TYPE_CHECKING:
    from app.sync.scope import SearchPage
    from app.sync.transport import ServerClient

__all__ = ["add_parsers"]

SEARCH_LIMIT_MAX = 500


def _client(args: argparse.Namespace, store: Store) -> ServerClient:
    from app.sync.transport import ServerClient

    url = server_url(args, store)
    token = token_for(url)
    return ServerClient(url, lambda: token)


async def _with_client(args: argparse.Namespace, store: Store, work: Any) -> Any:
    """Run ``work(executor, client)``: the store is used from one thread, as the app does."""
    client = _client(args, store)
    executor = StoreExecutor()
    try:
        return await work(executor, client)
    except AuthError as exc:
        raise SignInNeeded(f"{exc} (fieldsync login)") from None
    finally:
        await client.aclose()
        executor.submit(store.db.close)
        executor.shutdown()


def _pin(args: argparse.Namespace, pinned: bool) -> int:
    from app.sync.scope import set_pin

    with open_store(args) as store:

        async def work(executor: StoreExecutor, client: ServerClient) -> str:
            try:
                return await set_pin(store, executor, client, args.id, pinned)
            except ValueError as exc:
                raise UsageError(str(exc)) from None

        outcome = asyncio.run(_with_client(args, store, work))
    word = "pinned" if pinned else "unpinned"
    if outcome == "queued":
        print(f"{word} {args.id} on this device; the server is out of reach: sent at the next sync")
    elif pinned:
        print(f"pinned {args.id}: kept offline on this device")
    else:
        print(f"unpinned {args.id}")
    return 0


@command("pin")
def cmd_pin(args: argparse.Namespace) -> int:
    return _pin(args, True)


@command("unpin")
def cmd_unpin(args: argparse.Namespace) -> int:
    return _pin(args, False)


@command("search")
def cmd_search(args: argparse.Namespace) -> int:
    if not args.query.strip():
        raise UsageError("search needs some text to look for")
    from app.sync.scope import NeedsConnection, search

    with open_store(args) as store:

        async def work(executor: StoreExecutor, client: ServerClient) -> SearchPage:
            return await search(
                store, executor, client, args.query, limit=args.limit, cursor=args.cursor
            )

        try:
            page: SearchPage = asyncio.run(_with_client(args, store, work))
        except NeedsConnection as exc:
            print(f"fieldsync: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print_json(page.to_json())
        return 0
    for record in page.records:
        where = "offline" if record["available_offline"] else "server"
        who = record.get("assignee") or "-"
        print(f"{record['id']}  {record['status']:<11} {where:<7} {who:<16} {record['title']}")
    if not page.records:
        print("no work orders found")
    if page.next_cursor is not None:
        print(f"more: fieldsync search {args.query!r} --cursor {page.next_cursor}")
    return 0


@command("whoami")
def cmd_whoami(args: argparse.Namespace) -> int:
    """Who the server last said this device is (learnt at each sync)."""
    with open_store(args) as store:
        identity = read_identity(store)
    if identity is None:
        print(
            "fieldsync: the server has not said who this device is yet: fieldsync sync",
            file=sys.stderr,
        )
        return 1
    if args.json:
        print_json(identity.to_json())
    else:
        team = identity.team or "no team"
        print(f"{identity.device}: user {identity.user}, {team}, {identity.role}")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("pin", help='keep a work order offline ("Keep offline")')
    p.add_argument("id")
    p = sub.add_parser("unpin", help="stop keeping a work order offline")
    p.add_argument("id")
    p = sub.add_parser("search", help="search the server's work orders (needs a connection)")
    p.add_argument("query")
    p.add_argument("--json", action="store_true")
    p.add_argument("--limit", type=bounded_int(1, SEARCH_LIMIT_MAX), default=50)
    p.add_argument("--cursor", help="`next_cursor` of the previous page")
    p = sub.add_parser("whoami", help="this device's user, team and role on the server")
    p.add_argument("--json", action="store_true")
