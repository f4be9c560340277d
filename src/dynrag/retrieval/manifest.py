"""Index manifests: reading ``manifest.json``, the checks every index kind's manifest passes, the
one-line error naming an index directory and how to rebuild it, and whether the corpus an index
was built from has changed since."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dynrag.errors import IndexDirError, json_error

MANIFEST = "manifest.json"
# The format of an index directory (the BM25 index owns the directory and its manifest).
INDEX_FORMAT = "dynrag-bm25"
INDEX_FORMAT_VERSION = 1
REBUILD = "rebuild it with `dynrag index SOURCE --out {path}`"


def index_error(path: Path, what: str, rebuild: str = REBUILD) -> IndexDirError:
    """One-line error naming the index directory and how to rebuild it."""
    return IndexDirError(f"{path}: {what}; {rebuild.format(path=path)}")


def load_manifest_json(path: Path, missing: str, rebuild: str = REBUILD) -> dict[str, Any]:
    """``path/manifest.json`` as a dict; ``missing`` says what its absence means."""
    try:
        manifest = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise index_error(path, missing, rebuild) from e
    except OSError as e:
        raise index_error(path, f"manifest.json unreadable ({e})", rebuild) from e
    except ValueError as e:  # not JSON, or not UTF-8
        raise index_error(path, str(json_error(MANIFEST, e)), rebuild) from e
    if not isinstance(manifest, dict):
        raise index_error(path, "manifest.json is not an object", rebuild)
    return manifest


def check_manifest(
    manifest: dict[str, Any], path: Path, *, format: str, version: int, count_key: str, rebuild: str = REBUILD
) -> dict[str, Any]:
    """The checks every index manifest passes: format, version, a positive count, a checksum."""
    if manifest.get("format") != format:
        raise index_error(path, f"manifest.json format is {manifest.get('format')!r}, expected {format!r}", rebuild)
    found = manifest.get("format_version")
    if found != version:
        raise index_error(path, f"index format version {found!r} is not supported (expected {version})", rebuild)
    count = manifest.get(count_key)
    if not isinstance(count, int) or isinstance(count, bool) or count < 1:
        raise index_error(path, f"manifest.json {count_key} {count!r} is invalid", rebuild)
    if not isinstance(manifest.get("corpus_sha256"), str):
        raise index_error(path, "manifest.json has no corpus_sha256", rebuild)
    return manifest


def read_manifest(index_dir: str | Path) -> dict[str, Any]:
    """The validated manifest of an index directory (``dynrag index``'s output)."""
    path = Path(index_dir)
    manifest = load_manifest_json(path, "manifest.json missing (not a BM25 index?)")
    return check_manifest(manifest, path, format=INDEX_FORMAT, version=INDEX_FORMAT_VERSION, count_key="passage_count")


def corpus_changes(index_dir: str | Path) -> str | None:
    """A warning when the corpus an index was built from has changed since (size or modification
    time of a source file, files added or removed), else None; for indexes that recorded their
    sources (``dynrag index`` does)."""
    from dynrag.corpus import changed_sources

    try:
        manifest = read_manifest(index_dir)
    except IndexDirError:
        return None  # the command's own load says what is wrong
    sources = manifest.get("sources")
    changes = changed_sources(sources) if sources else []
    if not changes:
        return None
    shown = "; ".join(changes[:3]) + (f"; and {len(changes) - 3} more" if len(changes) > 3 else "")
    return (
        f"{index_dir} was built from {sources['path']}, which has changed since ({shown}); answers use the "
        f"passages as they were: rebuild with `dynrag index {sources['path']} --out {index_dir}`"
    )
