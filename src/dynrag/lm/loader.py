"""Turn a model spec (`bundled`, `bundled:NAME`, `hf:PATH_OR_ID[#GGUF_FILE]`, each optionally
followed by `?KEY=VALUE[&KEY=VALUE]` model options, or `openai:BASE_URL#MODEL`) into a LanguageModel."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from dynrag.errors import ConfigError, DynragError, first_line
from dynrag.lm.adapter import ADAPTER_META, base_of, is_adapter_dir, merged_copy, read_adapter, read_adapter_meta
from dynrag.lm.base import LanguageModel
from dynrag.lm.bundled import BundledModel, check_installed, ensure_converted, gguf_path, resolve_bundled
from dynrag.lm.device import Placement, resolve_placement
from dynrag.lm.hub import check_hub_id, fetch_config, fetch_model, looks_like_hub_id
from dynrag.lm.lineage import base_model, checkpoint_meta
from dynrag.lm.memory import check_fits
from dynrag.lm.spec import SPEC_FORMS, ModelOptions, ModelSpec, describe_specs, split_options

__all__ = [
    "SPEC_FORMS", "ModelOptions", "ModelSpec", "check_model_spec", "describe_specs", "load_lm",
    "load_pretrained", "model_directory", "resolve_model", "split_options",
]

HF_MODEL_FILES = "config.json, the weights (*.safetensors) and the tokenizer files"


def check_model_spec(spec: str | ModelSpec) -> str:
    """Fail now, with one line naming the spec, when ``spec`` cannot load: an unknown form, a
    bundled model whose package is missing, an ``hf:`` directory that does not exist, is empty or
    holds no config.json, a GGUF file that is not there, a hub id not in the local cache while
    ``HF_HUB_OFFLINE=1`` (online, an uncached id downloads when it loads: lm/hub.py). Reads only the file system (no torch, no weights), so commands call it before
    they write or build anything. An ``openai:`` spec is checked when its server is first asked.
    Returns the spec, stripped."""
    if isinstance(spec, ModelSpec):
        return str(check_spec(spec))
    check_spec(ModelSpec.parse(spec))
    return spec.strip()


def check_spec(spec: ModelSpec) -> ModelSpec:
    """``check_model_spec`` for a parsed spec; returns it."""
    if spec.kind == "bundled":
        check_installed(resolve_bundled(spec.target))
    elif spec.kind == "hf":
        directory = Path(spec.target).expanduser()
        if spec.file:
            if not directory.is_dir():
                raise ConfigError(f"model spec {spec.base!r}: no such directory {directory}")
            if not (directory / spec.file).is_file():
                raise ConfigError(f"model spec {spec.base!r}: no such GGUF file {directory / spec.file}")
        else:
            _check_hf_target(spec.base, spec.target, directory, spec.options.revision)
            if spec.options.backend == "llama.cpp":
                export_base(spec)
    return spec


def resolve_model(spec: str) -> str:
    """`bundled` -> `bundled:<default>` (see ``ModelSpec.resolved``), model options kept; a spec
    that cannot load fails here, before a run directory is written."""
    return str(check_spec(ModelSpec.parse(spec)).resolved())


def _check_hf_target(spec: str, target: str, directory: Path, revision: str = "") -> None:
    if directory.is_dir():
        if not any(directory.iterdir()):
            raise ConfigError(
                f"model spec {spec!r}: {directory} is an empty directory; a Hugging Face model directory "
                f"holds {HF_MODEL_FILES}"
            )
        if is_adapter_dir(directory):
            _check_adapter(spec, directory)
            return
        if not (directory / "config.json").is_file():
            raise ConfigError(
                f"model spec {spec!r}: {directory} has no config.json, so it is not a Hugging Face model "
                f"directory (one holds {HF_MODEL_FILES}; a GGUF file is hf:DIR#FILE.gguf; an adapter holds "
                f"{ADAPTER_META})"
            )
        return
    if directory.exists():
        raise ConfigError(
            f"model spec {spec!r}: {directory} is a file, not a model directory "
            f"(a GGUF file is {ModelSpec.for_path(directory.parent, directory.name)})"
        )
    if not looks_like_hub_id(target):
        raise ConfigError(f"model spec {spec!r}: no such directory {directory}")
    check_hub_id(spec, target, revision)  # uncached and online: it downloads on load


def _check_adapter(spec: str, directory: Path) -> None:
    """An adapter directory loads when its description is sound and its base spec loads."""
    try:
        base = base_of(read_adapter_meta(directory)["base"], directory)
        base_spec = ModelSpec.parse(base)
    except ConfigError as exc:
        raise ConfigError(f"model spec {spec!r}: {exc}") from exc
    if base_spec.kind == "hf" and Path(base_spec.target).expanduser().resolve() == directory.resolve():
        raise ConfigError(f"model spec {spec!r}: the adapter in {directory} names itself as its base")
    if base_spec.is_http:
        raise ConfigError(f"model spec {spec!r}: the adapter's base {base!r} is behind a server; it needs local weights")
    try:
        check_spec(base_spec)
    except DynragError as exc:
        raise ConfigError(f"model spec {spec!r}: the adapter's base {base!r} cannot load: {exc}") from exc


def load_lm(spec: str | ModelSpec = "bundled", progress: bool = True) -> LanguageModel:
    parsed = check_spec(spec if isinstance(spec, ModelSpec) else ModelSpec.parse(spec))
    if parsed.is_http:
        from dynrag.lm.openai_compat import OpenAICompatLM

        return OpenAICompatLM.from_spec(str(parsed))
    # A bundled model's measured prompt style; any other model is prompted plain unless asked.
    preferred_style = resolve_bundled(parsed.target).prompt_style if parsed.kind == "bundled" else "plain"
    if parsed.options.backend == "llama.cpp":
        from dynrag.lm.llama_cpp import load_llama_cpp

        return load_llama_cpp(parsed, gguf_file(parsed), preferred_style)
    if parsed.kind == "bundled":
        model = resolve_bundled(parsed.target)
        return _load_hf_dir(ensure_converted(model, progress=progress), f"bundled:{model.name}", parsed.options,
                            preferred_style)
    return _load_hf_dir(model_directory(parsed, progress), parsed.base, parsed.options)


def gguf_file(spec: ModelSpec) -> Path:
    """The GGUF file the llama.cpp backend reads: a bundled model's, ``hf:DIR#FILE.gguf``, or the
    export of a checkpoint trained from a bundled model (made on first use)."""
    if spec.kind == "bundled":
        return gguf_path(resolve_bundled(spec.target))
    if spec.kind == "hf" and spec.file:
        return Path(spec.target).expanduser() / spec.file
    return exported_gguf(Path(spec.target).expanduser(), gguf_path(export_base(spec)))


def export_base(spec: ModelSpec) -> BundledModel:
    """The bundled base whose GGUF an ``hf:DIR`` spec on llama.cpp is exported over; an error when
    there is none (checked before a run writes anything)."""
    trained_from = bundled_base(spec)
    if trained_from is None:
        raise ConfigError(
            f"model spec {str(spec)!r}: backend=llama.cpp needs a GGUF file (bundled[:NAME], hf:DIR#FILE.gguf, "
            "or a checkpoint `dynrag train` made from a bundled model)"
        )
    return trained_from


def bundled_base(spec: ModelSpec) -> BundledModel | None:
    """The bundled model an ``hf:DIR`` checkpoint of `dynrag train` was fine-tuned from (through
    both stages), else None: its GGUF lends the export its tokenizer and metadata."""
    if spec.kind != "hf" or not Path(spec.target).expanduser().is_dir():
        return None
    if checkpoint_meta(spec.base) is None:
        return None
    base = ModelSpec.parse(base_model(spec.base))
    return resolve_bundled(base.target) if base.kind == "bundled" else None


def exported_gguf(directory: Path, base_gguf: Path) -> Path:
    """The checkpoint at ``directory`` as GGUF, exported once into the cache (lm/gguf_export.py) and
    found again by its weights' size and time, so a retrained checkpoint exports anew."""
    from dynrag.lm.bundled import cache_lock, cache_root
    from dynrag.lm.gguf_export import EXPORTED_FILE, export_gguf

    stamp = ":".join(f"{f.name}:{f.stat().st_size}:{f.stat().st_mtime_ns}"
                     for f in sorted(directory.resolve().glob("*.safetensors")))
    key = hashlib.sha256(f"{directory.resolve()}|{stamp}|{base_gguf.resolve()}".encode()).hexdigest()[:16]
    out = cache_root() / "models" / f"gguf-export-{directory.name}-{key}"
    if (out / EXPORTED_FILE).is_file():
        return out / EXPORTED_FILE
    with cache_lock(f"gguf-export-{key}"):
        if (out / EXPORTED_FILE).is_file():  # exported by another worker while this one waited
            return out / EXPORTED_FILE
        return export_gguf(directory, base_gguf, out)


