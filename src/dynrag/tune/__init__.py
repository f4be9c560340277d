"""`dynrag tune`: a method's options searched on dev questions with Optuna (docs/evaluation.md)."""
