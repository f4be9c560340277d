"""The command-line flags several commands share, each declared here once: its name, its metavar and
one help sentence, with the choices read from the registries, so no command's help can name fewer
retrievers, datasets or model forms than the others.

A flag's help reads ``ROLE: SENTENCE``. The sentence is the flag's and the same under every command;
the role is the command's, for what the flag is to it ("Model to fine-tune", "The stage-I model
..., target of the search"), and each factory has a plain one for commands with nothing to add. A
command keeps its own default: what a flag means does not fix what it defaults to (``--model`` is
optional for `eval`, which reads it from --config, and required for `train grpo`).
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

import typer
from typer.models import OptionInfo

from dynrag.datasets.formats import DATASETS
from dynrag.lm.spec import MODEL_HELP
from dynrag.methods.chain import PRESETS
from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS

RETRIEVER_HELP = f"{RETRIEVERS.choices()}; dense parts are built into the index on first use."
RETRIEVER_OPTION_HELP = "KEY=VALUE (repeatable), e.g. alpha=0.3 for hybrid; each retriever's keys are in docs/evaluation.md."
CORPUS_HELP = "'contexts' (the default: pool the questions' own context paragraphs) or an index directory (dynrag index)."
INDEX_CORPUS_HELP = "an index directory (dynrag index)."
DATASET_HELP = f"{DATASETS.choices(', ')}."
DATA_HELP = "a benchmark file in its original format (--dataset names which)."
METHOD_HELP = f"{METHODS.choices()}."
METHOD_OPTION_HELP = "KEY=VALUE (repeatable), as docs/methods.md lists them for each method."
PRESET_HELP = f"{' | '.join(PRESETS)} (the same as --option preset=NAME; docs/pipeline.md)."
CONFIG_HELP = "a YAML file (docs/evaluation.md) whose keys the flags given here override."
EXEMPLARS_HELP = "a dataset's name, for its worked examples in the prompt, or default."
LIMIT_HELP = "only the first N."
SHARD_HELP = ("every K-th question from the I-th (after --limit), a run of its own; the K shards of a row, "
              "run apart on any machines, are joined by `reproduce --no-run` (docs/evaluation.md).")
BATCH_HELP = ("questions in flight in one process, their generations decoded together by one local model (one "
              "forward pass a token for all of them); not part of the run's identity.")
WORKERS_HELP = ("N or auto (one per core), each process with its own model; not part of the run's identity: a run "
                "resumes with any value.")
PROGRESS_HELP = "Show progress bars."
SKIP_BAD_HELP = "Skip and count malformed records instead of stopping at the first."
ALIASES_HELP = "2WikiMultihopQA answer alias file."


def _help(role: str, sentence: str) -> str:
    return f"{role}: {sentence}"


def model_flag(default: Any = None, role: str = "Model") -> Any:
    return typer.Option(default, "--model", metavar="SPEC", help=_help(role, f"{MODEL_HELP}."))


def retriever_flag(default: Any = None, role: str = "Retriever (default bm25)") -> Any:
    return typer.Option(default, "--retriever", metavar="NAME", help=_help(role, RETRIEVER_HELP))


def retriever_option_flag(role: str = "Retriever option") -> Any:
    return typer.Option([], "--retriever-option", metavar="KEY=VALUE", help=_help(role, RETRIEVER_OPTION_HELP))


def corpus_flag(default: Any = None, role: str = "Corpus", index_only: bool = False) -> Any:
    """``index_only``: where only an index will do (ask, serve: no dataset's own paragraphs to pool)."""
    return typer.Option(default, "--corpus", metavar="DIR" if index_only else "contexts|DIR",
                        help=_help(role, INDEX_CORPUS_HELP if index_only else CORPUS_HELP))


def dataset_flag(default: Any = None, role: str = "Benchmark format of --data") -> Any:
    return typer.Option(default, "--dataset", metavar="NAME", help=_help(role, DATASET_HELP))


def data_flag(default: Any = None, role: str = "Questions") -> Any:
    return typer.Option(default, "--data", metavar="FILE", help=_help(role, DATA_HELP))


def method_flag(default: Any = None, role: str = "Answering method") -> Any:
    return typer.Option(default, "--method", metavar="NAME", help=_help(role, METHOD_HELP))


def method_option_flag(role: str = "Method option") -> Any:
    return typer.Option([], "--option", metavar="KEY=VALUE", help=_help(role, METHOD_OPTION_HELP))


def preset_flag(role: str = "Retrieval-chain preset") -> Any:
    return typer.Option(None, "--preset", metavar="NAME", help=_help(role, PRESET_HELP))


def config_flag(role: str = "Run configuration") -> Any:
    return typer.Option(None, "--config", metavar="FILE", help=_help(role, CONFIG_HELP))


def exemplars_flag(default: Any = None, role: str = "Few-shot exemplar style") -> Any:
    return typer.Option(default, "--exemplars", metavar="STYLE", help=_help(role, EXEMPLARS_HELP))


def limit_flag(default: Any = None, role: str = "Questions") -> Any:
    return typer.Option(default, "--limit", metavar="N", help=_help(role, LIMIT_HELP))


def shard_flag(role: str = "Only one shard of the questions") -> Any:
    return typer.Option(None, "--shard", metavar="I/K", help=_help(role, SHARD_HELP))


def batch_flag(default: Any = None, role: str = "Batch", at_least: int | None = None) -> Any:
    return typer.Option(default, "--batch", metavar="N", min=at_least, help=_help(role, BATCH_HELP))


def workers_flag(default: Any = None, role: str = "Worker processes") -> Any:
    return typer.Option(default, "--workers", metavar="N|auto", help=_help(role, WORKERS_HELP))


def progress_flag() -> Any:
    return typer.Option(True, "--progress/--no-progress", help=PROGRESS_HELP)


def skip_bad_flag(default: Any = False) -> Any:
    """A pair, so a --config file's skip_bad: true can be turned off here; a plain --skip-bad still reads."""
    return typer.Option(default, "--skip-bad/--no-skip-bad", help=SKIP_BAD_HELP)


def old_spelling(old: str, metavar: str | None = None) -> Any:
    """A renamed flag's old spelling, kept for a release: still read, hidden from --help."""
    return typer.Option(None, old, metavar=metavar, hidden=True)


def renamed(new_value: Any, old_value: Any, new: str, old: str) -> Any:
    """The value given under ``new``, or under ``old`` with a one-line warning; not both."""
    if old_value is None:
        return new_value
    from dynrag.config import warn_deprecated
    from dynrag.errors import ConfigError

    if new_value is not None:
        raise ConfigError(f"{old} is the old spelling of {new}; give {new} alone")
    warn_deprecated(f"{old} is now {new}")
    return old_value


def aliases_flag() -> Any:
    return typer.Option(None, "--aliases", metavar="FILE", help=ALIASES_HELP)


# The placeholder a flag shows in --help when its declaration names none, by the value's type, so
# every command writes `--skip N` rather than typer's `<int>` on some commands and N on others.
PLACEHOLDERS = {int: "N", float: "X", str: "TEXT", Path: "PATH"}


def _placeholder(annotation: Any) -> str | None:
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (list, typing.Union, types.UnionType) and len(args) == 1:
        return _placeholder(args[0])
    return PLACEHOLDERS.get(annotation)


def fill_placeholders(app: typer.Typer) -> None:
    """Give every option of ``app``'s commands (and its groups') that names no metavar the one its
    type calls for; flags and a metavar already named are left alone. (Positional arguments keep
    typer's form, NAME <type>, the same on every command.)"""
    import inspect

    for command in app.registered_commands:
        for parameter in inspect.signature(command.callback, eval_str=True).parameters.values():
            info = parameter.default
            if isinstance(info, OptionInfo) and info.metavar is None and parameter.annotation is not bool:
                info.metavar = _placeholder(parameter.annotation)
    for group in app.registered_groups:
        fill_placeholders(group.typer_instance)
