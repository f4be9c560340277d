"""The `dynrag` command line: demo, index, ask."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Optional

import typer
from rich.console import Console

from dynrag.errors import DynragError
from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Dynamic retrieval-augmented generation.")
console = Console()
err_console = Console(stderr=True)
_state = {"debug": False}


@app.callback()
def main(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    _state["debug"] = debug


@contextmanager
def user_errors() -> Iterator[None]:
    """Show a DynragError as one line and exit 1; tracebacks only with --debug."""
    try:
        yield
    except DynragError as exc:
        if _state["debug"]:
            raise
        err_console.print(f"[bold red]error:[/bold red] {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(1)
    except KeyboardInterrupt:
        err_console.print("[red]interrupted[/red]")
        raise typer.Exit(130)


def _load_lm_with_status(spec: str):
    from dynrag.lm import load_lm

    with err_console.status(f"loading model {spec} ..."):
        return load_lm(spec)


@app.command()
def index(
    source: Path = typer.Argument(..., help="JSONL {id,title,text}, DPR-style TSV, or a folder of .txt/.md"),
    out: Optional[Path] = typer.Option(None, "--out", help="Index directory to write (replaced atomically); --engine bm25."),
    chunk: str = typer.Option("none", "--chunk", help="none | tokens:SIZE:OVERLAP | sentences:N:OVERLAP | small-to-big:SMALL:LARGE:OVERLAP"),
    dense: bool = typer.Option(False, "--dense/--no-dense", help="Also embed the passages into OUT/dense (dense and hybrid search)."),
    embedding_model: Optional[Path] = typer.Option(None, "--embedding-model", help="Sentence-embedding model directory (default: packaged all-MiniLM-L6-v2)."),
    engine: str = typer.Option("bm25", "--engine", help="bm25 (a local bm25s index in --out) | opensearch (an index on a server)."),
    url: str = typer.Option("http://127.0.0.1:9200", "--url", help="--engine opensearch: the server (http or https)."),
    name: str = typer.Option("dynrag", "--name", help="--engine opensearch: the index name."),
    k1: float = typer.Option(1.2, "--k1", help="--engine opensearch: BM25 k1 (Lucene's default)."),
    b: float = typer.Option(0.75, "--b", help="--engine opensearch: BM25 b (Lucene's default)."),
    batch_size: int = typer.Option(500, "--batch-size", help="--engine opensearch: passages per bulk request."),
    shards: int = typer.Option(1, "--shards", help="--engine opensearch: primary shards of a new index."),
    replicas: int = typer.Option(0, "--replicas", help="--engine opensearch: replicas of a new index."),
    replace: bool = typer.Option(False, "--replace", help="--engine opensearch: delete an existing index of that name first."),
) -> None:
    """Build a BM25 index from a corpus: a local one (with --dense, its dense part too) or, with
    --engine opensearch, an OpenSearch index (resumable: run the same command again after a crash)."""
    with user_errors():
        from dynrag.corpus import read_passages
        from dynrag.corpus.readers import count_records
        from dynrag.text.chunking import parse_chunk_spec

        spec = parse_chunk_spec(chunk)
        if engine not in ("bm25", "opensearch"):
            raise DynragError(f"unknown --engine {engine!r}; choose one of: bm25, opensearch")
        if embedding_model is not None and not dense:
            raise DynragError("--embedding-model applies to the dense part: add --dense")
        passages = read_passages(source)  # checks the path now
        total = count_records(source) if spec.kind == "none" else None
        if engine == "opensearch":
            _index_opensearch(source, passages, spec, dense, out, url, name, k1, b, batch_size, shards, replicas,
                              replace, total)
            return
        if out is None:
            raise DynragError("--out DIR is required for --engine bm25")
        embedder = None
        if dense:  # load the model first: a bad --embedding-model fails before the BM25 build
            from dynrag.retrieval.embedder import Embedder

            embedder = Embedder.load(embedding_model)
        from dynrag.retrieval.bm25 import BM25Index

        manifest = BM25Index.build(passages, out, progress=True, chunk=spec, total=total)
        console.print(f"indexed {manifest['passage_count']} passages into {out}")
        if embedder is not None:
            from dynrag.retrieval.dense import DenseIndex

            dm = DenseIndex.build_alongside(out, embedder, progress=True)
            console.print(f"embedded {dm['count']} passages ({dm['embedding_model']}, {dm['dimension']}-d) into {out / 'dense'}")


def _index_opensearch(source, passages, spec, dense, out, url, name, k1, b, batch_size, shards, replicas,
                      replace, total) -> None:
    from dynrag.retrieval.opensearch_ingest import build_opensearch_index, source_identity
    from dynrag.text.chunking import chunk_passages

    if out is not None or dense:
        raise DynragError("--out and --dense apply to --engine bm25; an OpenSearch index lives on the server (--url, --name)")
    if spec.kind == "small-to-big":
        raise DynragError("--chunk small-to-big needs --engine bm25 (the large chunks live beside a local index)")
    meta = build_opensearch_index(
        chunk_passages(passages, spec), url, name, k1=k1, b=b, batch_size=batch_size, shards=shards,
        replicas=replicas, replace=replace, total=total, progress=True,
        source={**source_identity(source), "chunk": str(spec)},
        say=lambda line: err_console.print(line),
    )
    console.print(f"indexed {meta['passage_count']:,} passages into OpenSearch index {name!r} at {url} "
                  f"(BM25 k1={meta['k1']}, b={meta['b']}, english analyzer)")


@app.command()
def ask(
    question: str = typer.Argument(..., help="The question to answer."),
    config: Optional[Path] = typer.Option(
        None, "--config", help="A run configuration (YAML, docs/evaluation.md); flags given here override its keys."
    ),
    index_dir: Optional[Path] = typer.Option(None, "--index", help="Index directory (dynrag index)."),
    method: Optional[str] = typer.Option(None, "--method", help=f"Answering method: {METHODS.choices()} (default single)."),
    model: Optional[str] = typer.Option(None, "--model", help="bundled | bundled:NAME | hf:PATH_OR_ID[#FILE.gguf]"),
    option: list[str] = typer.Option([], "--option", help="Method option KEY=VALUE (repeatable)."),
    preset: Optional[str] = typer.Option(
        None, "--preset", help="Retrieval-chain preset: balanced | best (same as --option preset=NAME)."
    ),
    retriever: Optional[str] = typer.Option(
        None, "--retriever",
        help=f"{RETRIEVERS.choices()} over --index (dense parts are built into it on first use). "
        "Default: bm25, or hybrid with --preset balanced|best.",
    ),
    retriever_option: list[str] = typer.Option(
        [], "--retriever-option", help="Retriever option KEY=VALUE (repeatable), e.g. alpha=0.3 for hybrid."
    ),
    exemplars: Optional[str] = typer.Option(None, "--exemplars", help="Few-shot exemplar style (dataset name; default: default)."),
    trace: Optional[Path] = typer.Option(None, "--trace", help="Write the full trace JSON here."),
    as_json: bool = typer.Option(False, "--json", help="Print the trace JSON instead of the rendering."),
) -> None:
    """Answer one question with a method over an index."""
    with user_errors():
        from dynrag.config import load_run_config
        from dynrag.methods.chain import preset_retriever
        from dynrag.methods.prompting import PromptBuilder
        from dynrag.methods.registry import NO_RETRIEVAL, build_method, parse_options
        from dynrag.render import render_answer
        from dynrag.retrieval.factory import given_options, needs_index, open_retriever, with_numpy_bm25

        if not question.strip():
            raise DynragError("the question is empty; pass a question to answer")
        flags = dict(index=index_dir, method=method, model=model, retriever=retriever, exemplars=exemplars)
        pairs = ([f"preset={preset}"] if preset else []) + list(option)  # --option preset=... wins
        run = load_run_config(config, flags, pairs, retriever_option)
        method_name = run.method or "single"
        options = parse_options(method_name, run.options)  # fail before loading anything
        builder = PromptBuilder.for_dataset(run.exemplars or "default")
        if method_name in NO_RETRIEVAL and (run.retriever or run.retriever_options):
            raise DynragError(f"--retriever/--retriever-option: method {method_name!r} does not retrieve")
        searcher = None
        name = run.retriever or preset_retriever(options)
        if run.index is None and method_name not in NO_RETRIEVAL and needs_index(name):
            raise DynragError(f"method {method_name!r} retrieves: pass --index DIR (build one with `dynrag index`)")
        if method_name not in NO_RETRIEVAL and (run.index is not None or not needs_index(name)):
            searcher_options = given_options(name, run.retriever_options, "--retriever-option")
            searcher = open_retriever(
                name, run.index, with_numpy_bm25(name, searcher_options), work_dir=run.index or Path("."), progress=True
            )
        lm = _load_lm_with_status(run.model)
        answer = build_method(method_name, lm, searcher, options, builder).answer(question)
        data = answer.to_dict()
        if trace is not None:
            from dynrag.io import atomic_write_json

            atomic_write_json(trace, data)
        if as_json:
            sys.stdout.write(json.dumps(data, ensure_ascii=False, indent=2) + "\n")
        else:
            render_answer(console, answer)


@app.command()
def demo(
    model: str = typer.Option("bundled", "--model", help="Model spec."),
    limit: int = typer.Option(0, "--limit", help="Answer only the first N demo questions (0 = all)."),
) -> None:
    """Build the demo index (first run) and answer the demo questions with and without retrieval."""
    with user_errors():
        from dynrag.demo import run_demo

        run_demo(console, model_spec=model, limit=limit or None)


def _register_subcommands() -> None:
    """Command groups that live in their own modules add themselves to the app here."""
    import importlib

    for module in ("dynrag.eval.cli",):
        try:
            importlib.import_module(module).register(app, user_errors)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise


_register_subcommands()


if __name__ == "__main__":  # pragma: no cover
    app()
