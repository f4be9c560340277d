"""Hugging Face Hub models named by id (`hf:ORG/NAME`): found in the local cache, or downloaded.

A hub id that is not cached downloads when the model loads, with huggingface_hub's own progress
bar, honouring its environment: ``HF_HUB_OFFLINE=1`` (nothing is fetched: an uncached id is
refused in one line), ``HF_TOKEN`` (gated models), ``HF_HOME`` / ``HF_HUB_CACHE`` (where the cache
lives). ``config.json`` comes first, so the memory check (lm/memory.py) runs before any weight is
fetched. A gated, missing or unknown-revision model is one line naming the model and what to do.
The environment is read at each call, not at import, so a test can point it at a tmp directory.
"""

from __future__ import annotations

import os
from pathlib import Path

from dynrag.errors import ConfigError, DynragError, first_line

# What a transformers causal LM needs from a repository (not other formats' weights, not images).
MODEL_PATTERNS = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "tokenizer*"]
_TRUE = {"1", "true", "yes", "on"}


def hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in _TRUE


def hub_cache_dir() -> str | None:
    """The hub cache as the environment names it now (HF_HUB_CACHE, else HF_HOME/hub), or None
    for huggingface_hub's default."""
    if os.environ.get("HF_HUB_CACHE"):
        return os.environ["HF_HUB_CACHE"]
    if os.environ.get("HF_HOME"):
        return str(Path(os.environ["HF_HOME"]) / "hub")
    return None


def looks_like_hub_id(target: str) -> bool:
    """ORG/NAME or NAME: no path markers, at most one slash."""
    return not (target.startswith(("/", ".", "~")) or "\\" in target or target.count("/") > 1)


def cached_file(repo_id: str, filename: str, revision: str = "") -> Path | None:
    """The cached copy of one file of a hub repository, or None (nothing is fetched)."""
    from huggingface_hub import try_to_load_from_cache
    from huggingface_hub.errors import HFValidationError

    try:
        found = try_to_load_from_cache(repo_id, filename, cache_dir=hub_cache_dir(), revision=revision or None)
    except (HFValidationError, ValueError):
        return None
    return Path(found) if isinstance(found, str) else None


def check_hub_id(spec: str, repo_id: str, revision: str = "") -> None:
    """Fail now when the id cannot load: offline and not cached. Online, an uncached id passes
    (it downloads on load); nothing here touches the network."""
    if cached_file(repo_id, "config.json", revision) is not None:
        return
    if hub_offline():
        raise ConfigError(
            f"model spec {spec!r}: {repo_id} is not in the local Hugging Face cache "
            f"({hub_cache_dir() or 'the default cache'}) and HF_HUB_OFFLINE=1 is set, so nothing is downloaded; "
            "unset HF_HUB_OFFLINE to download it, or pass a model directory"
        )


def fetch_config(spec: str, repo_id: str, revision: str = "") -> Path:
    """config.json of a hub model (cached, or downloaded: a few KB)."""
    cached = cached_file(repo_id, "config.json", revision)
    if cached is not None:
        return cached
    from huggingface_hub import hf_hub_download

    return Path(_calling_hub(spec, repo_id, lambda: hf_hub_download(
        repo_id, "config.json", revision=revision or None, cache_dir=hub_cache_dir(),
        local_files_only=hub_offline())))


def fetch_model(spec: str, repo_id: str, revision: str = "") -> Path:
    """The local snapshot directory of a hub model, downloading what is missing (the hub's own
    progress bar) unless offline."""
    from huggingface_hub import snapshot_download

    return Path(_calling_hub(spec, repo_id, lambda: snapshot_download(
        repo_id, revision=revision or None, cache_dir=hub_cache_dir(), allow_patterns=MODEL_PATTERNS,
        local_files_only=hub_offline())))


def _calling_hub(spec: str, repo_id: str, call):
    """``call()`` with the hub's errors as one line each, naming the model and what to do."""
    from huggingface_hub.errors import (
        GatedRepoError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    page = f"https://huggingface.co/{repo_id}"
    try:
        return call()
    except GatedRepoError as exc:  # a subclass of RepositoryNotFoundError: first
        raise DynragError(
            f"model spec {spec!r}: gated on the Hugging Face Hub; accept its licence at {page} and set HF_TOKEN"
            + (" (a token is set but has no access yet)" if os.environ.get("HF_TOKEN") else "")
        ) from exc
    except RevisionNotFoundError as exc:
        raise DynragError(f"model spec {spec!r}: no such revision of {repo_id} on the Hub; see {page}/tree/main") from exc
    except RepositoryNotFoundError as exc:
        raise DynragError(
            f"model spec {spec!r}: no model {repo_id} on the Hugging Face Hub (or it is private: set HF_TOKEN "
            "to a token with access); check the id"
        ) from exc
    except LocalEntryNotFoundError as exc:
        why = "HF_HUB_OFFLINE=1 is set" if hub_offline() else "the Hub cannot be reached"
        raise DynragError(
            f"model spec {spec!r}: {repo_id} is not fully in the local Hugging Face cache and {why}; "
            "download it where the Hub is reachable, or pass a model directory"
        ) from exc
    except OSError as exc:
        raise DynragError(f"model spec {spec!r}: cannot download {repo_id}: {first_line(exc)}") from exc
