"""Turn a model spec (`bundled`, `bundled:NAME`, `hf:PATH_OR_ID[#GGUF_FILE]`) into a LanguageModel."""

from __future__ import annotations

import hashlib
from pathlib import Path

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.base import LanguageModel
from dynrag.lm.bundled import BUNDLED_MODELS, DEFAULT_BUNDLED, ensure_converted, package_dir, resolve_bundled

SPEC_FORMS = (
    "bundled",
    *(f"bundled:{name}" for name in BUNDLED_MODELS),
    "hf:PATH_OR_ID",
    "hf:PATH#FILE.gguf",
)


def describe_specs() -> str:
    return ", ".join(SPEC_FORMS)


HF_MODEL_FILES = "config.json, the weights (*.safetensors) and the tokenizer files"


def check_model_spec(spec: str) -> str:
    """Fail now, with one line naming the spec, when ``spec`` cannot load: an unknown form, a
    bundled model whose package is missing, an ``hf:`` directory that does not exist, is empty or
    holds no config.json, a GGUF file that is not there, a hub id not in the local cache (nothing
    is downloaded). Reads only the file system (no torch, no weights), so commands call it before
    they write or build anything. Returns the spec, stripped."""
    spec = spec.strip()
    if spec == "bundled" or spec.startswith("bundled:"):
        model = resolve_bundled(spec.partition(":")[2])
        for package in model.packages:
            package_dir(package)
        return spec
    if spec.startswith("hf:"):
        target, _, gguf_file = spec[3:].partition("#")
        if not target:
            raise ConfigError(f"model spec {spec!r} names no path or id; valid forms: {describe_specs()}")
        directory = Path(target).expanduser()
        if gguf_file:
            if not directory.is_dir():
                raise ConfigError(f"model spec {spec!r}: no such directory {directory}")
            if not (directory / gguf_file).is_file():
                raise ConfigError(f"model spec {spec!r}: no such GGUF file {directory / gguf_file}")
            return spec
        _check_hf_target(spec, target, directory)
        return spec
    raise ConfigError(f"unknown model spec {spec!r}; valid forms: {describe_specs()}")


def _check_hf_target(spec: str, target: str, directory: Path) -> None:
    if directory.is_dir():
        if not any(directory.iterdir()):
            raise ConfigError(
                f"model spec {spec!r}: {directory} is an empty directory; a Hugging Face model directory "
                f"holds {HF_MODEL_FILES}"
            )
        if not (directory / "config.json").is_file():
            raise ConfigError(
                f"model spec {spec!r}: {directory} has no config.json, so it is not a Hugging Face model "
                f"directory (one holds {HF_MODEL_FILES}; a GGUF file is hf:DIR#FILE.gguf)"
            )
        return
    if directory.exists():
        raise ConfigError(
            f"model spec {spec!r}: {directory} is a file, not a model directory "
            f"(a GGUF file is hf:{directory.parent}#{directory.name})"
        )
    looks_like_path = target.startswith(("/", ".", "~")) or "\\" in target or target.count("/") > 1
    if looks_like_path or not _in_hub_cache(target):
        raise ConfigError(
            f"model spec {spec!r}: no such directory {directory}"
            + ("" if looks_like_path else ", and no model of that id in the local Hugging Face cache "
               "(dynrag downloads nothing: pass a model directory)")
        )


def _in_hub_cache(repo_id: str) -> bool:
    try:
        from huggingface_hub import try_to_load_from_cache
        from huggingface_hub.errors import HFValidationError
    except ImportError:  # pragma: no cover - transformers depends on it
        return False
    try:
        return isinstance(try_to_load_from_cache(repo_id, "config.json"), str)
    except (HFValidationError, ValueError):
        return False


def load_lm(spec: str = "bundled", progress: bool = True) -> LanguageModel:
    spec = check_model_spec(spec)
    if spec == "bundled" or spec.startswith("bundled:"):
        name = spec.partition(":")[2] or DEFAULT_BUNDLED
        model = resolve_bundled(name)
        return _load_hf_dir(ensure_converted(model, progress=progress), f"bundled:{model.name}")
    if spec.startswith("hf:"):
        target, _, gguf_file = spec[3:].partition("#")
        if not target:
            raise ConfigError(f"model spec {spec!r} names no path or id; valid forms: {describe_specs()}")
        if gguf_file:
            return _load_gguf(Path(target), gguf_file, spec)
        return _load_hf_dir(target, spec)
    raise ConfigError(f"unknown model spec {spec!r}; valid forms: {describe_specs()}")


def _load_hf_dir(target: str | Path, name: str) -> LanguageModel:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    from dynrag.lm.hf import HFLanguageModel

    hf_logging.disable_progress_bar() if not _is_tty() else None
    try:
        tokenizer = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DynragError(f"cannot load model {name!r}: {first_line}") from exc
    return HFLanguageModel(model, tokenizer, name=name)


def _load_gguf(directory: Path, gguf_file: str, name: str) -> LanguageModel:
    from dynrag.lm.bundled import BundledModel, convert_gguf, cache_root

    path = directory / gguf_file
    if not path.is_file():
        raise DynragError(f"cannot load model {name!r}: no such GGUF file {path}")
    stat = path.resolve().stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    out = cache_root() / "models" / f"gguf-{path.stem}-{key}"
    return _load_hf_dir(convert_gguf(path, out), name)


def _is_tty() -> bool:
    import sys

    return sys.stderr.isatty()
