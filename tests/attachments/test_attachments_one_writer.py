"""`app.attachments.rows` is the only writer of the device's attachments table, and one
derivation (`app.states.attachment_state`) says what a row means."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The writer, and the migrations that shape the table.
WRITERS = {"app/attachments/rows.py", "app/store/migrations.py"}
WRITE = re.compile(
    r"\b(UPDATE|INSERT(\s+OR\s+\w+)?\s+INTO|DELETE\s+FROM|REPLACE\s+INTO)\s+attachments\b",
    re.IGNORECASE,
)
#: SQL that decides an attachment failed by its job's status: the state's second home.
DERIVED = re.compile(r"status\s+IN\s*\(\s*'dead',\s*'conflict',\s*'done'\s*\)", re.IGNORECASE)


def device_sources() -> list[tuple[str, str]]:
    found = []
    for package in ("app", "ui"):  # the server has its own database
        for path in sorted((ROOT / package).rglob("*.py")):
            found.append((path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8")))
    assert len(found) > 50
    return found


def test_no_module_but_the_writer_writes_the_attachments_table() -> None:
    offenders = [
        f"{name}:{number}: {line.strip()}"
        for name, text in device_sources()
        if name not in WRITERS
        for number, line in enumerate(text.splitlines(), 1)
        if WRITE.search(line)
    ]
    assert offenders == []


def test_no_sql_derives_an_attachments_state_again() -> None:
    offenders = [
        f"{name}:{number}"
        for name, text in device_sources()
        for number, line in enumerate(text.splitlines(), 1)
        if DERIVED.search(line)
    ]
    assert offenders == []


def test_the_checks_see_a_write_and_a_derivation() -> None:
    assert WRITE.search('"UPDATE attachments SET stored = 0 WHERE sha256 = ?"')
    assert WRITE.search("DELETE FROM attachments AS a WHERE a.id IN (?)")
    assert WRITE.search('"INSERT INTO attachments (id, entity_id) VALUES (?, ?)"')
    assert not WRITE.search("SELECT * FROM attachments")
    assert not WRITE.search("UPDATE attachments_fts SET")
    assert DERIVED.search("SUM(j.status IN ('dead', 'conflict', 'done'))")
