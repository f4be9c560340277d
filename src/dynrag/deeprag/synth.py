"""`dynrag synth`: tree-search data synthesis over a benchmark file into a resumable directory.

    OUT/manifest.json       the resolved config (a different config in the same OUT is an error)
    OUT/trajectories.jsonl  one line per question with a correct narrative (trajectory.py)
    OUT/skipped.jsonl       one line per question without one (reason, tree counts)
    OUT/summary.json        counts and rates, recomputed from the two files at the end of a run
    OUT/contexts-index/     with --corpus contexts: the pooled paragraphs of the loaded questions

Each finished question is one fsynced line in one of the two files; a rerun after kill -9 reads
both (a torn last line is cut away), skips every id found there and searches the rest.

Which correct narrative a trajectory holds is `--select` (min: fewest retrievals, the paper's;
max: most; random: uniformly among the correct ones, drawn per question from `--seed` and the
question id). max and random search the whole tree. The choice is in the manifest, so resuming
with another is an error, not a mix. `keep` (set by the calibration's pair modes) also stores,
per step, the answer of the decision not taken ("siblings"), or every correct narrative found
("all-correct", which also searches the whole tree).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import Field
from rich.console import Console

from dynrag.corpus.passage import Passage
from dynrag.progress import progress_bar
from dynrag.deeprag.search import (
    History,
    Match,
    SearchLimits,
    check_selection,
    needs_whole_tree,
    select_path,
    tree_search,
)
from dynrag.deeprag.synth_models import Models, load_models, batched_models, writer_for
from dynrag.deeprag.synth_summary import write_summary
from dynrag.deeprag.teachers import ModelTeacher, NoDecomposition, Teacher, check_teacher, open_teacher, teacher_kind
from dynrag.deeprag.trajectory import SKIPPED, TRAJECTORIES, trajectory_record
from dynrag.errors import ConfigError, DataError
from dynrag.eval.execution import in_flight
from dynrag.datasets.loaders import QAExample, dataset_spec, load_aliases
from dynrag.io.rundir import config_differences
from dynrag.lm.loader import resolve_model
from dynrag.eval.steps import load_questions
from dynrag.io.files import atomic_write_json, read_json
from dynrag.io.jsonl import JsonlAppender, read_jsonl
from dynrag.io.lock import DirectoryLock
from dynrag.methods.deeprag.narrative import NARRATIVE_STYLES, NarrativeStep, load_exemplars
from dynrag.methods.deeprag.writer import NarrativeWriter
from dynrag.retrieval.base import Retriever
from dynrag.io.files import file_sha256
from dynrag.run.checks import check_aliases, check_data_file, corpus_identity
from dynrag.run.jobs import JOBS, JobTraits, ModelGroup, OutputGroup, QuestionsGroup, SearchGroup

SYNTH_FORMAT = "dynrag-synth/1"
SELECTION = ("skip", "limit")
MANIFEST = "manifest.json"
KEEP = ("path", "siblings", "all-correct")
# What a manifest written before these keys existed meant: the cheapest narrative alone.
OLD_DEFAULTS = {"select": "min", "seed": None, "keep": "path", "max_retrievals": None, "narrative": None, "hop_reader": None}


class SynthJobOptions(QuestionsGroup, SearchGroup, ModelGroup, OutputGroup):
    """The `synth` job's options: the shared groups (questions, search, model, output) and the tree
    search's own."""

    teacher: str | None = Field(None, description="target | dataset | a model spec")
    hop_reader: str | None = Field(None, description="a model spec that writes retrieved steps' answers (None: the teacher)")
    max_steps: int | None = Field(None, description="T, most sub-questions; None: the dataset's DeepRAG limit")
    max_retrievals: int | None = Field(None, description="R, most retrievals; None: the dataset's DeepRAG limit")
    max_nodes: int | None = Field(None, description="most nodes expanded; None: the whole tree (the paper has no cap)")
    k: int = Field(3, description="passages per retrieval")
    match: str = Field("em", description="em, contains or f1:T")
    shots: int | None = Field(None, description="worked examples in the target's prompt (None: as for the method)")
    narrative: str | None = Field(None, description="plain | chat: the target's prompt style (None: as for the method)")
    select: str = Field("min", description="min | max | random: which correct narrative a trajectory holds")
    seed: int = Field(0, description="the draw of select=random")
    keep: str = Field("path", description="path | siblings | all-correct: what else a trajectory stores")
    # Questions searched at once on threads, their generations batched by one model (not part of
    # the output's identity: a run may resume with another value).
    batch: int = Field(1, description="questions searched at once")


