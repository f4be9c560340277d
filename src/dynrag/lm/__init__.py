"""Language-model layer: the LanguageModel protocol, Generation records, and `load_lm(spec)`."""

from dynrag.lm.base import (
    Capabilities,
    Generation,
    LanguageModel,
    Prompt,
    Segment,
    WithoutOptionalCapabilities,
    require,
)
from dynrag.lm.loader import describe_specs, load_lm

__all__ = [
    "Capabilities", "Generation", "LanguageModel", "Prompt", "Segment", "WithoutOptionalCapabilities",
    "describe_specs", "load_lm", "require",
]
