"""Evaluation: the resumable runner, its executors, reports and comparison.

pool: --corpus contexts; runner: `dynrag eval` over io/rundir.py's run directory; execution,
processes, dask_cluster, worker: who answers the questions; summary: per-question records and
summary figures; compare: `dynrag compare`; retrieval, retrieval_run: `dynrag eval-retrieval`;
cli: the commands. The benchmark formats, records and metrics they read are in dynrag.datasets;
docs/evaluation.md describes formats, files and metrics.
"""
