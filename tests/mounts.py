"""Real filesystem faults for tests: a command run in a private mount namespace where one
directory is a fresh tmpfs, read-only or tiny (a full disk).

Tests run as root here, and root writes through `chmod a-w`; a read-only mount stops root too.
`unshare -m` keeps the mount private to the command, so nothing outside it sees the mount and it
vanishes with the command. Where mount namespaces are not allowed (no CAP_SYS_ADMIN and no user
namespaces), ``mounts_unavailable()`` gives the reason and the tests that need it skip with it.
"""

from __future__ import annotations

import functools
import shutil
import subprocess
import sys
from pathlib import Path

DYNRAG = [sys.executable, "-m", "dynrag.cli"]


@functools.cache
def mounts_unavailable() -> str | None:
    """None when a private tmpfs can be mounted, else why not."""
    if shutil.which("unshare") is None:
        return "no `unshare` command: cannot make a private mount namespace for a read-only or full disk"
    probe = subprocess.run(
        ["unshare", "-m", "--propagation", "private", "sh", "-c",
         'd=$(mktemp -d) && mount -t tmpfs -o size=16k,ro tmpfs "$d" && ! touch "$d/x" 2>/dev/null'],
        capture_output=True, text=True, timeout=30,
    )
    if probe.returncode != 0:
        return f"cannot mount a private read-only tmpfs here ({probe.stderr.strip() or probe.returncode})"
    return None


def in_mount(directory: Path, script: str, *, options: str, fill: bool = False, timeout: float = 300,
             cwd: Path | None = None) -> subprocess.CompletedProcess:
    """Run the shell ``script`` with a fresh tmpfs mounted (``options``, e.g. "ro" or "size=64k")
    on ``directory``, which it sees as $M; ``fill`` fills the tmpfs first (a full disk). The shell
    function ``dynrag`` runs the dynrag command of this Python."""
    directory.mkdir(parents=True, exist_ok=True)
    prelude = 'mount -t tmpfs -o "$OPTS" tmpfs "$M" || exit 97\n'
    if fill:
        prelude += 'dd if=/dev/zero of="$M/.fill" bs=4k 2>/dev/null\n'
    env_prefix = f"M={_quote(str(directory))} OPTS={_quote(options)}"
    function = f'dynrag() {{ {" ".join(map(_quote, DYNRAG))} "$@"; }}'
    wrapped = f"{env_prefix}\nexport M OPTS\n{function}\n{prelude}{script}"
    result = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", wrapped],
                            capture_output=True, text=True, timeout=timeout, cwd=cwd)
    if result.returncode == 97:
        raise RuntimeError(f"mount failed: {result.stderr}")
    return result


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"
