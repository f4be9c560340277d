"""`dynrag serve`; dynrag.cli registers it through ``register``."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, ContextManager, Optional

import typer
from rich.console import Console

from dynrag.run.flags import (
    config_flag, corpus_flag, exemplars_flag, model_flag, old_spelling, renamed, retriever_flag, retriever_option_flag,
)
from dynrag.serve.limits import DEFAULT_PORT, ServeSettings

_DEFAULTS = ServeSettings()


def register(app: typer.Typer, user_errors: Callable[[], ContextManager[None]]) -> None:
    @app.command("serve")
    def serve_command(
        config: Optional[Path] = config_flag(
            role="Run configuration (model, index, retriever, retriever_options, exemplars, and method/options as the "
            "default for requests that name none)",
        ),
        corpus: Optional[Path] = corpus_flag(role="The index to search (default: the demo index, built on first use)", index_only=True),
        index_dir: Optional[Path] = old_spelling("--index", metavar="DIR"),
        model: Optional[str] = model_flag(),
        retriever: Optional[str] = retriever_flag(
            role="Retriever over --corpus (default bm25, or hybrid with a balanced|best preset in options)"
        ),
        retriever_option: list[str] = retriever_option_flag(),
        exemplars: Optional[str] = exemplars_flag(),
        host: str = typer.Option(_DEFAULTS.host, "--host", help="Address to bind (loopback by default)."),
        port: int = typer.Option(DEFAULT_PORT, "--port", help="TCP port."),
        api_key: Optional[str] = typer.Option(
            None, "--api-key", envvar="DYNRAG_API_KEY", show_envvar=True,
            help="Bearer key required on every /v1/* request (the viewer page asks for it).",
        ),
        queue_size: int = typer.Option(_DEFAULTS.queue_size, "--queue-size", help="Requests that may wait while the running ones run; beyond: 429."),
        batch: Optional[int] = typer.Option(
            None, "--batch", metavar="N", help="Requests run at once, their generations decoded together in one "
            "forward pass a token. Default: 8 for a local model that can batch, else 1 (an openai: model).",
        ),
        timeout: float = typer.Option(_DEFAULTS.timeout, "--timeout", help="Seconds a request may wait and run; then 504 and the work stops."),
        max_body_bytes: int = typer.Option(_DEFAULTS.max_body_bytes, "--max-body-bytes", help="Largest request body (413 beyond)."),
        max_question_chars: int = typer.Option(_DEFAULTS.max_question_chars, "--max-question-chars", help="Longest question."),
        max_tokens: int = typer.Option(_DEFAULTS.max_tokens, "--max-tokens", help="Ceiling on a request's max_tokens."),
    ) -> None:
        """Serve methods over HTTP: OpenAI-compatible chat completions, /v1/ask and the trace viewer at /."""
        with user_errors():
            from dynrag.config import load_run_config
            from dynrag.registry import parse_model

            settings = parse_model(ServeSettings, {
                "host": host, "port": port, "api_key": api_key or None, "queue_size": queue_size,
                "batch": batch, "timeout": timeout, "max_body_bytes": max_body_bytes, "max_question_chars": max_question_chars,
                "max_tokens": max_tokens,
            }, "dynrag serve")
            flags = dict(index=renamed(corpus, index_dir, "--corpus", "--index"), model=model, retriever=retriever, exemplars=exemplars)
            run = load_run_config(config, flags, (), retriever_option)
            err = Console(stderr=True)
            run_server(build_app(settings, run, err), settings, err)


def build_app(settings: ServeSettings, run, console: Console):
    """The app over the model, index and retriever a RunConfig names (the demo index by default),
    planned and built as `dynrag ask` plans and builds them: the same preset picks the same retriever."""
    from dynrag.run.assemble import assemble
    from dynrag.run.plan import make_plan
    from dynrag.serve.app import create_app
    from dynrag.serve.engine import Engine

    plan = make_plan(run, command="serve")  # every check before the demo index is built or anything loads
    refuse_http_batch(settings.batch, plan.model)
    index_dir = plan.retriever.index if plan.retriever and plan.retriever.index is not None else None
    if index_dir is None and plan.retriever is not None and plan.retriever.traits.needs_index:
        index_dir = demo_index(console)
    def load(spec):
        from dynrag.lm import load_lm

        with console.status(f"loading model {spec} ..."):
            return load_lm(spec)

    parts = assemble(plan, index_dir=index_dir, with_method=False, load=load,
                     say=lambda line: console.print(f"[yellow]warning:[/yellow] {line}"))
    label = str(index_dir) if index_dir is not None else plan.retriever.name
    batch = choose_batch(settings.batch, parts.lm)
    lm = parts.lm
    if batch > 1:
        from dynrag.lm.batching import BatchingLM

        lm = BatchingLM(lm, max_rows=batch)  # once: every running request's generations join its batch
    settings = settings.model_copy(update={"batch": batch})
    console.print(f"dynrag serve: {batch} request{'s' if batch > 1 else ''} at a time"
                  + (", generations batched" if batch > 1 else ""))
    engine = Engine(lm, parts.retriever, parts.builder, index_label=label,
                    default_method=plan.method.name, default_options=run.options)
    return create_app(engine, settings)


def refuse_http_batch(requested: int | None, spec) -> None:
    """``--batch N`` (N > 1) for a model behind an HTTP server, refused before anything loads."""
    if requested is not None and requested > 1 and spec.is_http:
        from dynrag.errors import ConfigError

        raise ConfigError(f"--batch {requested}: model {str(spec)!r} runs behind an HTTP server, not in this "
                          "process, so its generations cannot be batched here; leave out --batch or use --batch 1")


def choose_batch(requested: int | None, lm) -> int:
    """The requests to run at once: ``requested``, else 8 for a model that can batch and 1 otherwise;
    a request over 1 for a model that cannot batch is refused with the reason."""
    from dynrag.errors import ConfigError
    from dynrag.lm.batch_engine import DEFAULT_MAX_ROWS
    from dynrag.lm.batching import can_batch

    why = can_batch(lm)
    if requested is None:
        return DEFAULT_MAX_ROWS if why is None else 1
    if requested > 1 and why is not None:
        raise ConfigError(f"--batch {requested}: {why}; use --batch 1")
    return requested


def demo_index(console: Console) -> Path:
    from dynrag.retrieval.demo_index import demo_index_dir, ensure_demo_index

    ensure_demo_index(console)
    return demo_index_dir()


def run_server(app, settings: ServeSettings, console: Console) -> None:
    import uvicorn

    where = f"http://{settings.host}:{settings.port}"
    console.print(f"dynrag serve: the viewer at {where}/ , the OpenAI-compatible API at {where}/v1"
                  + (" (bearer key required)" if settings.api_key else ""))
    if settings.host not in ("127.0.0.1", "localhost", "::1") and not settings.api_key:
        console.print(f"[yellow]warning:[/yellow] bound to {settings.host} without --api-key: anyone who can "
                      "reach this address can use the model")
    uvicorn.run(app, host=settings.host, port=settings.port, log_level="info", timeout_graceful_shutdown=5)
