"""Drafts: the editor's typing, durable, never queued, removed with its save; a work order
with one stays on the device across an app restart; `fieldsync status --json` counts them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from store_support import FakeClock

from app.store.drafts import NEW_FORM, Draft, drop_draft, keep_draft, read_draft
from app.store.editing import hold_for_editing, release_all_editing
from app.store.store import Store

BASE = {"title": "Replace valve", "site": "North yard", "notes": ""}


def draft_of(entity_id: str, notes: str, at: float = 1000.0, version: int | None = 1) -> Draft:
    return Draft(entity_id, {**BASE, "notes": notes}, dict(BASE), version, at)


def test_a_draft_is_kept_and_read_back_and_never_queued(store: Store, data_dir: Path) -> None:
    keep_draft(store, draft_of("wo-1", "Gasket"))
    keep_draft(store, draft_of("wo-1", "Gasket replaced", at=1001.0))
    store.close()
    with Store(data_dir) as reopened:  # another process, after a kill: it is on disk
        draft = read_draft(reopened, "wo-1")
        assert draft is not None
        assert draft.fields["notes"] == "Gasket replaced"
        assert draft.typed == {"notes": "Gasket replaced"}
        assert draft.base == BASE
        assert draft.base_version == 1
        assert draft.updated_at == 1001.0
        assert reopened.stats()["drafts"] == 1
        assert sum(reopened.stats()["queue_depth"].values()) == 0  # never sent
        assert drop_draft(reopened, "wo-1")
        assert read_draft(reopened, "wo-1") is None
        assert not drop_draft(reopened, "wo-1")


def test_a_new_forms_draft_has_its_own_key(store: Store) -> None:
    keep_draft(store, Draft(NEW_FORM, {"title": "New pump"}, {"title": ""}, None, 5.0))
    draft = read_draft(store, NEW_FORM)
    assert draft is not None
    assert draft.base_version is None
    assert draft.typed == {"title": "New pump"}
    assert read_draft(store, "wo-1") is None


def test_a_damaged_row_reads_as_no_draft_and_stays(store: Store) -> None:
    store.db.execute_sql(
        "INSERT INTO drafts (entity_id, fields, base, updated_at) VALUES ('x', '[1]', '{}', 1)"
    )
    assert read_draft(store, "x") is None
    assert store.stats()["drafts"] == 1


def test_a_draft_keeps_its_work_orders_hold_across_a_restart(store: Store) -> None:
    drafted, plain = store.import_records([{"title": "Drafted"}, {"title": "Plain"}])
    assert hold_for_editing(store, drafted)
    assert hold_for_editing(store, plain)
    keep_draft(store, draft_of(drafted, "typed"))
    release_all_editing(store)  # the app starts again
    held = {row[0] for row in store.read("SELECT entity_id FROM editing_holds")}
    assert held == {drafted}


def test_status_json_counts_drafts(store: Store, data_dir: Path, clock: FakeClock) -> None:
    keep_draft(store, draft_of("wo-1", "one"))
    keep_draft(store, draft_of("wo-2", "two"))
    store.close()
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "status", "--json"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert json.loads(done.stdout)["drafts"] == 2
    text = subprocess.run(
        [sys.executable, "-m", "app.cli", "--data-dir", str(data_dir), "status"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "unsaved drafts: 2" in text.stdout
