"""The `dynrag` command line: demo, index, ask."""

from __future__ import annotations

import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console
from rich.text import Text

from dynrag.errors import DynragError
from dynrag.methods.registry import METHODS
from dynrag.run.flags import (
    config_flag, corpus_flag, exemplars_flag, fill_placeholders, limit_flag, method_flag, method_option_flag, model_flag, preset_flag, progress_flag,
    old_spelling, renamed, retriever_flag, retriever_option_flag,
)

# Plain help: option help is shown as written (rich markup would eat "[#FILE.gguf]"), and every
# option that takes a value names it (KEY=VALUE, DIR, SPEC) instead of a Python type.
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Dynamic retrieval-augmented generation.")
# User text (paths, questions, titles) is printed as Text, never parsed as markup or emoji codes.
console = Console(emoji=False)
err_console = Console(stderr=True, emoji=False)
_state = {"debug": False}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, so it unwinds like Ctrl-C: worker processes are
    stopped by the code that started them and a tune's interrupted trial is queued again. The
    default action would end the process at once and leave its workers running."""


def _raise_terminated(signum, frame) -> None:
    raise Terminated()


@app.callback()
def main(debug: bool = typer.Option(
    False, "--debug", help="Show tracebacks for errors, and the model libraries' own progress bars and warnings."
)) -> None:
    _state["debug"] = debug
    if not debug:
        quiet_model_libraries()


def quiet_model_libraries() -> None:
    """No weight-loading bars or library warnings from transformers / huggingface_hub: dynrag
    says what it loads itself. Set before they are imported (they read these once); applied to
    them directly when they already are."""
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


@contextmanager
def user_errors() -> Iterator[None]:
    """Show a DynragError as one line and exit 1; tracebacks only with --debug. An OSError that
    reached here unwrapped (a filesystem fault outside dynrag.io) is shown the same way, naming
    its path and the OS's reason."""
    try:
        yield
    except (DynragError, OSError) as exc:
        if _state["debug"]:
            raise
        if isinstance(exc, OSError):
            from dynrag.io.faults import os_error_message

            message = os_error_message(exc.filename, exc) if exc.filename else (exc.strerror or str(exc))
        else:
            message = str(exc)
        err_console.print(Text.assemble(("error: ", "bold red"), message), highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    except Terminated:
        err_console.print("[red]terminated[/red]")
        raise typer.Exit(143)
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        raise typer.Exit(130)


def warn(message: str) -> None:
    err_console.print(Text.assemble(("warning: ", "bold yellow"), message), highlight=False, soft_wrap=True)


def _load_lm_with_status(spec):
    from dynrag.lm import load_lm

    with err_console.status(Text(f"loading model {spec} ...")):
        return load_lm(spec)


def _with_contexts(source: Path, pairs: list[str]) -> tuple[Iterator, int, list[Path]]:
    """The corpus's passages followed by the benchmark files' paragraphs it lacks, how many, and the files."""
    from itertools import chain

    from dynrag.corpus import read_passages
    from dynrag.datasets.added_contexts import contexts_to_add

    files = []
    for pair in pairs:  # not a dict: two files of one dataset (train slices) may both be given
        dataset, sep, path = pair.partition("=")
        if not sep or not dataset.strip() or not path.strip():
            raise DynragError(f"--add-contexts {pair!r}: expected DATASET=FILE, e.g. hotpotqa=train.json")
        files.append((dataset.strip(), Path(path.strip())))
    added = contexts_to_add(files, (p.text for p in read_passages(source)))
    console.print(Text(f"adding {len(added):,} context paragraphs of {', '.join(str(f) for _, f in files)}"))
    return chain(read_passages(source), added), len(added), [f for _, f in files]


@app.command()
def index(
    source: Path = typer.Argument(..., metavar="SOURCE", help="JSONL {id,title,text}, DPR-style TSV, or a folder of .txt/.md"),
    out: Optional[Path] = typer.Option(None, "--out", metavar="DIR", help="Index directory to write (replaced atomically); --engine bm25."),
    chunk: str = typer.Option("none", "--chunk", metavar="SPEC", help="none | tokens:SIZE:OVERLAP | sentences:N:OVERLAP | small-to-big:SMALL:LARGE:OVERLAP"),
    dense: bool = typer.Option(False, "--dense/--no-dense", help="Also embed the passages into OUT/dense (dense and hybrid search)."),
    embedding_model: Optional[str] = typer.Option(None, "--embedding-model", metavar="NAME|DIR", help="packaged:all-minilm-l6-v2 (the default), packaged:all-mpnet-base-v2 (make embeddings) or a sentence-embedding model directory."),
    engine: str = typer.Option("bm25", "--engine", metavar="NAME", help="bm25 (a local bm25s index in --out) | opensearch (an index on a server)."),
    url: str = typer.Option("http://127.0.0.1:9200", "--url", metavar="URL", help="--engine opensearch: the server (http or https)."),
    name: str = typer.Option("dynrag", "--name", metavar="NAME", help="--engine opensearch: the index name."),
    k1: float = typer.Option(1.2, "--k1", metavar="FLOAT", help="--engine opensearch: BM25 k1 (Lucene's default)."),
    b: float = typer.Option(0.75, "--b", metavar="FLOAT", help="--engine opensearch: BM25 b (Lucene's default)."),
    batch_size: int = typer.Option(500, "--batch-size", metavar="N", help="--engine opensearch: passages per bulk request."),
    shards: int = typer.Option(1, "--shards", metavar="N", help="--engine opensearch: primary shards of a new index."),
    replicas: int = typer.Option(0, "--replicas", metavar="N", help="--engine opensearch: replicas of a new index."),
    replace: bool = typer.Option(False, "--replace", help="--engine opensearch: delete an existing index of that name first."),
    add_contexts: list[str] = typer.Option([], "--add-contexts", metavar="DATASET=FILE", help="Also index a benchmark file's context paragraphs that the corpus does not hold (same text, whitespace aside), e.g. to tune on train questions over the corpus you evaluate with (repeatable)."),
    progress: bool = progress_flag(),
) -> None:
    """Build a BM25 index from a corpus: a local one (with --dense, its dense part too) or, with
    --engine opensearch, an OpenSearch index (resumable: run the same command again after a crash)."""
    with user_errors():
        from dynrag.corpus import read_passages, source_stamps
        from dynrag.corpus.readers import count_records
        from dynrag.errors import DataError
        from dynrag.retrieval.index_build import build_index
        from dynrag.retrieval.store_writer import DuplicatePassageId
        from dynrag.text.chunking import parse_chunk_spec

        spec = parse_chunk_spec(chunk)
        if engine not in ("bm25", "opensearch"):
            raise DynragError(f"unknown --engine {engine!r}; choose one of: bm25, opensearch")
        if embedding_model is not None and not dense:
            raise DynragError("--embedding-model applies to the dense part: add --dense")
        passages = read_passages(source)  # checks the path now
        total = count_records(source) if spec.kind == "none" else None
        context_files: list[Path] = []
        if add_contexts:
            passages, added, context_files = _with_contexts(source, add_contexts)
            total = total + added if total is not None else None
        if engine == "opensearch":
            _index_opensearch(source, passages, spec, dense, out, url, name, k1, b, batch_size, shards, replicas,
                              replace, total, progress)
            return
        if out is None:
            raise DynragError("--out DIR is required for --engine bm25")
        embedder = None
        if dense:  # load the model first: a bad --embedding-model fails before the BM25 build
            from dynrag.retrieval.embedder import Embedder

            embedder = Embedder.load(embedding_model)
        # BM25 and dense parts are built in one temporary directory that replaces OUT only when
        # both are complete: an interrupted build (kill -9 while embedding too) keeps the old index.
        stamps = source_stamps(source)  # before reading: an edit during the build shows next time
        if context_files:
            stamps["added_contexts"] = [source_stamps(f) for f in context_files]
        try:
            manifest, dm = build_index(passages, out, embedder=embedder, chunk=spec, progress=progress, total=total,
                                       sources=stamps)
        except DuplicatePassageId as exc:
            raise DataError(str(source), str(exc) + (f" (ids after --chunk {spec})" if spec.kind != "none" else "")) from exc
        console.print(Text(f"indexed {manifest['passage_count']} passages into {out}"), soft_wrap=True)
        long = manifest.get("long_passages") or {}
        if long.get("count"):
            warn((
                f"{long['count']:,} passage(s) of {source} are over {long['over_chars']:,} characters (the longest, "
                f"{long['longest_id']!r}, has {long['longest_chars']:,}); a prompt keeps only the part of such a "
                "passage that fits the model's context window, and retrieval ranks it as one block: split them "
                f"with --chunk tokens:100:20 (or sentences:4:1)" + ("" if spec.kind == "none" else f" smaller than {spec}")
            ))
        if dm is not None:
            console.print(Text(f"embedded {dm['count']} passages ({dm['embedding_model']}, {dm['dimension']}-d) into {out / 'dense'}"), soft_wrap=True)


def _index_opensearch(source, passages, spec, dense, out, url, name, k1, b, batch_size, shards, replicas,
                      replace, total, progress) -> None:
    from dynrag.retrieval.opensearch_ingest import build_opensearch_index, source_identity
    from dynrag.text.chunking import chunk_passages

    if out is not None or dense:
        raise DynragError("--out and --dense apply to --engine bm25; an OpenSearch index lives on the server (--url, --name)")
    if spec.kind == "small-to-big":
        raise DynragError("--chunk small-to-big needs --engine bm25 (the large chunks live beside a local index)")
    meta = build_opensearch_index(
        chunk_passages(passages, spec), url, name, k1=k1, b=b, batch_size=batch_size, shards=shards,
        replicas=replicas, replace=replace, total=total, progress=progress,
        source={**source_identity(source), "chunk": str(spec)},
        say=lambda line: err_console.print(Text(line), soft_wrap=True),
    )
    console.print(Text(f"indexed {meta['passage_count']:,} passages into OpenSearch index {name!r} at {url} "
                       f"(BM25 k1={meta['k1']}, b={meta['b']}, english analyzer)"), soft_wrap=True)


def _ask_help() -> str:
    width = max(len(name) for name in METHODS.names())
    lines = "\n".join(f"  {entry.name:<{width}}  {entry.summary}" for entry in METHODS)
    return (
        "Answer one question with a method over an index.\n\n"
        f"\b\nMethods (--method, default single):\n{lines}\n\n"
        "Each method's options (--option KEY=VALUE) are in docs/methods.md, the retrieval chain's "
        "(--preset, rerank, compress ...) in docs/pipeline.md."
    )


@app.command(help=_ask_help())
def ask(
    question: str = typer.Argument(..., metavar="QUESTION", help="The question to answer."),
    config: Optional[Path] = config_flag(),
    corpus: Optional[Path] = corpus_flag(role="The index to search", index_only=True),
    index_dir: Optional[Path] = old_spelling("--index", metavar="DIR"),
    method: Optional[str] = method_flag(role="Answering method (default single)"),
    model: Optional[str] = model_flag(),
    option: list[str] = method_option_flag(),
    preset: Optional[str] = preset_flag(),
    retriever: Optional[str] = retriever_flag(role="Retriever over --corpus (default bm25, or hybrid with --preset balanced|best)"),
    retriever_option: list[str] = retriever_option_flag(),
    exemplars: Optional[str] = exemplars_flag(role="Few-shot exemplar style (default: default)"),
    trace: Optional[Path] = typer.Option(None, "--trace", metavar="FILE", help="Write the full trace JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the trace JSON instead of the rendering."),
    progress: bool = progress_flag(),
) -> None:
    with user_errors():
        from dynrag.config import load_run_config
        from dynrag.methods.budget import check_question

        if not question.strip():
            raise DynragError("the question is empty; pass a question to answer")
        check_question(question.strip())
        index = renamed(corpus, index_dir, "--corpus", "--index")
        flags = dict(index=index, method=method, model=model, retriever=retriever, exemplars=exemplars)
        pairs = ([f"preset={preset}"] if preset else []) + list(option)  # --option preset=... wins
        answer_question(question, load_run_config(config, flags, pairs, retriever_option), trace, as_json, progress)


def answer_question(question: str, run, trace: Path | None, as_json: bool, progress: bool) -> None:
    """`dynrag ask` after its flags are read: plan (every check), build, answer, show, save."""
    from dynrag.run.assemble import assemble
    from dynrag.run.plan import make_plan

    plan = make_plan(run, command="ask")  # fails before an index is opened (or its dense part built)
    if trace is not None:
        from dynrag.io.faults import check_writable

        check_writable(trace)  # before the work whose trace it is
    parts = assemble(plan, progress=progress, say=warn, load=_load_lm_with_status)
    answer = parts.method.answer(question)
    data = answer.to_dict()
    # The answer is shown first: a disk that fills up meanwhile loses the trace file, not the answer.
    if as_json:
        sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        sys.stdout.flush()
    else:
        from dynrag.render import render_answer

        render_answer(console, answer)
    if trace is not None:
        from dynrag.io.files import atomic_write_json

        atomic_write_json(trace, data)


@app.command()
def demo(
    model: str = model_flag("bundled"),
    limit: Optional[int] = limit_flag(role="Demo questions (default: all)"),
    full: bool = typer.Option(False, "--full", help="All 30 demo questions, closed book and single, with a summary table."),
    progress: bool = progress_flag(),
) -> None:
    """A few demo questions closed book, with one retrieval and with DRAGIN's dynamic retrieval
    (--full: all 30, closed book and single)."""
    with user_errors():
        from dynrag.demo import run_demo

        if limit == 0:  # once the spelling of "all"; every other command refuses it
            from dynrag.config import warn_deprecated

            warn_deprecated("demo --limit 0 for all questions is now the default: leave --limit out")
            limit = None
        elif limit is not None and limit < 1:
            raise DynragError(f"--limit must be at least 1 (got {limit})")
        run_demo(console, model_spec=model, limit=limit, full=full, progress=progress)


def _register_subcommands() -> None:
    """Command groups that live in their own modules add themselves to the app here."""
    import importlib

    for module in ("dynrag.eval.cli", "dynrag.reproduce.cli", "dynrag.serve.cli", "dynrag.deeprag.cli", "dynrag.world.cli",
                   "dynrag.tune.cli"):
        try:
            importlib.import_module(module).register(app, user_errors)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


_register_subcommands()
fill_placeholders(app)


def run() -> None:
    """The ``dynrag`` command: the app, with SIGTERM handled as an interruption."""
    import signal

    signal.signal(signal.SIGTERM, _raise_terminated)
    app()


if __name__ == "__main__":  # pragma: no cover
    run()
