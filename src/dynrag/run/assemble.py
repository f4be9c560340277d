"""Build what a ``RunPlan`` names: the model, the retriever over its index, the prompt builder and
the method (whose retrieval chain the method's options configure). Every command that answers
questions (``ask``, ``serve``, ``eval`` and its workers, ``demo``, ``reproduce``) builds here, so
the same plan always gives the same objects."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dynrag.lm.base import LanguageModel
from dynrag.lm.spec import ModelSpec
from dynrag.methods.base import Method
from dynrag.methods.prompting import PromptBuilder
from dynrag.retrieval.base import Retriever
from dynrag.run.plan import RetrieverPlan, RunPlan

Say = Callable[[str], None]  # where a warning goes (a console line)


@dataclass(frozen=True)
class Assembled:
    """The built parts of one plan; ``method`` is None when the caller builds methods itself (a
    server builds one per request, over the same model and retriever)."""

    lm: LanguageModel
    retriever: Retriever | None
    builder: PromptBuilder
    method: Method | None


def open_model(spec: ModelSpec | str, progress: bool = True) -> LanguageModel:
    import dynrag.lm

    return dynrag.lm.load_lm(spec, progress=progress)


def open_plan_retriever(
    choice: RetrieverPlan | None, index_dir: Path | None, *, work_dir: Path | None = None, progress: bool = True,
    say: Say | None = None,
) -> Retriever | None:
    """The planned retriever over ``index_dir`` (None for a search server), or None when the plan
    has none. A changed corpus behind a local index is reported through ``say``."""
    if choice is None:
        return None
    from dynrag.retrieval.factory import open_retriever

    if index_dir is not None and say is not None:
        from dynrag.retrieval.manifest import corpus_changes

        changed = corpus_changes(Path(index_dir))
        if changed:
            say(changed)
    work = Path(work_dir) if work_dir is not None else Path(index_dir or ".")
    return open_retriever(choice.name, Path(index_dir) if index_dir else None, choice.open_options(),
                          work_dir=work, progress=progress)


def make_method(plan: RunPlan, lm: LanguageModel, retriever: Retriever | None, builder: PromptBuilder | None = None) -> Method:
    """The plan's method over ``lm`` and ``retriever`` (ignored by a method that does not retrieve)."""
    from dynrag.methods.registry import build_method

    if plan.method is None:
        raise ValueError(f"a {plan.command} plan runs no method")
    method = plan.method
    return build_method(method.name, lm, retriever if method.traits.needs_retrieval else None, method.options,
                        builder or PromptBuilder.for_dataset(plan.exemplars))


def assemble(
    plan: RunPlan,
    *,
    index_dir: Path | None = None,
    work_dir: Path | None = None,
    lm: LanguageModel | None = None,
    with_method: bool = True,
    progress: bool = True,
    say: Say | None = None,
    load: Callable[[ModelSpec], LanguageModel] | None = None,
) -> Assembled:
    """Model, retriever, builder and (``with_method``) method for ``plan``. ``index_dir``: where the
    retriever's index is when the plan does not say (eval's pooled contexts, serve's demo index);
    ``lm``: a model already loaded; ``load(spec)``: how to load it (a command shows a status line).
    The retriever opens first: a bad index fails before the model's seconds of loading."""
    builder = PromptBuilder.for_dataset(plan.exemplars)
    index = index_dir if index_dir is not None else (plan.retriever.index if plan.retriever else None)
    retriever = open_plan_retriever(plan.retriever, index, work_dir=work_dir, progress=progress, say=say)
    if lm is None:
        lm = load(plan.model) if load is not None else open_model(plan.model, progress)
    method = make_method(plan, lm, retriever, builder) if with_method else None
    return Assembled(lm, retriever, builder, method)


def method_from_saved(config: dict[str, Any], retriever: Retriever | None, *, batch: int = 1,
                      progress: bool = True) -> Method:
    """An eval run's method rebuilt from its config.json (what a worker process is handed); with
    ``batch`` > 1 its model sits behind a batching engine with that many rows (lm/batching.py)."""
    from dynrag.run.plan import plan_from_saved

    plan = plan_from_saved(config)
    lm = open_model(plan.model, progress)
    if batch > 1:
        from dynrag.lm.batching import BatchingLM

        lm = BatchingLM(lm, max_rows=batch)
    return make_method(plan, lm, retriever)
