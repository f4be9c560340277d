"""Jobs: what a command runs, as registry entries. A job declares its typed options (a pydantic model
composed from the shared option groups below, unknown keys are errors), the function that runs it,
and its traits: which directory it holds while it writes, and whether it answers in the one
resumable question loop over `io/rundir` (eval's) or in a loop of its own.

The groups are the options many jobs share, declared once with one meaning: the questions a job
reads, what it searches, the model, and where it writes. A job that reads questions and searches is
``class MyJobOptions(QuestionsGroup, SearchGroup, ModelGroup, OutputGroup)`` plus its own fields.

Jobs register from the modules that run them (they stand on higher floors than this one), as the
reproduce tables and the methods do; ``JOBS.open(name, options, ...)`` validates the options and
runs the job.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from dynrag.registry import Options, Registry


class JobOptions(Options):
    """Base of a job's options: unknown keys are errors, and a value may be any type a job carries
    (a held-out question set, a training recipe)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, arbitrary_types_allowed=True)


class QuestionsGroup(JobOptions):
    """The questions a job reads: a benchmark file in its own format, and which of its questions."""

    dataset: str = Field(description="benchmark format of data (a dataset registry name)")
    data: Path = Field(description="the questions' file")
    limit: int | None = Field(None, description="only the first N questions after skip")
    skip: int = Field(0, description="leave out the first N questions of the file")
    aliases: Path | None = Field(None, description="2WikiMultihopQA answer alias file")
    skip_bad: bool = Field(False, description="skip and count malformed records instead of stopping")


class SearchGroup(JobOptions):
    """What a job searches: the corpus and the retriever over it."""

    corpus: str = Field("contexts", description="'contexts' or an index directory")
    retriever: str | None = Field(None, description="retriever name (None: bm25)")
    retriever_options: dict[str, Any] = Field(default_factory=dict, description="the retriever's options")


class ModelGroup(JobOptions):
    model: str = Field("bundled", description="model spec")


class OutputGroup(JobOptions):
    out: Path = Field(description="the job's directory: created, or resumed when it exists")


@dataclass(frozen=True)
class JobTraits:
    """``lock``: the directory the job holds while it writes (``out``: its output directory, so a
    second job on it fails at once naming the holder; ``none``: it writes nothing to hold).
    ``loop``: ``eval`` when it answers questions through the eval runner's resumable loop, ``own``
    when it runs one of its own (a tree search, training steps). ``resumable``: a rerun after kill -9
    continues where the last one stopped."""

    lock: Literal["out", "none"] = "out"
    loop: Literal["eval", "own"] = "own"
    resumable: bool = True


JOBS: Registry[Any] = Registry("job")


def job_traits(name: str) -> JobTraits:
    return JOBS.get(name).traits


__all__ = ["JOBS", "JobOptions", "JobTraits", "ModelGroup", "OutputGroup", "QuestionsGroup", "SearchGroup", "job_traits"]
