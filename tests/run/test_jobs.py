"""Jobs are registry entries: typed options composed from the shared groups, and traits."""

from pathlib import Path

import pytest
from pydantic import ValidationError

from dynrag.deeprag.calibration import CalibrationJobOptions
from dynrag.deeprag.grpo import GrpoJobOptions
from dynrag.deeprag.imitation import ImitationJobOptions
from dynrag.deeprag.synth import SynthJobOptions
from dynrag.errors import ConfigError
from dynrag.run.jobs import JOBS, JobTraits, JobOptions, OutputGroup, QuestionsGroup, SearchGroup, job_traits
from dynrag.training.finetune import FineTune
from dynrag.training.reader_train import FineTuneReaderJobOptions
from dynrag.world.reader import WorldReaderJobOptions
from dynrag.world.teach import TeachJobOptions

QUESTIONS = {"dataset": "hotpotqa", "data": "q.json", "out": "o"}
# The fewest values each job's options accept: what a test needs to reach its unknown-key check.
MINIMAL = {
    "synth": QUESTIONS,
    "train grpo": {**QUESTIONS, "model": "hf:stage-one"},
    "train imitation": {"data": ["synth"], "out": "o"},
    "train calibration": {"synth": SynthJobOptions(**QUESTIONS), "out": "o"},
    "train reader": {**QUESTIONS, "data": ["q.json"]},
    "world teach": {"world": "world", "out": "o"},
    "world reader": {"out": "o"},
}


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


def test_every_job_is_registered_with_options_from_the_groups_and_its_own_loop_over_its_locked_out():
    assert set(MINIMAL) <= set(JOBS.names())
    for entry in map(JOBS.get, MINIMAL):
        assert issubclass(entry.options, JobOptions) and issubclass(entry.options, OutputGroup), entry.name
        assert (entry.traits.lock, entry.traits.loop) == ("out", "own"), entry.name
    assert JOBS.get("train reader").options is FineTuneReaderJobOptions
    assert JOBS.get("world teach").options is TeachJobOptions


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_each_job_refuses_an_unknown_option(name):
    options = JOBS.get(name).options
    options(**MINIMAL[name])
    with pytest.raises(ValidationError, match="extra"):
        options(**MINIMAL[name], no_such_option=1)


def test_the_jobs_keep_the_defaults_their_records_had():
    reader = WorldReaderJobOptions(out="o")
    assert reader.seeds == (101, 102) and isinstance(reader.seeds, tuple) and reader.model == "bundled"
    assert WorldReaderJobOptions(out="o", seeds=[3]).seeds == [3]
    assert FineTuneReaderJobOptions(**MINIMAL["train reader"]).options.method == FineTune.LORA
    imitation = ImitationJobOptions(**MINIMAL["train imitation"])
    assert imitation.model == "bundled" and imitation.data == [Path("synth")]
    calibration = CalibrationJobOptions(**MINIMAL["train calibration"])
    assert (calibration.beta, calibration.heldout, calibration.pairs) == (0.4, 0.1, "optimal")
    teach = TeachJobOptions(**MINIMAL["world teach"])
    assert (teach.entities, teach.facts, teach.max_new_tokens, teach.options.epochs) == (None, None, 8, 12)


def test_eval_eval_retrieval_and_each_kind_of_reproduce_table_are_jobs_too():
    from dynrag.config import RunConfig
    from dynrag.eval import retrieval_run, runner  # noqa: F401  (each registers its job)
    from dynrag.reproduce.kinds import KINDS, ReproduceRequest

    assert JOBS.get("eval").options is RunConfig and job_traits("eval") == JobTraits(lock="out", loop="eval")
    assert JOBS.get("eval-retrieval").options is RunConfig and job_traits("eval-retrieval").loop == "own"
    for kind in KINDS:
        entry = JOBS.get(f"reproduce {kind.name}")
        assert entry.options is ReproduceRequest and entry.traits.lock == "none"  # each row's run holds its own
    assert job_traits("reproduce qa").loop == "eval" and job_traits("reproduce grpo-figure").loop == "own"


def test_tune_and_the_world_commands_are_jobs_and_say_what_they_lock():
    from dynrag.tune.run import TuneJobOptions
    from dynrag.world.check import WorldCheckJobOptions
    from dynrag.world.probe import WorldMakeJobOptions

    assert JOBS.get("tune").options is TuneJobOptions and job_traits("tune") == JobTraits(lock="none", loop="eval")
    assert JOBS.get("world make").options is WorldMakeJobOptions and job_traits("world make").lock == "none"
    assert JOBS.get("world check").options is WorldCheckJobOptions and not job_traits("world check").resumable
    with pytest.raises(ValidationError, match="extra"):
        WorldCheckJobOptions(world="w", chain=True)
    assert WorldMakeJobOptions(out="w").options.seed == 1 and WorldCheckJobOptions(world="w").model == "bundled"
