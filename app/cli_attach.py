"""`fieldsync` commands for photos and files on work orders: attach, attachments, detach."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from app.attachments.model import AttachmentView, in_mib
from app.attachments.store import Attachments
from app.cli import UsageError, command, open_store, print_json
from app.states import AttachmentState

__all__ = ["add_parsers"]


@command("attach")
def cmd_attach(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        view = Attachments(store).attach(args.id, Path(args.file), args.filename)
    print(f"attached {view.filename} ({in_mib(view.size)}) to {view.entity_id}; upload queued")
    print(view.id)
    return 0


@command("attachments")
def cmd_attachments(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        if store.cache.get(args.id) is None:
            raise UsageError(f"no work order {args.id} on this device")
        views = Attachments(store).list_for(args.id)
    if args.json:
        print_json([view.as_json() for view in views])
        return 0
    for view in views:
        print(f"{view.id}  {view.size:>11}  {view.sha256}  {_state(view)}  {view.filename}")
    return 0


def _state(view: AttachmentView) -> str:
    if view.state is AttachmentState.UPLOADING:
        return f"uploading {view.offset}/{view.size}"
    if view.state is AttachmentState.FAILED:
        return f"failed: {view.reason}"
    return str(view.state)


@command("detach")
def cmd_detach(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        view = Attachments(store).detach(args.attachment_id)
    print(f"removed {view.filename} from {view.entity_id}; the server is told on the next sync")
    return 0


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("attach", help="attach a photo or file to a work order; prints its id")
    p.add_argument("id", help="the work order")
    p.add_argument("file")
    p.add_argument("--filename", help="the name to show (default: the file's own)")
    p = sub.add_parser("attachments", help="a work order's attachments and their uploads")
    p.add_argument("id", help="the work order")
    p.add_argument("--json", action="store_true")
    p = sub.add_parser("detach", help="remove an attachment (queued for the server)")
    p.add_argument("attachment_id")
