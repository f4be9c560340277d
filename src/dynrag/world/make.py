"""Writing a world directory: each file atomically, ``manifest.json`` last (format version, seed,
options, probed model, counts, sha256 of every file), so a killed ``world make`` leaves either the
old manifest or one that matches the files beside it."""

from __future__ import annotations

import fnmatch
import hashlib
import re
from pathlib import Path
from typing import Any

from dynrag.errors import DataError
from dynrag.io.directories import check_out_dir
from dynrag.io.files import atomic_write_bytes, atomic_write_json, read_json
from dynrag.io.jsonl import read_jsonl
from dynrag.world.build import FORMAT_VERSION, build_files, counts
from dynrag.world.entities import WorldOptions
from dynrag.world.knowledge import VERDICTS, Knowledge
from dynrag.world.questions import SPLITS

MANIFEST = "manifest.json"
# What `world make` (its probe) and `world check` write into a world; hidden ".tmp" files are
# atomic writes a kill left behind.
OWN_FILES = ("corpus.jsonl", "entities.jsonl", "facts.jsonl", *(f"{s}.jsonl" for s in SPLITS),
             "probe-*.jsonl", "knowledge-*.json", "check-*.json", ".*.tmp")


def model_tag(spec: str) -> str:
    """A file-name-safe form of a model spec: ``bundled`` -> ``bundled``, ``hf:a/b`` -> ``hf_a_b``."""
    return re.sub(r"[^A-Za-z0-9.-]+", "_", spec).strip("_") or "model"


def knowledge_path(world: Path, spec: str) -> Path:
    return Path(world) / f"knowledge-{model_tag(spec)}.json"


def read_knowledge(path: Path) -> Knowledge:
    data = read_json(path, "world knowledge file")
    if not isinstance(data, dict) or not isinstance(data.get("facts"), dict):
        raise DataError(str(path), "expected an object with 'model' and 'facts' {fact id: verdict}")
    bad = sorted(k for k, v in data["facts"].items() if not isinstance(v, dict) or v.get("verdict") not in VERDICTS)
    if bad:
        raise DataError(str(path), f"fact {bad[0]!r} has no verdict among {', '.join(VERDICTS)}")
    return Knowledge(str(data.get("model")), {k: v["verdict"] for k, v in data["facts"].items()})


def base_verdicts(world: Path, manifest: dict[str, Any]) -> dict[str, str]:
    """The verdicts of the model a world was probed with ({} for a world made without --model)."""
    path = knowledge_path(world, manifest["model"]) if manifest.get("model") else None
    return read_knowledge(path).status if path is not None and path.exists() else {}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_world(options: WorldOptions, out: Path, knowledge: Knowledge) -> dict[str, Any]:
    """Write the world into ``out`` and return its manifest."""
    out = Path(out)
    files = build_files(options, knowledge)
    for name, data in files.items():
        path = out / name
        # Same bytes are left untouched, so an index built from corpus.jsonl does not read as stale.
        if not (path.is_file() and path.stat().st_size == len(data) and path.read_bytes() == data):
            atomic_write_bytes(path, data)
    digests = {name: sha256(data) for name, data in sorted(files.items())}
    kpath = knowledge_path(out, knowledge.model) if knowledge.model is not None else None
    if kpath is not None and kpath.exists():  # the probe's verdicts the questions were chained by
        digests[kpath.name] = sha256(kpath.read_bytes())
    manifest = {
        "format_version": FORMAT_VERSION,
        "seed": options.seed,
        "options": options.model_dump(),
        "model": knowledge.model,
        "counts": counts(files),
        "sha256": digests,
    }
    atomic_write_json(out / MANIFEST, manifest)
    return manifest


def is_world(out: Path) -> bool:
    """Is the directory ``out`` a world (its manifest), or what a killed first ``world make`` left
    (nothing but a world's own files)? Either may be made again in place."""
    manifest = out / MANIFEST
    if manifest.is_file():
        try:
            data = read_json(manifest, "world manifest")
        except DataError:  # unreadable or not JSON: nothing says it is a world
            return False
        # An index's manifest.json has a "format"; a world's (of any format version) its seed and sizes.
        return isinstance(data, dict) and "format" not in data and {"seed", "options", "sha256"} <= data.keys()
    return all(any(fnmatch.fnmatchcase(e.name, p) for p in OWN_FILES) for e in out.iterdir())


def check_world_out(out: Path) -> None:
    """Refuse an --out that is a file, or a directory of other files (a typo must not write a world
    among them); a world, or what a killed ``world make`` left, is made again in place."""
    check_out_dir(out, is_world, "world directory", where=f"--out {out}")


def read_manifest(world: Path) -> dict[str, Any]:
    path = Path(world) / MANIFEST
    if not path.exists():
        raise DataError(str(path), "no world here (run `dynrag world make --out DIR` first)")
    data = read_json(path, "world manifest")
    if not isinstance(data, dict) or data.get("format_version") != FORMAT_VERSION:
        found = data.get("format_version") if isinstance(data, dict) else None
        raise DataError(str(path), f"not a world manifest of format version {FORMAT_VERSION} (found {found!r}); "
                        "make the world again with `dynrag world make` (same seed and sizes)")
    return data


def fact_relations(world: Path) -> dict[str, str]:
    """Fact id -> relation, from the world's ``facts.jsonl`` (what a hop of a question asks)."""
    return {f["id"]: f["relation"] for f in read_jsonl(Path(world) / "facts.jsonl", whole=True)}
