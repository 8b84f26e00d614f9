"""Seeded SQLite server databases kept between benchmark runs (`scope_bench.py --seed-cache`).

Seeding a million work orders into SQLite takes minutes; the figures do not depend on which
run wrote the rows. A cached database is used only when it was written by the same seed and
server schema: its name carries a digest of `seed.py`, the server's models, schema steps and
scope rules, and the population. A run gets a copy (it writes to its database) and the seed
time the cache entry was made with, marked `seed_from_cache`. PostgreSQL runs in a throwaway
cluster and is always seeded afresh.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

__all__ = ["cached_seed", "keep_seed"]

_ROOT = Path(__file__).resolve().parent.parent
_SOURCES = (
    "benchmarks/seed.py",
    "server/db/models.py",
    "server/db/schema.py",
    "server/scope/keys.py",
)


def _digest(work_orders: int) -> str:
    digest = hashlib.sha256(f"work_orders={work_orders}".encode())
    for name in _SOURCES:
        digest.update((_ROOT / name).read_bytes())
    return digest.hexdigest()[:16]


def _paths(cache: Path, work_orders: int) -> tuple[Path, Path]:
    stem = cache / f"scope-{work_orders}-{_digest(work_orders)}"
    return stem.with_suffix(".sqlite3"), stem.with_suffix(".json")


def cached_seed(cache: Path, work_orders: int, target: Path) -> dict[str, Any] | None:
    """Copy the cached database for `work_orders` to `target` and return what its seeding
    recorded (tokens, ids, seed time); None when there is none for this code."""
    database, sidecar = _paths(cache, work_orders)
    if not (database.exists() and sidecar.exists()):
        return None
    shutil.copyfile(database, target)
    recorded: dict[str, Any] = json.loads(sidecar.read_text())
    return recorded


def keep_seed(cache: Path, work_orders: int, source: Path, recorded: dict[str, Any]) -> None:
    """Keep a freshly seeded, closed database (no WAL left beside it) for later runs."""
    wal = Path(f"{source}-wal")
    if wal.exists() and wal.stat().st_size > 0:
        return  # not checkpointed: a copy of the main file alone would lose rows
    cache.mkdir(parents=True, exist_ok=True)
    database, sidecar = _paths(cache, work_orders)
    partial = database.with_suffix(".partial")
    shutil.copyfile(source, partial)
    partial.replace(database)
    sidecar.write_text(json.dumps(recorded))
