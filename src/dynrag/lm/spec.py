"""A model spec string parsed once into a typed record: the only place its text forms are read.

    bundled | bundled:NAME                 a packaged GGUF model (``bundled``: the default one)
    hf:PATH_OR_ID | hf:DIR#FILE.gguf       a transformers directory, a cached hub id, a GGUF file
    openai:BASE_URL#MODEL                  a model behind an OpenAI-compatible server

A local spec (bundled, hf) may end in ``?KEY=VALUE&...`` model options (``ModelOptions``). Every
other module asks the parsed ``ModelSpec`` (``kind``, ``is_http``, ``is_local``, ``resolved()``)
instead of looking at prefixes, so a new form is added here and nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from os import PathLike
from typing import Literal

from pydantic import Field, field_validator

from dynrag.errors import ConfigError
from dynrag.lm.base import BACKEND_CAPABILITIES, Capabilities, KVReuseMode
from dynrag.lm.bundled import BUNDLED_MODELS, resolve_bundled
from dynrag.lm.device import DEVICE_FORMS, DtypeName, check_device
from dynrag.lm.lookup import DEFAULT_DRAFT_TOKENS
from dynrag.registry import Options, parse_model, parse_pairs

ModelKind = Literal["bundled", "hf", "openai"]
OPENAI_PREFIX = "openai:"

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
    device: str = Field(
        "auto", description=f"where the model runs: {DEVICE_FORMS}; auto: the first CUDA device where one "
        "is present, else the CPU (lm/device.py)",
    )
    dtype: DtypeName = Field(
        "auto", description="weights' precision; auto: bfloat16 on CUDA, float32 elsewhere",
    )
    device_map: Literal["", "auto"] = Field(
        "", description="auto: spread the layers over every visible GPU (and the CPU), through "
        "accelerate (a 13B model over two GPUs); overrides device",
    )
    revision: str = Field("", description="a hub model's branch, tag or commit (default: main)")
    prompt: Literal["auto", "plain", "chat"] = Field(
        "auto", description="how prompts are laid out: plain few-shot text, or inside the model's chat "
        "template; auto: a bundled model's measured best (docs/models.md), plain for any other model",
    )
    backend: Literal["transformers", "llama.cpp"] = Field(
        "transformers", description="transformers: every capability (attention for DRAGIN); llama.cpp: the "
        "GGUF file decoded in this process by llama-cpp-python, faster on a CPU, with log-probabilities and "
        "entropies, and attention (DRAGIN) read from llama.cpp's own graph (bundled and hf:DIR#FILE.gguf models)",
    )

    @field_validator("device")
    @classmethod
    def _device(cls, value: str) -> str:
        return check_device(value)


# The spec forms as every command's --model help names them (dynrag.run.flags): NAME and [#FILE.gguf]
# stand for the bundled names and the GGUF form of SPEC_FORMS, which would make a help line too long.
MODEL_HELP = ("bundled | bundled:NAME | hf:PATH_OR_ID[#FILE.gguf] | openai:BASE_URL#MODEL; a local one may end in "
              f"?KEY=VALUE&... ({', '.join(ModelOptions.model_fields)})")


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


@dataclass(frozen=True)
class ModelSpec:
    """One parsed spec. ``target``: the bundled model's name ("" for the default), the hf path or
    hub id, or the server's base URL; ``file``: the GGUF file of an hf spec, or the served model's
    name; ``query``: the model options as written, kept so ``str(spec)`` gives the spec back."""

    kind: ModelKind
    target: str = ""
    file: str = ""
    options: ModelOptions = field(default_factory=ModelOptions)
    query: str = ""

    @classmethod
    def parse(cls, text: str) -> "ModelSpec":
        full = text.strip()
        if full.startswith(OPENAI_PREFIX):  # a URL may hold "?": a server spec has no model options
            base_url, _, model = full[len(OPENAI_PREFIX):].partition("#")
            return cls("openai", base_url, model)
        base, options = split_options(full)  # a bad ?KEY=VALUE fails first, naming the whole spec
        query = full.partition("?")[2]
        if base == "bundled" or base.startswith("bundled:"):
            return cls("bundled", base.partition(":")[2], "", options, query)
        if base.startswith("hf:"):
            target, _, gguf_file = base[3:].partition("#")
            if not target:
                raise ConfigError(f"model spec {base!r} names no path or id; valid forms: {describe_specs()}")
            return cls("hf", target, gguf_file, options, query)
        raise ConfigError(f"unknown model spec {full!r}; valid forms: {describe_specs()}")

    @classmethod
    def for_path(cls, path: str | PathLike[str], file: str = "") -> "ModelSpec":
        """The hf spec of a model directory (or hub id) and optional GGUF file: every spec a
        command builds for a directory it wrote comes from here (``str(...)`` is ``hf:PATH``)."""
        return cls("hf", str(path), file)

    @property
    def is_http(self) -> bool:
        """Behind an HTTP server: safe to call from several threads (`eval --concurrency`)."""
        return self.kind == "openai"

    @property
    def is_local(self) -> bool:
        """Loads weights into this process (torch)."""
        return not self.is_http

    @property
    def most_capabilities(self) -> Capabilities | None:
        """The most its backend can give, known before loading (``BACKEND_CAPABILITIES``); None for
        a server's model, whose capabilities are the server's to say."""
        return BACKEND_CAPABILITIES[self.options.backend] if self.is_local else None

    @property
    def base(self) -> str:
        """The spec without its model options."""
        if self.kind == "bundled":
            return f"bundled:{self.target}" if self.target else "bundled"
        if self.kind == "hf":
            return f"hf:{self.target}" + (f"#{self.file}" if self.file else "")
        return f"{OPENAI_PREFIX}{self.target}" + (f"#{self.file}" if self.file else "")

    def resolved(self) -> "ModelSpec":
        """`bundled` -> `bundled:<default>`, so a later change of the default cannot resume into a
        run made with the old one; every other spec is already exact."""
        if self.kind != "bundled":
            return self
        return replace(self, target=resolve_bundled(self.target).name)

    def with_options(self, **values: object) -> "ModelSpec":
        """The spec with model options set (checked like written ones), e.g. ``device="cpu"``."""
        if self.kind == "openai":
            raise ConfigError(f"model spec {str(self)!r}: a server's model takes no model options")
        pairs = [p for p in self.query.split("&") if p and p.partition("=")[0] not in values]
        pairs += [f"{k}={v}" for k, v in values.items()]
        return ModelSpec.parse(self.base + "?" + "&".join(pairs))

    def __str__(self) -> str:
        return self.base + (f"?{self.query}" if self.query else "")


def is_model_spec(text: str) -> bool:
    """Whether `text` parses as a model spec (a name that is not one is, e.g., a directory or a
    teacher's keyword)."""
    try:
        ModelSpec.parse(text)
    except ConfigError:
        return False
    return True
