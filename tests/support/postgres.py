"""A throwaway PostgreSQL cluster for tests and benchmarks (initdb + pg_ctl in a temp dir).

initdb refuses to run as root, so when we are root the cluster is created and run as the
`postgres` system user (Debian's package creates it). The server listens on loopback only, on
a free port, with its unix socket inside the temp dir; `stop()` removes everything.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg2

__all__ = [
    "PostgresCluster",
    "PostgresUnavailable",
    "find_pg_bin",
    "running_postgres",
    "running_postmasters",
]

_SEARCH = ("/usr/lib/postgresql/*/bin", "/usr/local/pgsql/bin")


class PostgresUnavailable(RuntimeError):
    """PostgreSQL server binaries are not installed."""


def find_pg_bin() -> Path:
    """The directory holding initdb/pg_ctl (newest Debian version first, or `PG_BIN`)."""
    if os.environ.get("PG_BIN"):
        return Path(os.environ["PG_BIN"])
    candidates = []
    for pattern in _SEARCH:
        root = Path("/")
        candidates.extend(sorted(root.glob(pattern.lstrip("/")), reverse=True))
    on_path = shutil.which("initdb")
    if on_path:
        candidates.append(Path(on_path).parent)
    for candidate in candidates:
        if (candidate / "initdb").exists() and (candidate / "pg_ctl").exists():
            return candidate
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, pg_ctl) not found. Install the Debian package "
        "`postgresql` (`make test` runs scripts/system-deps.sh, which does), or set PG_BIN."
    )


_SERVER_TEMPLATE = "fieldsync_schema_template"
# The clusters this process started, for tests/support/cpu_profile.py: pg_ctl detaches the
# postmaster, so no getrusage of ours counts what PostgreSQL spends.
_RUNNING: set[PostgresCluster] = set()


def running_postmasters() -> list[int]:
    """The postmaster pids of the clusters this process has running."""
    pids = []
    for cluster in list(_RUNNING):
        with contextlib.suppress(OSError, ValueError, IndexError):
            pids.append(int((cluster.data / "postmaster.pid").read_text().split()[0]))
    return pids


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class PostgresCluster:
    """A running cluster; `create_database(name)` returns a `postgresql://` URL."""

    def __init__(self, *, durable: bool = False) -> None:
        self.bin = find_pg_bin()
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="fieldsync-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "postgres.log"
        self.port = _free_port()
        self._as_user: list[str] = []
        self._server_template = False
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self._as_user = ["runuser", "-u", "postgres", "--"]

    def _run(self, *args: str) -> None:
        command = [*self._as_user, *args]
        result = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed:\n{result.stderr}\n{log}")

    def start(self) -> None:
        self._run(
            str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres",
            "-E", "UTF8", "--no-locale", "--no-sync",
        )  # fmt: skip
        options = [
            "-c listen_addresses=127.0.0.1",
            f"-k {self.root}",
            "-c max_connections=300",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        # Another process (a second pytest-xdist worker, say) may take the free port between
        # `_free_port` and the bind: then try another one.
        for attempt in range(3):
            try:
                self._run(
                    str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
                    "-o", " ".join([f"-p {self.port}", *options]), "-w", "-t", "60", "start",
                )  # fmt: skip
                _RUNNING.add(self)
                return
            except RuntimeError as error:
                if attempt == 2 or "already in use" not in str(error):
                    raise
                self.port = _free_port()

    def stop(self) -> None:
        _RUNNING.discard(self)
        with contextlib.suppress(Exception):
            self._run(
                str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"
            )
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str, *, template: str | None = None) -> str:
        """Create database `name` (a plain identifier), empty or a copy of database
        `template`, and return its URL."""
        if not name.isidentifier() or not (template or "x").isidentifier():
            raise ValueError(name)
        copy = f' TEMPLATE "{template}"' if template else ""
        connection = psycopg2.connect(host="127.0.0.1", port=self.port, user="postgres",
                                      dbname="postgres")  # fmt: skip
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"{copy}')
        finally:
            connection.close()
        return self.url(name)

    def create_server_database(self, name: str) -> str:
        """Database `name` holding the server's schema, as `open_store` leaves a new one: a
        copy of a database migrated once per cluster, since every schema step again for
        each test costs more than the copy."""
        if not self._server_template:
            from server.db.store import open_store  # the server, only for tests that use it

            open_store(self.create_database(_SERVER_TEMPLATE)).close()
            self._server_template = True
        return self.create_database(name, template=_SERVER_TEMPLATE)


@contextlib.contextmanager
def running_postgres(*, durable: bool = False) -> Iterator[PostgresCluster]:
    cluster = PostgresCluster(durable=durable)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
