"""`dynrag reproduce`: the papers' tables and figures, each run with the paper's settings and printed
beside the published numbers. One module per paper (dragin, deeprag, bestpractice, world) fills the
table registry of ``tables``; ``catalog`` opens a table by name; ``runs`` runs it; ``render`` prints it.

This floor stands above eval, deeprag and world: a table may run any of them."""