def resolve_config(req: SynthJobOptions) -> dict[str, Any]:
    """Every input that decides the trajectories, resolved; errors before anything is loaded."""
    spec = dataset_spec(req.dataset)
    teacher = check_teacher(req.teacher, spec.name)
    limits = SearchLimits(spec.deeprag.max_steps if req.max_steps is None else req.max_steps, req.max_nodes,
                          spec.deeprag.max_retrievals if req.max_retrievals is None else req.max_retrievals)
    match = Match.parse(req.match)
    check_selection(req.select)
    if req.keep not in KEEP:
        raise ConfigError(f"keep {req.keep!r}: choose one of {', '.join(KEEP)}")
    if req.limit is not None and req.limit < 1:
        raise ConfigError(f"--limit must be at least 1 (got {req.limit})")
    if req.skip < 0:
        raise ConfigError(f"--skip must be 0 or more (got {req.skip})")
    if req.k < 1:
        raise ConfigError(f"--k must be at least 1 (got {req.k})")
    if req.narrative is not None and req.narrative not in NARRATIVE_STYLES:
        raise ConfigError(f"--narrative {req.narrative!r}: choose one of {', '.join(NARRATIVE_STYLES)}")
    if req.shots is not None and not 0 <= req.shots <= len(load_exemplars()):
        raise ConfigError(f"--shots must be between 0 and {len(load_exemplars())} (got {req.shots})")
    # The checks `dynrag eval` plans with: aliases, retriever options, corpus identity, data file, model.
    check_aliases(req.aliases, spec.name)
    from dynrag.run.plan import search_retriever

    retriever_plan = search_retriever(req.retriever, req.retriever_options)
    _, corpus, corpus_sha = corpus_identity(req.corpus)
    data = check_data_file(Path(req.data), spec.name)
    model = resolve_model(req.model)
    return {
        "format": SYNTH_FORMAT,
        "dataset": spec.name,
        "data": str(data),
        "data_sha256": file_sha256(data),
        "aliases": str(Path(req.aliases).resolve()) if req.aliases else None,
        "skip": req.skip,
        "limit": req.limit,
        "model": model,
        "teacher": resolve_model(teacher) if teacher_kind(teacher) == "model" else teacher,
        "hop_reader": resolve_model(req.hop_reader) if req.hop_reader else None,
        "max_steps": limits.max_steps,
        "max_retrievals": limits.max_retrievals,
        "max_nodes": limits.max_nodes,
        "k": req.k,
        "match": str(match),
        "shots": req.shots,
        "narrative": req.narrative,
        "corpus": corpus,
        "corpus_sha256": corpus_sha,
        "retriever": retriever_plan.name,
        "retriever_options": retriever_plan.options,
        "select": req.select,
        "seed": req.seed if req.select == "random" else None,
        "keep": req.keep,
    }


def search_limits(config: dict[str, Any]) -> SearchLimits:
    """The limits a synthesis (its manifest) searched under."""
    return SearchLimits(config["max_steps"], config["max_nodes"], config.get("max_retrievals"))


