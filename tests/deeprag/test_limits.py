"""One table of DeepRAG limits per dataset: synthesis (stage I data, and the search of stage II),
GRPO's rollouts, eval's deeprag runs and `reproduce`'s all end up with the dataset's."""

import pytest

from dynrag.config import load_run_config
from dynrag.datasets.formats.registry import DATASETS, DeepRAGLimits, deeprag_limits
from dynrag.deeprag.grpo_options import GrpoOptions, grpo_options, settle_limits
from dynrag.deeprag.synth import SynthJobOptions, resolve_config
from dynrag.reproduce.catalog import TABLES
from dynrag.run.plan import make_plan
from tests.deeprag.conftest import write_wiki

# HotpotQA and 2Wiki records share a shape: one file serves both readers.
DATASETS_HERE = ("hotpotqa", "2wikimultihopqa")


def test_the_table_holds_the_authors_depths_and_room_for_five_hops():
    assert deeprag_limits("hotpotqa") == DeepRAGLimits(max_retrievals=6, max_steps=6)
    for entry in DATASETS:
        limits = deeprag_limits(entry.name)
        if entry.name != "hotpotqa":
            assert limits == DeepRAGLimits(max_retrievals=10, max_steps=10), entry.name
        assert limits.max_steps >= 5  # no cap of four sub-questions cuts a 3-5 hop question short


def used_by_synthesis(dataset, data, tmp_path):
    config = resolve_config(SynthJobOptions(dataset=dataset, data=data, out=tmp_path / f"synth-{dataset}", teacher="target"))
    return DeepRAGLimits(config["max_retrievals"], config["max_steps"])


def used_by_grpo(dataset, recipe):
    from dynrag.datasets.formats.registry import dataset_spec

    options = settle_limits(grpo_options(recipe, {}), dataset_spec(dataset))
    return DeepRAGLimits(options.max_retrievals, options.max_subqueries)


def used_by_eval(dataset, data, tmp_path, options=None):
    keys = {"dataset": dataset, "data": data, "method": "deeprag", "out": tmp_path / f"run-{dataset}",
            "corpus": "contexts", "workers": 1, "options": options or {}}
    method = make_plan(load_run_config(None, keys), command="eval").method.options
    return DeepRAGLimits(method.max_retrievals, method.max_steps)


def used_by_reproduce(dataset, data, tmp_path):
    """The options `reproduce deeprag-table1` gives its deeprag row, planned as its runs are."""
    table = TABLES.open("deeprag-table1", {})
    spec = next(s for s in table.runs if s.dataset == dataset and s.method == "deeprag")
    return used_by_eval(dataset, data, tmp_path, dict(spec.options))


@pytest.mark.parametrize("dataset", DATASETS_HERE)
def test_synthesis_grpo_eval_and_reproduce_use_the_same_limits(dataset, tmp_path):
    data = write_wiki(tmp_path / "train.json", 2)
    table = deeprag_limits(dataset)
    used = {
        "synthesis (stage I data, stage II search)": used_by_synthesis(dataset, data, tmp_path),
        "grpo, authors' recipe": used_by_grpo(dataset, "authors"),
        "grpo, cpu-small recipe": used_by_grpo(dataset, "cpu-small"),
        "eval": used_by_eval(dataset, data, tmp_path),
        "reproduce": used_by_reproduce(dataset, data, tmp_path),
    }
    assert {name: limits for name, limits in used.items() if limits != table} == {}, table


def test_a_limit_given_by_its_flag_wins_over_the_table(tmp_path):
    data = write_wiki(tmp_path / "train.json", 2)
    assert used_by_eval("hotpotqa", data, tmp_path, {"max_steps": 3}) == DeepRAGLimits(6, 3)
    config = resolve_config(SynthJobOptions(dataset="hotpotqa", data=data, out=tmp_path / "s", teacher="target",
                                         max_steps=4, max_retrievals=2))
    assert (config["max_steps"], config["max_retrievals"]) == (4, 2)
    from dynrag.datasets.formats.registry import dataset_spec

    given = settle_limits(GrpoOptions(max_subqueries=4), dataset_spec("hotpotqa"))
    assert (given.max_subqueries, given.max_retrievals) == (4, 6)