def local_weights(target: str | Path, spec: str, options: ModelOptions, placement: Placement) -> Path | str:
    """A directory holding the model's files, checked to fit in memory first: a local directory
    as it is; a hub id's config.json fetched, the fit checked, then the rest downloaded."""
    directory = Path(target).expanduser()
    if directory.is_dir():
        check_fits(directory, repr(spec), placement.device, placement.dtype, placement.bytes_per_parameter,
                   options.device_map)
        return directory
    target = str(target)
    config = fetch_config(spec, target, options.revision)
    check_fits(config.parent, repr(spec), placement.device, placement.dtype, placement.bytes_per_parameter,
               options.device_map)
    return fetch_model(spec, target, options.revision)


def model_directory(spec: str | ModelSpec, progress: bool = True) -> str | Path:
    """Where the weights of a spec live as a plain transformers directory (or hub id): the cached
    dequantised copy for `bundled` and GGUF specs. Training loads from here (a GGUF-loaded model
    is flagged as quantised and refuses training and saving)."""
    parsed = spec if isinstance(spec, ModelSpec) else ModelSpec.parse(spec)
    if parsed.kind == "bundled":
        return ensure_converted(resolve_bundled(parsed.target), progress=progress)
    if parsed.kind == "hf":
        if parsed.file:
            return _converted_gguf(Path(parsed.target), parsed.file, parsed.base)
        if is_adapter_dir(Path(parsed.target).expanduser()):
            adapter = read_adapter(Path(parsed.target).expanduser())
            return merged_copy(adapter, model_directory(adapter.base, progress), progress)
        return parsed.target
    raise ConfigError(f"model spec {str(parsed)!r} has no local weights to load; valid forms: {describe_specs()}")


