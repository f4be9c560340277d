"""make_plan: one plan per command, every check in it, once, before anything is written."""

import pickle
from pathlib import Path

import pytest
import yaml

from dynrag.config import RunConfig, load_run_config
from dynrag.corpus.passage import Passage
from dynrag.errors import ConfigError, DataError
from dynrag.eval.runner import eval_config
from dynrag.retrieval.bm25 import BM25Index
from dynrag.run.plan import make_plan, plan_from_saved, search_retriever
from tests.eval import fixtures as fx


@pytest.fixture(scope="module")
def index_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("plan") / "index"
    BM25Index.build([Passage(f"p{i}", f"t{i}", f"passage number {i}") for i in range(3)], out, progress=False)
    return out


def eval_keys(tmp_path, **kw):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    return {"dataset": "jsonl", "data": data, "method": "single", "out": tmp_path / "run", "corpus": "contexts",
            "workers": 1, **kw}


def test_every_command_takes_the_presets_retriever_when_none_is_named(index_dir, tmp_path):
    keys = dict(options={"preset": "balanced"}, index=index_dir)
    for command in ("ask", "serve"):
        assert make_plan(RunConfig(**keys), command=command).retriever.name == "hybrid"
    plan = make_plan(load_run_config(None, eval_keys(tmp_path, **keys)), command="eval")
    assert plan.retriever.name == "hybrid"
    assert make_plan(RunConfig(index=index_dir), command="ask").retriever.name == "bm25"


def test_a_plan_holds_parsed_and_validated_parts(index_dir):
    plan = make_plan(RunConfig(method="flare", options={"theta": "0.2"}, model="bundled?kv_reuse=off",
                               retriever_options={"backend": "numpy"}, index=index_dir), command="ask")
    assert plan.model.kind == "bundled" and plan.model.options.kv_reuse == "off"
    assert plan.method.name == "flare" and plan.method.options.theta == 0.2 and plan.method.traits.needs_retrieval
    assert plan.retriever.options == {"backend": "numpy"} and plan.retriever.index == index_dir
    assert plan.retriever.open_options() == {"backend": "numpy"}
    assert pickle.loads(pickle.dumps(plan)) == plan  # a worker process can be handed one


def test_a_method_without_retrieval_plans_no_retriever():
    plan = make_plan(RunConfig(method="direct"), command="ask")
    assert plan.retriever is None and not plan.method.traits.needs_retrieval
    with pytest.raises(ConfigError, match="--retriever/--retriever-option: method 'direct' does not retrieve"):
        make_plan(RunConfig(method="direct", retriever="dense"), command="ask")
    # a server opens its retriever whatever its default method: requests may name any
    assert make_plan(RunConfig(method="direct", index=Path(".")), command="serve").retriever.name == "bm25"


def test_ask_needs_an_index_for_a_method_that_retrieves():
    with pytest.raises(ConfigError, match=r"method 'single' retrieves: pass --corpus DIR"):
        make_plan(RunConfig(), command="ask")
    assert make_plan(RunConfig(retriever="opensearch"), command="ask").retriever.index is None  # a server's index


@pytest.mark.parametrize("change, error, message", [
    ({"corpus": None}, ConfigError, "pass --corpus contexts or --corpus INDEX_DIR"),
    ({"corpus": "nowhere"}, ConfigError, "--corpus nowhere: no such index directory"),
    ({"dataset": "squad"}, ConfigError, "unknown dataset 'squad'; choose one of: hotpotqa"),
    ({"data": Path("missing.jsonl")}, DataError, "no such file"),
    ({"scorer": "bleu"}, ConfigError, "unknown scorer 'bleu'"),
    ({"model": "gpt-9"}, ConfigError, "unknown model spec 'gpt-9'; valid forms: bundled"),
    ({"aliases": Path("a.json")}, ConfigError, "--aliases applies to --dataset 2wikimultihopqa only"),
    ({"workers": 2, "dask": "tcp://h:1"}, ConfigError, "--dask and --workers: pick one"),
    ({"method": "nope"}, ConfigError, "unknown method 'nope'"),
    ({"exemplars": "nope"}, ConfigError, "nope"),
])
def test_each_eval_check_fails_before_the_run_directory_exists(tmp_path, change, error, message):
    with pytest.raises(error, match=message):
        make_plan(load_run_config(None, eval_keys(tmp_path, **change)), command="eval")
    assert not (tmp_path / "run").exists()


def test_each_input_is_looked_up_once(tmp_path, index_dir, monkeypatch):
    import dynrag.datasets.formats as datasets
    import dynrag.run.checks as checks
    import dynrag.lm.loader as loader

    calls = []

    def counted(module, name):
        real = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, **k: calls.append(name) or real(*a, **k))

    counted(datasets, "dataset_spec")
    counted(checks, "check_corpus")
    counted(loader, "check_spec")
    make_plan(load_run_config(None, eval_keys(tmp_path, corpus=str(index_dir))), command="eval")
    assert sorted(calls) == ["check_corpus", "check_spec", "dataset_spec"]


def test_an_eval_plan_writes_config_json_and_a_worker_replans_from_it(tmp_path, index_dir):
    plan = make_plan(load_run_config(None, eval_keys(tmp_path, corpus=str(index_dir), options={"k": 2})),
                     command="eval")
    config = eval_config(plan)
    assert list(config) == ["format", "method", "options", "model", "dataset", "data", "data_sha256", "aliases",
                            "aliases_sha256", "corpus", "corpus_sha256", "retriever", "retriever_options", "limit",
                            "exemplars", "scorer"]
    assert config["corpus"] == str(index_dir.resolve()) and len(config["corpus_sha256"]) == 64
    assert config["model"].startswith("bundled:") and config["options"]["k"] == 2
    again = plan_from_saved(config)
    assert again.method == plan.method and again.retriever.name == plan.retriever.name
    assert again.retriever.options == plan.retriever.options


def test_eval_retrieval_plans_its_cutoffs_and_retriever(tmp_path):
    data = fx.write_jsonl(tmp_path / "qa.jsonl", fx.qa_rows(2))
    plan = make_plan(RunConfig(dataset="jsonl", data=data, out=tmp_path / "r", cutoffs="5,1"),
                     command="eval-retrieval")
    assert plan.retrieval_eval.cutoffs == (1, 5) and plan.retriever.name == "bm25"
    assert plan.retriever.corpus == "contexts" and plan.method is None
    with pytest.raises(ConfigError, match="searches its server's index; drop --corpus"):
        make_plan(RunConfig(dataset="jsonl", data=data, out=tmp_path / "r", retriever="opensearch", corpus="contexts"),
                  command="eval-retrieval")


def test_a_files_old_k_key_reads_as_cutoffs_with_a_warning(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump({"k": [1, 5]}))
    assert load_run_config(path, {}).cutoffs == [1, 5]
    err = capsys.readouterr().err
    assert "key 'k' is now 'cutoffs'" in err and err.count("\n") == 1


def test_a_search_outside_the_run_loop_gets_its_retriever_from_the_planner():
    """Synthesis and GRPO search in their own loops; the planner still names and types their retriever."""
    default = search_retriever(None, {})
    assert (default.name, default.options, default.index) == ("bm25", {}, None)
    hybrid = search_retriever("hybrid", {"alpha": "0.25"})
    assert hybrid.options == {"alpha": 0.25} and isinstance(hybrid.options["alpha"], float)
    with pytest.raises(ConfigError, match="--retriever-option"):
        search_retriever("hybrid", {"no_such_option": 1})
    with pytest.raises(ConfigError, match="opensearch"):  # an unknown name lists the choices
        search_retriever("bm26", {})
