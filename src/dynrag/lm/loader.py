"""Turn a model spec (`bundled`, `bundled:NAME`, `hf:PATH_OR_ID[#GGUF_FILE]`, each optionally
followed by `?KEY=VALUE[&KEY=VALUE]` model options, or `openai:BASE_URL#MODEL`) into a LanguageModel."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from pydantic import Field

from dynrag.errors import ConfigError, DynragError, first_line
from dynrag.lm.base import KVReuseMode, LanguageModel
from dynrag.lm.bundled import BUNDLED_MODELS, DEFAULT_BUNDLED, ensure_converted, package_dir, resolve_bundled
from dynrag.lm.lookup import DEFAULT_DRAFT_TOKENS
from dynrag.registry import Options, parse_model, parse_pairs

SPEC_FORMS = (
    "bundled",
    *(f"bundled:{name}" for name in BUNDLED_MODELS),
    "hf:PATH_OR_ID",
    "hf:PATH#FILE.gguf",
    "openai:BASE_URL#MODEL",
)


class ModelOptions(Options):
    """Options of a local (transformers) model, given after `?` in its spec."""

    kv_reuse: KVReuseMode = Field(
        "recent",
        description="recent: reuse the key/value cache of the longest matching recent call; prefix: only "
        "the instruction and exemplars; off: prefill every prompt whole",
    )
    kv_slots: int = Field(4, ge=1, le=64, description="recent calls whose key/value caches are kept")
    lookup: int = Field(
        DEFAULT_DRAFT_TOKENS, ge=0, le=16,
        description="prompt-lookup decoding: up to N tokens copied from earlier text are checked in the "
        "same forward pass as the newest token (the same output, fewer passes); 0: one token per pass",
    )


def describe_specs() -> str:
    options = ", ".join(f"{k}=" for k in ModelOptions.model_fields)
    return ", ".join(SPEC_FORMS) + f" (a local model's spec may end in ?KEY=VALUE&...: {options})"


def split_options(spec: str) -> tuple[str, ModelOptions]:
    """`bundled?kv_reuse=off` -> ("bundled", ModelOptions(kv_reuse="off")); unknown keys are errors."""
    base, sep, query = spec.partition("?")
    if not sep:
        return base, ModelOptions()
    pairs = [p for p in query.split("&") if p]
    values = parse_pairs(pairs, flag=f"model spec {spec!r}: option")
    return base, parse_model(ModelOptions, values, f"model spec {spec!r}")


HF_MODEL_FILES = "config.json, the weights (*.safetensors) and the tokenizer files"


def check_model_spec(spec: str) -> str:
    """Fail now, with one line naming the spec, when ``spec`` cannot load: an unknown form, a
    bundled model whose package is missing, an ``hf:`` directory that does not exist, is empty or
    holds no config.json, a GGUF file that is not there, a hub id not in the local cache (nothing
    is downloaded). Reads only the file system (no torch, no weights), so commands call it before
    they write or build anything. An ``openai:`` spec is checked when its server is first asked.
    Returns the spec, stripped."""
    full = spec.strip()
    if full.startswith("openai:"):
        return full
    spec, _ = split_options(full)  # a bad ?KEY=VALUE fails here too
    if spec == "bundled" or spec.startswith("bundled:"):
        model = resolve_bundled(spec.partition(":")[2])
        for package in model.packages:
            package_dir(package)
        return full
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
            return full
        _check_hf_target(spec, target, directory)
        return full
    raise ConfigError(f"unknown model spec {full!r}; valid forms: {describe_specs()}")


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
    full = check_model_spec(spec)
    if full.startswith("openai:"):
        from dynrag.lm.openai_compat import OpenAICompatLM

        return OpenAICompatLM.from_spec(full)
    spec, options = split_options(full)
    if spec == "bundled" or spec.startswith("bundled:"):
        name = spec.partition(":")[2] or DEFAULT_BUNDLED
        model = resolve_bundled(name)
        return _load_hf_dir(ensure_converted(model, progress=progress), f"bundled:{model.name}", options)
    if spec.startswith("hf:"):
        return _load_hf_dir(model_directory(spec, progress), spec, options)
    raise ConfigError(f"unknown model spec {full!r}; valid forms: {describe_specs()}")


def model_directory(spec: str, progress: bool = True) -> str | Path:
    """Where the weights of a spec live as a plain transformers directory (or hub id): the cached
    dequantised copy for `bundled` and GGUF specs. Training loads from here (a GGUF-loaded model
    is flagged as quantised and refuses training and saving)."""
    full = spec.strip()
    spec, _ = split_options(full)
    if spec == "bundled" or spec.startswith("bundled:"):
        return ensure_converted(resolve_bundled(spec.partition(":")[2] or DEFAULT_BUNDLED), progress=progress)
    if spec.startswith("hf:"):
        target, _, gguf_file = spec[3:].partition("#")
        if not target:
            raise ConfigError(f"model spec {full!r} names no path or id; valid forms: {describe_specs()}")
        return _converted_gguf(Path(target), gguf_file, spec) if gguf_file else target
    raise ConfigError(f"model spec {full!r} has no local weights to load; valid forms: {describe_specs()}")


def is_http_spec(spec: str) -> bool:
    """A model behind an HTTP server: safe to call from several threads (`eval --concurrency`)."""
    return spec.strip().startswith("openai:")


def load_pretrained(target: str | Path, label: str) -> tuple[Any, Any]:
    """(float32 causal LM, tokenizer) from a transformers directory or cached hub id; a failure is
    one line, "cannot load model LABEL: <the library's first line>"."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(target)
        model = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)
    except (OSError, ValueError) as exc:
        raise DynragError(f"cannot load model {label}: {first_line(exc)}") from exc
    return model, tokenizer


def _load_hf_dir(target: str | Path, name: str, options: ModelOptions | None = None) -> LanguageModel:
    from transformers.utils import logging as hf_logging

    from dynrag.lm.hf import HFLanguageModel

    hf_logging.disable_progress_bar() if not _is_tty() else None
    model, tokenizer = load_pretrained(target, repr(name))
    options = options or ModelOptions()
    return HFLanguageModel(model, tokenizer, name=name, kv_reuse=options.kv_reuse, kv_slots=options.kv_slots,
                           draft_tokens=options.lookup)


def _converted_gguf(directory: Path, gguf_file: str, name: str) -> Path:
    from dynrag.lm.bundled import cache_root, convert_gguf

    path = directory / gguf_file
    if not path.is_file():
        raise DynragError(f"cannot load model {name!r}: no such GGUF file {path}")
    stat = path.resolve().stat()
    key = hashlib.sha256(f"{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:16]
    out = cache_root() / "models" / f"gguf-{path.stem}-{key}"
    return convert_gguf(path, out)


def _is_tty() -> bool:
    import sys

    return sys.stderr.isatty()
