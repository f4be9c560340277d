"""What a newcomer sees: where a hit comes from, what `ask --help` offers, metavars that
read as what to type, and no weight-loading bars from the model libraries outside --debug.

Before: folder hits showed a title only (the same heading for every chunk of a file), `ask --help`
did not list the methods, options read `--json <bool>` and `--option <list[str]>`, and every
model load drew transformers' "Loading weights" bars.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest

from rich.console import Console

from dynrag.methods.base import Answer, Retrieval, Trace
from dynrag.methods.registry import METHODS
from dynrag.render import render_answer
from dynrag.retrieval.base import Hit
from tests.cli_inprocess import run_in_process
from tests.tiny_models import save_tiny_llama
from tests.waiting import HANG_GUARD_S

DYNRAG = [sys.executable, "-m", "dynrag.cli"]
# What quiet_model_libraries sets: a CLI run in-process by an earlier test (CliRunner) leaves them
# in this process's environment, which would silence --debug and make the quiet checks vacuous.
QUIETING = ("HF_HUB_DISABLE_PROGRESS_BARS", "TRANSFORMERS_VERBOSITY", "TRANSFORMERS_NO_ADVISORY_WARNINGS")


def plain_env(**extra: str) -> dict[str, str]:
    """This process's environment without the quieting variables: the command must quiet itself."""
    return {**{k: v for k, v in os.environ.items() if k not in QUIETING}, **extra}


def test_hits_show_their_source_path_and_chunk_number():
    trace = Trace("Where is the mill?", "single", "fake", {})
    heading = "Harbour notes"  # every chunk of the file shares its heading
    trace.retrievals.append(Retrieval("mill", [
        Hit("towns/harbour.md#0", heading, "The mill stands by the harbour.", 2.0),
        Hit("towns/harbour.md#3", heading, "It was rebuilt after the flood.", 1.5),
        Hit("a/very/long/path/that/goes/on/and/on/to/the/file/chapter.md#12", heading, "More.", 1.0),
    ]))
    out = io.StringIO()
    render_answer(Console(file=out, width=200, color_system=None), Answer("So the answer is x.", "x", trace))
    shown = out.getvalue()
    assert "towns/harbour.md#0" in shown and "towns/harbour.md#3" in shown
    assert "…" in shown and "file/chapter.md#12" in shown  # a long path keeps its end


@pytest.mark.slow
def test_folder_corpus_chunks_are_told_apart_in_ask(tmp_path):
    folder = tmp_path / "notes"
    (folder / "towns").mkdir(parents=True)
    (folder / "towns" / "harbour.md").write_text("# Harbour notes\n\n" + " ".join(
        f"The mill number {i} stands by the harbour wall." for i in range(40)))
    index = tmp_path / "idx"
    r = subprocess.run([*DYNRAG, "index", str(folder), "--out", str(index), "--chunk", "tokens:30:0"],
                       capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert r.returncode == 0, r.stderr
    model = save_tiny_llama(tmp_path / "tiny")
    r = subprocess.run([*DYNRAG, "ask", "Which mill stands by the harbour?", "--corpus", str(index), "--model",
                        f"hf:{model}", "--option", "max_new_tokens=2"], capture_output=True, text=True, timeout=HANG_GUARD_S,
                       env={**os.environ, "COLUMNS": "200"})
    assert r.returncode == 0, r.stderr
    shown = [line for line in r.stdout.splitlines() if "towns/harbour.md#" in line]
    assert len(shown) == 3 and len({line.split("#")[1].split()[0] for line in shown}) == 3, r.stdout


def test_ask_help_lists_the_methods_and_points_to_the_docs_with_plain_metavars():
    r = run_in_process("ask", "--help", env={"COLUMNS": "120"})
    assert r.returncode == 0
    text = r.stdout
    for name in METHODS.names():
        assert f"  {name} " in text, name
    assert "docs/methods.md" in text
    assert "<bool>" not in text and "<list[str]>" not in text and "<str>  " not in text.split("Options:")[1]
    assert "--option KEY=VALUE" in text and "--retriever-option KEY=VALUE" in text
    assert "--json  " in text and "--corpus DIR" in text and "--model SPEC" in text
    assert "hf:PATH_OR_ID[#FILE.gguf]" in text  # help text is not eaten as markup
    r = run_in_process("eval", "--help")
    assert "--option KEY=VALUE" in r.stdout and "<list[str]>" not in r.stdout and "<bool>" not in r.stdout


def run_on_a_terminal(args: list[str]) -> str:
    """Run dynrag with stdout and stderr on a pseudo-terminal (as a user's shell does), return all it wrote."""
    master, slave = os.openpty()
    proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, close_fds=True,
                            env=plain_env(COLUMNS="120"))
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=HANG_GUARD_S)
    os.close(master)
    return b"".join(chunks).decode("utf-8", "replace")


@pytest.mark.slow
def test_no_weight_loading_bars_outside_debug(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "text": "the alpha bridge"}\n')
    index = [*DYNRAG, "index", str(corpus), "--dense", "--out"]
    quiet = subprocess.run([*index, str(tmp_path / "i1")], capture_output=True, text=True, timeout=HANG_GUARD_S,
                           env=plain_env())
    assert quiet.returncode == 0, quiet.stderr
    assert "Loading weights" not in quiet.stderr, quiet.stderr  # the embedder loads silently
    assert "Embedding" in quiet.stderr  # dynrag's own progress stays
    loud = subprocess.run([*DYNRAG, "--debug", "index", str(corpus), "--dense", "--out", str(tmp_path / "i2")],
                          capture_output=True, text=True, timeout=HANG_GUARD_S, env=plain_env())
    assert "Loading weights" in loud.stderr  # the bars are there to be silenced

    model = save_tiny_llama(tmp_path / "tiny")
    on_terminal = run_on_a_terminal([*DYNRAG, "ask", "Who built the bridge?", "--method", "direct", "--model",
                                     f"hf:{model}", "--option", "max_new_tokens=2"])
    assert "Who built the bridge?" in on_terminal  # it answered
    assert "Loading weights" not in on_terminal and "it/s]" not in on_terminal, on_terminal
