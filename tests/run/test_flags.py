"""The shared flags are declared once (run/flags.py), their help reads its choices from the
registries, and every command that takes one shows the same sentence for it.

Before: `--model` was declared 17 times, `--retriever` 10 and `--corpus` 8, each with its own help;
some `--model` helps left out openai: or #FILE.gguf, and the hand-typed retriever lists left out
opensearch."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

from dynrag.lm.spec import MODEL_HELP
from dynrag.retrieval.factory import RETRIEVERS
from dynrag.run.flags import RETRIEVER_HELP, retriever_flag
from tests.cli_inprocess import run_in_process

SRC = Path(__file__).resolve().parents[2] / "src" / "dynrag"
FLAGS_MODULE = "run/flags.py"
# Flags that mean one thing under every command that takes them. (`--data`, `--dataset`, `--method`,
# `--option` and `--batch` also name other things in some commands, declared there.)
SHARED = ("--model", "--retriever", "--corpus", "--retriever-option", "--workers", "--limit", "--config",
          "--preset", "--exemplars", "--aliases", "--progress", "--no-progress", "--skip-bad", "--no-skip-bad")


def declared_options() -> dict[str, set[str]]:
    """Option name -> the modules whose ``typer.Option(...)`` calls declare it."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(SRC.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and "Option" in (getattr(node.func, "attr", None), getattr(node.func, "id", None))):
                continue
            for arg in node.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--"):
                    for name in arg.value.split("/"):  # "--progress/--no-progress"
                        found[name].add(path.relative_to(SRC).as_posix())
    return found


def test_each_shared_flag_is_declared_in_one_module():
    declared = declared_options()
    elsewhere = {flag: sorted(declared[flag]) for flag in SHARED if declared[flag] != {FLAGS_MODULE}}
    assert not elsewhere, f"declare these through dynrag.run.flags: {elsewhere}"


def test_the_retriever_help_names_every_registered_retriever():
    text = retriever_flag().help
    missing = [name for name in RETRIEVERS.names() if not re.search(rf"\b{re.escape(name)}\b", text)]
    assert not missing and len(RETRIEVERS.names()) >= 5, (missing, text)


def option_help(command: list[str], flag: str) -> str:
    """The help of ``flag`` in ``dynrag COMMAND --help``, its lines joined."""
    r = run_in_process(*command, "--help", env={"COLUMNS": "100"})
    assert r.returncode == 0, r.stderr
    block = re.search(rf"^  {re.escape(flag)} \S+(.*?)(?=^  -)", r.stdout, re.S | re.M)
    assert block, r.stdout
    return " ".join(block.group(1).split())


@pytest.mark.parametrize("command", [["ask"], ["eval"], ["train", "grpo"], ["world", "teach"], ["reproduce"]])
def test_every_command_shows_the_same_model_and_retriever_sentences(command):
    assert f": {' '.join(MODEL_HELP.split())}." in option_help(command, "--model")
    if command[0] != "world":  # the world's commands retrieve from nothing they are given
        assert " ".join(RETRIEVER_HELP.split()) in option_help(command, "--retriever")


def every_command(app) -> list[list[str]]:
    names = [[c.name or c.callback.__name__] for c in app.registered_commands]
    for group in app.registered_groups:
        names += [[group.name, *sub] for sub in every_command(group.typer_instance)]
    return names


def test_every_option_placeholder_is_a_word_not_a_type():
    """typer writes `<int>`, `<str>` for an option that names no metavar; fill_placeholders gives
    each the one word its type calls for (N, X, TEXT, PATH), on every command."""
    from dynrag.cli import app

    commands = every_command(app)
    assert ["train", "grpo"] in commands and ["reproduce"] in commands and len(commands) >= 18
    for command in commands:
        r = run_in_process(*command, "--help", env={"COLUMNS": "200"})
        assert r.returncode == 0, (command, r.stderr)
        options = [line for line in r.stdout.splitlines() if line.lstrip().startswith("--")]
        typed = [line.strip() for line in options if re.search(r"<(int|str|float|path|list[^>]*)>", line)]
        assert not typed, (command, typed)