def load_pretrained(
    target: str | Path, label: str, options: ModelOptions | None = None, spec: str | None = None
) -> tuple[Any, Any]:
    """(causal LM, tokenizer) from a transformers directory or hub id, placed and in the precision
    the options ask (``device``/``dtype``/``device_map``/``revision``; by default float32 on the CPU
    where no GPU is present); a hub id not cached downloads unless offline; a model that cannot fit
    is refused first (lm/memory.py). A failure is one line, "cannot load model LABEL: <why>"; the
    hub and memory lines name ``spec`` (default: ``target``)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    options = options or ModelOptions()
    spec = str(target) if spec is None else spec
    placement = resolve_placement(options.device, options.dtype, spec=spec)
    directory = local_weights(target, spec, options, placement)
    kwargs: dict[str, Any] = {"dtype": placement.torch_dtype}
    if options.device_map:
        kwargs["device_map"] = options.device_map
    try:
        tokenizer = AutoTokenizer.from_pretrained(directory)
        model = AutoModelForCausalLM.from_pretrained(directory, **kwargs)
    except (OSError, ValueError, ImportError) as exc:
        raise DynragError(f"cannot load model {label}: {first_line(exc)}") from exc
    if not options.device_map and placement.device != "cpu":
        model = model.to(placement.device)
    return model, tokenizer


def _load_hf_dir(target: str | Path, name: str, options: ModelOptions | None = None,
                 preferred_style: str = "plain") -> LanguageModel:
    from transformers.utils import logging as hf_logging

    from dynrag.lm.hf import HFLanguageModel

    hf_logging.disable_progress_bar() if not _is_tty() else None
    options = options or ModelOptions()
    model, tokenizer = load_pretrained(target, repr(name), options, spec=name)
    return HFLanguageModel(model, tokenizer, name=name, kv_reuse=options.kv_reuse, kv_slots=options.kv_slots,
                           draft_tokens=options.lookup, prompt=options.prompt, preferred_style=preferred_style)


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
