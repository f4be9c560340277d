"""LoRA adapters on disk: a few megabytes of low-rank factors that turn a base model into a trained
one, so a checkpoint can be shared (or shipped in the package) without its base weights.

An adapter directory holds ``adapter.json`` (the format, the base model's spec, the factors' file
and its sha256) and ``adapter.safetensors``: for every adapted linear layer ``P`` (its module path
in the model), ``P.lora_a`` (r x in) and ``P.lora_b`` (out x r), with LoRA's alpha / r already
folded into ``lora_b``. The layer's weight becomes ``W + lora_b @ lora_a``.

Folding the scale in makes two adapters one: training a second adapter over a model that is
itself base + adapter gives ``W + B1 A1 + B2 A2 = W + [B1 | B2] [A1 ; A2]``, an adapter of rank
r1 + r2 over the first base (``stack``). DeepRAG's stage II, trained over stage I, so ships as one
adapter over the bundled base weights.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from dynrag.errors import ConfigError, DynragError
from dynrag.io.directories import atomic_directory
from dynrag.io.files import file_sha256

ADAPTER_FORMAT = "dynrag-lora-adapter/1"
ADAPTER_META = "adapter.json"
ADAPTER_WEIGHTS = "adapter.safetensors"
# Where `dynrag train` puts the adapter of a LoRA run, inside its checkpoint directory.
ADAPTER_SUBDIR = "adapter"
FACTORS = (".lora_a", ".lora_b")

Factors = dict[str, torch.Tensor]


@dataclass(frozen=True)
class Adapter:
    """One adapter read from disk: the base model's spec, the factors, and where they came from."""

    base: str
    factors: Factors
    directory: Path
    sha256: str

    @property
    def rank(self) -> int:
        return max((t.shape[0] for k, t in self.factors.items() if k.endswith(".lora_a")), default=0)


def layer_delta(lora_a: torch.Tensor, lora_b: torch.Tensor) -> torch.Tensor:
    """The change one adapted layer makes to its weight: ``lora_b @ lora_a`` (out x in)."""
    if lora_a.dim() != 2 or lora_b.dim() != 2 or lora_b.shape[1] != lora_a.shape[0]:
        raise ValueError(f"LoRA factors do not chain: a {tuple(lora_a.shape)}, b {tuple(lora_b.shape)}")
    return lora_b.float() @ lora_a.float()


def layers(factors: Mapping[str, torch.Tensor]) -> list[str]:
    """The module paths the factors adapt, sorted; every path has both of its factors."""
    paths = sorted({k[: -len(s)] for k in factors for s in FACTORS if k.endswith(s)})
    for path in paths:
        missing = [s for s in FACTORS if path + s not in factors]
        if missing:
            raise ValueError(f"adapter layer {path!r} lacks its {missing[0][1:]} factor")
    strays = sorted(k for k in factors if not k.endswith(FACTORS))
    if strays:
        raise ValueError(f"adapter tensor {strays[0]!r} is not a LoRA factor (names end in .lora_a or .lora_b)")
    return paths


def stack(first: Mapping[str, torch.Tensor], second: Mapping[str, torch.Tensor]) -> Factors:
    """One adapter equal to applying ``first`` and then ``second``: on a layer both adapt, the a
    factors are stacked by rows and the b factors by columns; a layer only one adapts keeps its own."""
    out: Factors = {}
    for path in sorted(set(layers(first)) | set(layers(second))):
        parts = [f for f in (first, second) if path + ".lora_a" in f]
        out[path + ".lora_a"] = torch.cat([f[path + ".lora_a"].float() for f in parts], dim=0)
        out[path + ".lora_b"] = torch.cat([f[path + ".lora_b"].float() for f in parts], dim=1)
    return out


@torch.no_grad()
def apply_adapter(model: torch.nn.Module, factors: Mapping[str, torch.Tensor]) -> int:
    """Add every layer's delta to its weight in place; returns the number of layers changed. A path
    that names no linear layer of the right shape is an error (the adapter is for another model)."""
    modules = dict(model.named_modules())
    paths = layers(factors)
    for path in paths:
        module = modules.get(path)
        delta = layer_delta(factors[path + ".lora_a"], factors[path + ".lora_b"])
        if not isinstance(module, torch.nn.Linear) or tuple(module.weight.shape) != tuple(delta.shape):
            found = "no such layer" if module is None else f"{type(module).__name__} {tuple(getattr(module, 'weight', torch.empty(0)).shape)}"
            raise ConfigError(f"adapter layer {path!r} ({tuple(delta.shape)}) does not fit this model: {found}")
        module.weight += delta.to(module.weight.dtype).to(module.weight.device)
    return len(paths)


def is_adapter_dir(directory: str | Path) -> bool:
    return (Path(directory) / ADAPTER_META).is_file()


def read_adapter_meta(directory: str | Path) -> dict[str, Any]:
    """adapter.json, checked: its format, a base spec, and a factors file that is there."""
    path = Path(directory) / ADAPTER_META
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise DynragError(f"{path}: unreadable adapter description ({exc})") from exc
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON ({exc})") from exc
    if not isinstance(meta, dict) or meta.get("format") != ADAPTER_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ConfigError(f"{path}: format {found!r} is not {ADAPTER_FORMAT!r}")
    if not isinstance(meta.get("base"), str) or not meta["base"]:
        raise ConfigError(f"{path}: key 'base' must name the base model's spec (e.g. bundled:qwen2.5-0.5b)")
    if not (Path(directory) / ADAPTER_WEIGHTS).is_file():
        raise ConfigError(f"{path}: its factors file {ADAPTER_WEIGHTS} is missing beside it")
    return meta


