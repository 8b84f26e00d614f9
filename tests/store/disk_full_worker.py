"""Child of the disk-full test: edits until the file size limit (RLIMIT_FSIZE) stops it.

Usage: disk_full_worker.py DATA_DIR. Prints one JSON object: the ids saved, the error.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

from app.store.errors import StoreError
from app.store.store import Store


def main() -> int:
    store = Store(Path(sys.argv[1]))
    saved = [
        store.record_edit("create", None, {"title": f"before {n}"}).entity_id for n in range(5)
    ]
    store.db.execute_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    # The WAL may now grow to 96 KiB; past that every write fails like a full disk.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    limit = store.path.stat().st_size + 96 * 1024
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    report: dict[str, object] = {}
    try:
        for n in range(10_000):
            fields = {"title": f"fill {n}", "notes": "n" * 9000}
            saved.append(store.record_edit("create", None, fields).entity_id)
    except StoreError as exc:
        report = {"error": type(exc).__name__, "message": str(exc)}
    report["saved"] = saved
    # Still readable after the failure, in the same process.
    report["readable"] = store.cache.get(saved[-1]) is not None
    report["pending"] = store.stats()["queue_depth"]["pending"]
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
