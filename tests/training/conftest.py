"""The training tests share the DeepRAG tests' tiny benchmark and tiny model on disk."""

from tests.deeprag.conftest import tiny_model_dir  # noqa: F401  (a fixture, used by name)