def open_output(out: Path, config: dict[str, Any]) -> None:
    """Create OUT with its manifest, or check an existing OUT holds a run of the same config."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out}: exists and is not a directory; choose another --out")
    path = out / MANIFEST
    if not path.exists():
        if (out / TRAJECTORIES).exists():
            raise ConfigError(f"{out}: has {TRAJECTORIES} but no {MANIFEST}; choose another --out")
        atomic_write_json(path, config)
        return
    old = {**OLD_DEFAULTS, **read_json(path, "synth manifest")}
    # Which questions are searched (--skip, --limit) may change between runs: a rerun with a
    # larger --limit goes on with more questions, a smaller one summarises the ones asked for.
    diffs = config_differences({k: v for k, v in old.items() if k not in SELECTION},
                               {k: v for k, v in config.items() if k not in SELECTION})
    if any(old[k] != config[k] for k in ("select", "seed")):
        raise ConfigError(f"{out} holds trajectories chosen with --select {old['select']}"
                          + (f" --seed {old['seed']}" if old["seed"] is not None else "")
                          + f", not --select {config['select']}" + (f" --seed {config['seed']}" if config["seed"] is not None else "")
                          + "; use another --out for another selection, or the same options to resume")
    if diffs:
        raise ConfigError(f"{out} holds a synthesis with a different config ({'; '.join(diffs)}); use another --out, or the same options to resume")


@dataclass
class QuestionExpander:
    """The tree search's view of one question: models, teacher, retriever and the gold answers."""

    example: QAExample
    target: NarrativeWriter
    teacher: Teacher
    retriever: Retriever
    k: int
    match: Match
    yes_no: bool
    hop_reader: NarrativeWriter | None = None  # writes retrieved steps' answers in the teacher's stead
    generations: int = 0
    _final_hints: dict[History, str] = field(default_factory=dict)
    _answers: dict[tuple[History, str, bool], NarrativeStep] = field(default_factory=dict)

    def next_subquery(self, history: History) -> str | None:
        if isinstance(self.teacher, ModelTeacher):
            self.generations += 1
        subquery, final = self.teacher.next_subquery(self.example, history)
        if subquery is None and final:
            self._final_hints[history] = final
        return subquery

    def answer(self, history: History, subquery: str, retrieve: bool) -> NarrativeStep:
        """Written once per node (greedy decoding gives the same answer again; siblings reuse it)."""
        key = (history, subquery, retrieve)
        if key not in self._answers:
            self._answers[key] = self._write_answer(history, subquery, retrieve)
        return self._answers[key]

    def siblings(self, steps: History) -> list[NarrativeStep]:
        """For each step, the answer of the decision it did not take."""
        return [self.answer(steps[:i], s.subquery, not s.retrieve) for i, s in enumerate(steps)]

    def _write_answer(self, history: History, subquery: str, retrieve: bool) -> NarrativeStep:
        self.generations += 1
        if not retrieve:
            return NarrativeStep(subquery, False, self.target.answer(self.example.question, history, subquery, None)[0])
        hits = self.retriever.search(subquery, self.k)
        passages = tuple(Passage(h.id, h.title, h.text) for h in hits)
        if self.hop_reader is not None:
            answer = self.hop_reader.answer(self.example.question, history, subquery, passages)[0]
        else:
            answer = self.teacher.retrieved_answer(self.example, history, subquery, passages)
        return NarrativeStep(subquery, True, answer, passages)

    def final_answer(self, history: History) -> str:
        hint = self._final_hints.pop(history, None)
        if hint is not None and getattr(self.teacher, "writer", None) is self.target:
            return hint  # the target itself just wrote it, from the same prompt
        self.generations += 1
        return self.target.final(self.example.question, history)[0]

    def is_correct(self, answer: str) -> bool:
        return self.match.correct(answer, self.example.answers, self.yes_no)

    def saved_final(self, answer: str) -> str:
        """The final answer a trajectory holds: as written, or the gold one it matched."""
        if not self.match.keeps_gold:
            return answer
        return self.match.matched_gold(answer, self.example.answers, self.yes_no) or answer


def select_examples(req: SynthJobOptions, config: dict[str, Any], console: Console) -> list[QAExample]:
    aliases = load_aliases(Path(req.aliases)) if req.aliases else None
    wanted = None if req.limit is None else req.skip + req.limit
    examples, _ = load_questions(config["dataset"], req.data, console, aliases=aliases, skip_bad=req.skip_bad, limit=wanted)
    examples = examples[req.skip :]
    if not examples:
        raise DataError(str(req.data), f"no questions to search (after --skip {req.skip})")
    return examples


def run_synth(req: SynthJobOptions, *, console: Console | None = None, progress: bool = True,
              models: Models | None = None) -> dict[str, Any]:
    """Run (or resume) a synthesis; returns the summary written to summary.json."""
    console = console or Console(stderr=True)
    config = resolve_config(req)
    out = Path(req.out)
    examples = select_examples(req, config, console)
    with DirectoryLock(out, "synthesis directory"):
        open_output(out, config)
        done = read_jsonl(out / TRAJECTORIES, repair=True) + read_jsonl(out / SKIPPED, repair=True)
        done_ids = {r["id"] for r in done}
        by_id = {ex.id for ex in examples}
        todo = [ex for ex in examples if ex.id not in done_ids]
        if done:
            console.print(f"resuming {out}: {len(done_ids & by_id)} of {len(examples)} questions already searched")
        if todo:
            models = models or load_models(config, examples, out, console, progress)
            if req.batch > 1:
                models = batched_models(models, req.batch)
            styles = {r.get("narrative", "plain") for r in done if "steps" in r}
            _search_all(config, todo, len(examples), len(done_ids), models, out, console, progress, req.batch, styles)
        return write_summary(out, config, examples)


