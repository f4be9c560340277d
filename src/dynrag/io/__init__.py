"""Crash-safe file operations every package shares (floor 0: imports nothing of dynrag but errors).

- ``files``: ``atomic_write_bytes/text/json`` (and ``atomic_file`` to stream into): write a
  temporary sibling, fsync it, rename it over the target, fsync the directory. A crash leaves the
  old file or the new one, never a mix. ``read_json`` reads one back.
- ``directories``: ``atomic_directory`` builds a directory in a temporary sibling
  ``.NAME.build-PID-XXXX`` and swaps it into place only when complete (the old one is moved aside
  first and deleted afterwards); an error removes the half-built directory.
- ``scratch``: builds and file writes left behind by killed processes are removed at the next
  build or write of the same name (``remove_stale_builds``): a temporary is stale when its process
  is gone, or when no process holds the flock its builder keeps on it (a killed builder's pid may
  since belong to another process).
- ``jsonl``: ``JsonlAppender`` writes one record per line, each in a single call, flushed and
  fsynced before ``append`` returns, so a crash loses at most the line being written;
  ``read_jsonl`` reads the records back: a torn last line (a write cut short) is dropped (and with
  ``repair`` truncated away), any other bad line is a ``DataError`` naming ``file:line``.
- ``lock``: ``DirectoryLock``, an exclusive OS lock (flock) held for a process's life; a second
  holder fails at once with the first holder's pid.
- ``faults``: a filesystem fault (read-only or full disk, no permission, an I/O error) in any of
  these is a ``FileError`` naming the path and the OS's reason, which the CLI prints as one line;
  ``check_writable`` probes a path before work whose result would be lost if it could not be saved.
"""
