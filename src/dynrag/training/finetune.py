"""How a training run changes the model: ``FineTune``, one member per choice of the ``method``
option that every trainer (stage I and II, GRPO, the world's teach and reader, the reader recipe)
takes. Callers compare against the members, never the words; the members are strings with the
same values, so options files, checkpoints, JSON reports and messages keep the words."""

from __future__ import annotations

from enum import Enum


class FineTune(str, Enum):
    AUTO = "auto"  # LoRA for a model over ~1B parameters, else full (settled once the model is loaded)
    FULL = "full"  # every weight trained
    LORA = "lora"  # adapters trained on a frozen base, merged at the end

    # "lora", not "FineTune.LORA", wherever one is formatted into a message, a title or a path
    __str__ = str.__str__
    __format__ = str.__format__
