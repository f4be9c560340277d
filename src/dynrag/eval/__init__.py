"""Evaluation: answer metrics (and, later, dataset loaders, the resumable runner and reports)."""