def _search_all(config, todo, total, already, models: Models, out: Path, console: Console, progress: bool,
                batch: int = 1, styles_written: set[str] = frozenset()) -> None:
    target = writer_for(models.target, config["shots"], config["narrative"])
    if styles_written - {target.narrative.style}:
        raise ConfigError(f"{out} holds {', '.join(sorted(styles_written))} narratives, and {config['model']} is prompted "
                          f"in the {target.narrative.style} style; resume with the same --narrative or use another --out")
    teacher_writer = writer_for(models.teacher, None) if models.teacher is not None else target
    teacher = open_teacher(config["teacher"], target, teacher_writer)
    hop_reader = None
    if models.hop_reader is not None:
        hop_reader = target if models.hop_reader is models.target else writer_for(models.hop_reader, None)
    limits = search_limits(config)
    match, yes_no = Match.parse(config["match"]), dataset_spec(config["dataset"]).yes_no
    if not limits.exhaustive:
        console.print(f"--max-nodes {limits.max_nodes} is below the whole tree for T = {limits.max_steps}, "
                      f"R = {limits.max_retrievals} ({limits.whole_tree} nodes): questions whose cheapest correct narrative "
                      "retrieves often may be cut (node_limit)")
    found = cut = 0
    whole_tree = needs_whole_tree(config["select"]) or config["keep"] == "all-correct"
    with JsonlAppender(out / TRAJECTORIES) as good, JsonlAppender(out / SKIPPED) as bad, \
            progress_bar("synth", total, already, console, progress, unit="questions") as bar:
        def search(ex: QAExample) -> tuple[bool, dict[str, Any], str]:
            started = time.perf_counter()
            expander = QuestionExpander(ex, target, teacher, models.retriever, config["k"], match, yes_no, hop_reader)
            try:
                result = tree_search(expander, limits, collect_all=whole_tree)
            except NoDecomposition:
                return False, {"id": ex.id, "question": ex.question, "reason": "no_decomposition", "tree": None,
                               "generations": 0, "seconds": 0.0}, "no_decomposition"
            if result.status == "found":
                return True, _found_record(config, ex, expander, result, started, whole_tree), "found"
            return False, {"id": ex.id, "question": ex.question, "reason": result.status, "tree": result.tree_counts(),
                           "cut_at": result.cut_at, "generations": expander.generations,
                           "seconds": round(time.perf_counter() - started, 3),
                           "answers": list(ex.answers), "wrong_answers": distinct(result.wrong)}, result.status

        # Only this loop writes: each question's line is appended (fsynced) as it finishes.
        for n, (is_found, record, status) in enumerate(in_flight(search, todo, batch), 1):
            (good if is_found else bad).append(record)
            found += is_found
            cut += status == "node_limit"
            bar.advance(_stats(found, cut, n))


def distinct(texts: list[str]) -> list[str]:
    """The texts without repeats, in first-seen order."""
    return list(dict.fromkeys(texts))


def _found_record(config, ex: QAExample, expander: QuestionExpander, result, started: float, whole_tree: bool) -> dict[str, Any]:
    """The trajectory line: the selected narrative, and what `keep` asks to store beside it
    (generations and seconds count the sibling answers written for it)."""
    rng = random.Random(f"{config['seed']}:{ex.id}") if config["select"] == "random" else None
    steps, final = result.correct[select_path(result.correct, config["select"], rng)]
    others = expander.siblings(steps) if config["keep"] == "siblings" else None
    saved = expander.saved_final(final)
    record = trajectory_record(ex.id, config["dataset"], ex.question, steps, saved, result.tree_counts(),
                               expander.generations, time.perf_counter() - started)
    if saved != final:
        record["written_final_answer"] = final
    for step, other in zip(record["steps"], others or ()):
        step["other"] = other.to_dict()
    if config["keep"] == "all-correct":
        record["correct"] = [{"steps": [s.to_dict() for s in path], "final_answer": expander.saved_final(answer)}
                             for path, answer in result.correct]
    record["select"] = config["select"]
    record["narrative"] = expander.target.narrative.style
    if whole_tree:
        record["correct_paths"], record["complete"] = len(result.correct), result.complete
    return record


def _stats(found: int, cut: int, n: int) -> str:
    return f"found {found}/{n}" + (f", cut by --max-nodes {cut}" if cut else "")


JOBS.add("synth", run_synth, SynthJobOptions, summary="binary tree search for each question's cheapest correct narrative",
         traits=JobTraits(lock="out", loop="own"))
