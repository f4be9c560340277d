"""The benchmark formats ``dynrag eval`` reads, one module each, all in one registry.

A format is a ``Dataset``: how to read its file into raw records (records.py) and how to parse
one raw record into ``QAExample``s. Adding a benchmark is one module here that registers itself
with ``@DATASETS.register(name, summary=...)`` and one import line below; CLI help and the
"unknown dataset" error list ``DATASETS``' names.
"""

from dynrag.datasets.formats.registry import (  # noqa: F401
    DATASETS, Dataset, DecisionScoring, ParseContext, dataset_names, dataset_spec,
)

# Each module registers its format(s) on import; this order is the order choices are listed in.
from dynrag.datasets.formats import hotpotqa  # noqa: E402,F401,I001
from dynrag.datasets.formats import musique  # noqa: E402,F401
from dynrag.datasets.formats import strategyqa  # noqa: E402,F401
from dynrag.datasets.formats import iirc  # noqa: E402,F401
from dynrag.datasets.formats import popqa  # noqa: E402,F401
from dynrag.datasets.formats import jsonl  # noqa: E402,F401
from dynrag.datasets.formats import world  # noqa: E402,F401
