"""A real PostgreSQL server on loopback in a temporary directory, for shared-study tests.

initdb and pg_ctl refuse to run as root: as root the server runs as the ``postgres`` user (its
directory handed to it). The server listens on 127.0.0.1 and a socket in its own directory, trusts
local connections, and is stopped by its data directory (``-m immediate``) whatever the test did.
Every command has stdin closed and the hang guard as its timeout, so nothing waits forever.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.waiting import HANG_GUARD_S

BIN_DIRS = ("/usr/lib/postgresql/15/bin",)


def _binary(name: str) -> str | None:
    for folder in BIN_DIRS:
        if os.access(Path(folder) / name, os.X_OK):
            return str(Path(folder) / name)
    return shutil.which(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(argv: list[str], as_postgres: bool) -> None:
    prefix = ["runuser", "-u", "postgres", "--"] if as_postgres else []
    done = subprocess.run(prefix + argv, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=HANG_GUARD_S)
    if done.returncode:
        raise RuntimeError(f"{' '.join(argv[:2])} failed ({done.returncode}): {done.stderr[-1500:] or done.stdout[-1500:]}")


@contextmanager
def postgres_server() -> Iterator[str]:
    """The URL of a fresh database ``tune`` on a server that lives for the block."""
    initdb, pg_ctl = _binary("initdb"), _binary("pg_ctl")
    if initdb is None or pg_ctl is None:
        pytest.skip("PostgreSQL's initdb/pg_ctl are not installed (make postgres installs them)")
    as_postgres = os.geteuid() == 0
    if as_postgres:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres user for initdb/pg_ctl to run as")
    home = Path(tempfile.mkdtemp(prefix="dynrag-pg-"))  # under /tmp: the postgres user can reach it
    data, port = home / "data", _free_port()
    if as_postgres:
        os.chmod(home, 0o755)
        shutil.chown(home, "postgres")
    started = False
    try:
        _run([initdb, "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync"], as_postgres)
        _run([pg_ctl, "-D", str(data), "-o", f"-p {port} -k {home} -c listen_addresses=127.0.0.1 -c fsync=off",
              "-l", str(home / "log"), "-w", "-t", str(int(HANG_GUARD_S)), "start"], as_postgres)
        started = True
        import psycopg

        with psycopg.connect(f"postgresql://postgres@127.0.0.1:{port}/postgres", autocommit=True,
                             connect_timeout=30) as conn:
            conn.execute("CREATE DATABASE tune")
        yield f"postgresql://postgres@127.0.0.1:{port}/tune"
    finally:
        if started:
            _run([pg_ctl, "-D", str(data), "-m", "immediate", "-w", "-t", "60", "stop"], as_postgres)
        shutil.rmtree(home, ignore_errors=True)
