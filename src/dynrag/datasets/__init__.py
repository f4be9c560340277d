"""Benchmarks as data: the formats `dynrag eval` reads (``formats``, one registry), the records they
parse into (``examples``), how answers and decisions are scored against them (``metrics``,
``boundary``, and a generated world's per-hop figures in ``world_hops`` and ``world_decisions``),
and ``loaders``, which read a file of any registered format into examples.

This floor stands with the corpus: below the models, the methods and the runs that use it."""
