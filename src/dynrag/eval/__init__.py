"""Evaluation: benchmark loaders, metrics, the resumable runner, reports and comparison.

loaders/records: the original file formats into QAExample records; metrics: SQuAD-style scores;
pool: --corpus contexts; rundir/runner: the run directory and `dynrag eval`; summary: per-question
records and summary figures; boundary: knowledge-boundary figures; compare: `dynrag compare`;
cli: the two commands. docs/evaluation.md describes formats, files and metrics.
"""
