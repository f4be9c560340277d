"""Jobs are registry entries: typed options composed from the shared groups, and traits."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from dynrag.deeprag.grpo import GrpoJobOptions
from dynrag.deeprag.synth import SynthJobOptions
from dynrag.errors import ConfigError
from dynrag.run.jobs import JOBS, OutputGroup, QuestionsGroup, SearchGroup, job_traits


def test_jobs_that_read_questions_and_search_share_one_declaration_of_those_options():
    for options in (SynthJobOptions, GrpoJobOptions):
        assert issubclass(options, QuestionsGroup) and issubclass(options, SearchGroup) and issubclass(options, OutputGroup)
        for name in ("dataset", "data", "limit", "skip", "aliases", "skip_bad", "corpus", "retriever", "retriever_options"):
            shared = QuestionsGroup.model_fields.get(name) or SearchGroup.model_fields[name]
            ours = options.model_fields[name]
            assert (ours.description, ours.default, ours.annotation) == (shared.description, shared.default, shared.annotation)


def test_unknown_options_are_errors_and_values_are_typed():
    with pytest.raises(ValidationError, match="extra"):
        SynthJobOptions(dataset="hotpotqa", data="q.json", out="o", max_step=3)
    options = SynthJobOptions(dataset="hotpotqa", data="q.json", out="o", limit="5")
    assert options.limit == 5 and options.data == Path("q.json") and options.retriever_options == {}
    with pytest.raises(ValidationError, match="model"):
        GrpoJobOptions(dataset="hotpotqa", data="q.json", out="o")  # the stage-I model has no default


def test_a_job_is_found_by_name_with_its_traits_and_runs_through_the_registry():
    assert {"synth", "train grpo"} <= set(JOBS.names())
    assert job_traits("synth").lock == "out" and job_traits("train grpo").loop == "own"
    with pytest.raises(ConfigError, match="unknown job 'synthesis'; choose one of: .*synth"):
        JOBS.get("synthesis")
    with pytest.raises(ConfigError, match="--limit must be at least 1"):  # the job's own checks run
        JOBS.open("synth", {"dataset": "hotpotqa", "data": "missing.json", "out": "o", "limit": 0}, progress=False)
