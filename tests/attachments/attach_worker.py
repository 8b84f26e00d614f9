"""A second process attaching a file (as ``fieldsync attach`` does while the app runs), paused
between the copy and its row: ``attach_worker.py DATA_DIR WORK_ORDER FILE`` prints ``copied``
once the bytes are in, waits for a line on stdin, then prints the new attachment id."""

from __future__ import annotations

import sys
from pathlib import Path

from app.attachments import Attachments
from app.attachments.files import StoredFile
from app.store.store import Store


def main(data_dir: str, work_order: str, source: str) -> int:
    with Store(Path(data_dir)) as store:
        attachments = Attachments(store)
        copy_in = attachments.files.copy_in

        def paused_copy(path: Path, max_bytes: int) -> StoredFile:
            stored = copy_in(path, max_bytes)
            print("copied", flush=True)
            sys.stdin.readline()
            return stored

        attachments.files.copy_in = paused_copy  # type: ignore[method-assign]
        view = attachments.attach(work_order, Path(source))
        print(view.id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:4]))