def read_adapter(directory: str | Path, expected_sha256: str | None = None) -> Adapter:
    """The adapter in ``directory``; its factors file must match the sha256 adapter.json records
    (and ``expected_sha256`` when given: a bundled adapter's pinned digest)."""
    from safetensors.torch import load_file

    directory = Path(directory)
    meta = read_adapter_meta(directory)
    weights = directory / ADAPTER_WEIGHTS
    digest = file_sha256(weights)
    for source, wanted in (("adapter.json", meta.get("weights_sha256")), ("the pinned digest", expected_sha256)):
        if wanted and digest != wanted:
            raise DynragError(f"{weights}: sha256 {digest} does not match {source} ({wanted}); the file is damaged "
                              "or was replaced")
    factors = load_file(str(weights))
    try:
        layers(factors)
    except ValueError as exc:
        raise ConfigError(f"{weights}: {exc}") from exc
    return Adapter(base_of(meta["base"], directory), factors, directory, digest)


def base_of(base: str, directory: Path) -> str:
    """adapter.json's base spec with a relative ``hf:`` path read from the adapter's directory (so a
    shipped adapter may name a base beside it), model options dropped."""
    from dynrag.lm.spec import ModelSpec

    spec = ModelSpec.parse(base)
    if spec.kind == "hf" and not Path(spec.target).expanduser().is_absolute() and (directory / spec.target).exists():
        return ModelSpec.for_path((directory / spec.target).resolve(), spec.file).base
    return spec.base


def portable_base(spec_text: str) -> str:
    """The spec a new adapter.json names for its base: options dropped, a local directory absolute."""
    from dynrag.lm.spec import ModelSpec

    spec = ModelSpec.parse(spec_text)
    if spec.kind == "hf" and Path(spec.target).expanduser().exists():
        return ModelSpec.for_path(Path(spec.target).expanduser().resolve(), spec.file).base
    return spec.base


def adapter_behind(spec_text: str) -> Adapter | None:
    """The adapter a model spec stands for, if any: ``hf:DIR`` where DIR is an adapter directory, or a
    checkpoint directory whose weights are base + the adapter it keeps in DIR/adapter."""
    from dynrag.lm.spec import ModelSpec

    spec = ModelSpec.parse(spec_text)
    if spec.kind != "hf" or spec.file:
        return None
    directory = Path(spec.target).expanduser()
    for candidate in (directory, directory / ADAPTER_SUBDIR):
        if is_adapter_dir(candidate):
            return read_adapter(candidate)
    return None


def write_adapter(out: str | Path, factors: Mapping[str, torch.Tensor], base: str,
                  about: Mapping[str, Any] | None = None, files: Mapping[str, Mapping[str, Any]] | None = None) -> Path:
    """Write an adapter directory at ``out`` atomically (an older one is swapped out whole);
    ``about`` adds provenance keys to adapter.json (how it was trained, on what), ``files`` further
    JSON files by name (a trained checkpoint's deeprag.json)."""
    from safetensors.torch import save_file

    paths = layers(factors)
    tensors = {k: v.detach().float().contiguous().cpu() for k, v in factors.items()}
    with atomic_directory(Path(out)) as tmp:
        save_file(tensors, str(tmp / ADAPTER_WEIGHTS), metadata={"format": ADAPTER_FORMAT})
        meta = {**(about or {}), "format": ADAPTER_FORMAT, "base": base, "layers": len(paths),
                "rank": max((tensors[p + ".lora_a"].shape[0] for p in paths), default=0),
                "weights": ADAPTER_WEIGHTS, "weights_sha256": file_sha256(tmp / ADAPTER_WEIGHTS)}
        (tmp / ADAPTER_META).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        for name, content in (files or {}).items():
            (tmp / name).write_text(json.dumps(content, indent=2) + "\n", encoding="utf-8")
    return Path(out)


def merged_copy(adapter: Adapter, base_directory: str | Path, progress: bool = True) -> Path:
    """A plain transformers directory of the base weights with the adapter added, built once in the
    model cache (keyed by the factors' digest and the base's directory) and reused after: every
    backend, training included, then loads it like any other ``hf:`` directory."""
    from dynrag.lm.bundled import cache_lock, cache_root

    base_directory = Path(base_directory)
    key = hashlib.sha256(f"{adapter.sha256}:{base_directory.resolve()}".encode()).hexdigest()[:16]
    out = cache_root() / "models" / f"adapter-{key}"
    if (out / "config.json").is_file():
        return out
    with cache_lock(f"adapter-{key}"):
        if (out / "config.json").is_file():  # merged by another process while this one waited
            return out
        if progress:
            from rich.console import Console

            Console(stderr=True).print(f"first use of adapter {adapter.directory}: adding it to {adapter.base} once",
                                       style="dim")
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(base_directory)
        model = AutoModelForCausalLM.from_pretrained(base_directory, dtype=torch.float32)
        apply_adapter(model, adapter.factors)
        with atomic_directory(out) as tmp:
            model.save_pretrained(tmp, safe_serialization=True)
            tokenizer.save_pretrained(tmp)
    return out
