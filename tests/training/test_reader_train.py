"""`dynrag train reader`: examples per context mode, a two-step LoRA run on a tiny model, resume,
and a bad --context."""

import json

import pytest
import torch

from dynrag.training.examples import IGNORE
from dynrag.training.reader_examples import (
    RandomPassages,
    as_hits,
    build_reader_examples,
    context_passages,
    gold_passages,
    reader_example,
)
from dynrag.training.reader_train import FineTuneReaderJobOptions, run_reader
from dynrag.training.trainer import TrainOptions
from dynrag.errors import ConfigError
from dynrag.datasets.loaders import load_examples
from dynrag.methods.prompting import PromptBuilder
from tests.cli_inprocess import run_in_process
from tests.deeprag.conftest import word_tokenizer, write_wiki

torch.set_num_threads(1)


@pytest.fixture
def questions(tmp_path):
    return list(load_examples("2wikimultihopqa", write_wiki(tmp_path / "wiki.json", 6)))


def test_each_context_mode_puts_the_right_passages_in_order(questions):
    q0 = questions[0]
    gold = gold_passages(q0)
    assert [p.title for p in gold] == ["the Lantern Guild", "Ada Byrne"]  # supporting paragraphs, file order
    draw = RandomPassages(questions, seed=0)
    rand = draw.for_question(q0)
    others = {p.id for ex in questions[1:] for p in ex.contexts}
    assert rand.id in others and rand.id not in {p.id for p in q0.contexts}  # another question's paragraph
    assert draw.for_question(q0) == rand  # fixed by the seed and the id
    assert {RandomPassages(questions, seed=s).for_question(q0).id for s in range(8)} != {rand.id}  # the seed matters
    assert context_passages("g", gold, rand) == gold
    assert context_passages("r", gold, rand) == [rand]
    assert context_passages("gr", gold, rand) == [gold[0], gold[1], rand]
    assert context_passages("gg", gold, rand) == [gold[0], gold[1], gold[0], gold[1]]
    assert context_passages("none", gold, rand) == []


def test_a_shuffled_order_is_seeded_per_question_and_moves_the_gold_passages(questions):
    draw = RandomPassages(questions, seed=0)
    orders = []
    for ex in questions:
        gold, rand = gold_passages(ex), draw.for_question(ex)
        shuffled = context_passages("gr", gold, rand, "shuffled", f"0:{ex.id}")
        assert sorted(p.id for p in shuffled) == sorted(p.id for p in [*gold, rand])  # the same passages
        assert shuffled == context_passages("gr", gold, rand, "shuffled", f"0:{ex.id}")  # and the same order again
        orders.append(shuffled.index(rand))
    assert len(set(orders)) > 1 and any(i < 2 for i in orders)  # the random passage is not always last
    with pytest.raises(ConfigError, match="--order 'last': choose one of gold_first, shuffled"):
        context_passages("gr", gold, rand, "last")


def test_only_the_answer_line_and_eos_are_labelled_in_the_single_prompt(questions):
    builder = PromptBuilder.for_dataset("default")
    tok = word_tokenizer([builder.exemplar_text(), "Documents:", *(f"{p.title}: {p.text} {ex.question}" for ex in questions
                                                                  for p in ex.contexts)])
    q0 = questions[0]
    gold = gold_passages(q0)
    ex = reader_example(tok, builder, q0, gold)
    text = builder.build(q0.question, as_hits(gold)).text + " So the answer is Corrow."  # single's prompt
    assert list(ex.input_ids[:-1]) == tok(text).input_ids
    assert "[1] the Lantern Guild: the Lantern Guild was founded by Ada Byrne in 1850.\n" in text
    assert "[2] Ada Byrne: Ada Byrne was born in Corrow.\n" in text
    assert text.index("[2]") < text.index("Question: Where was the founder of the Lantern Guild born?\nAnswer:")
    learned = [t for t in ex.labels if t != IGNORE]
    assert " ".join(tok.decode(learned[:-1]).split()) == "So the answer is Corrow."
    assert learned[-1] == tok.eos_token_id
    first = next(i for i, t in enumerate(ex.labels) if t != IGNORE)
    assert all(t == IGNORE for t in ex.labels[:first]) and all(t != IGNORE for t in ex.labels[first:])
    assert list(ex.labels[first:]) == list(ex.input_ids[first:])
    built = build_reader_examples(tok, builder, questions, "gg", max_tokens=10_000)
    assert len(built.examples) == 6 and built.no_gold == built.too_long == 0
    assert build_reader_examples(tok, builder, questions, "g", max_tokens=20).too_long == 6
    with pytest.raises(ConfigError, match="--context 'x': choose one of g, r, gr, gg"):
        build_reader_examples(tok, builder, questions, "x", max_tokens=10_000)


def test_two_lora_steps_write_a_merged_hf_directory_that_single_can_use(tmp_path, tiny_model_dir):
    from dynrag.lm import load_lm
    from dynrag.methods.registry import build_method
    from tests.fakes import FakeRetriever

    data = write_wiki(tmp_path / "wiki.json", 6)
    out = tmp_path / "m_gr"
    options = TrainOptions(method="lora", lr=1e-2, max_steps=2, batch_size=2, threads=1, save_every=1)
    req = FineTuneReaderJobOptions(dataset="2wikimultihopqa", data=[data], out=out, context="gr", model=f"hf:{tiny_model_dir}",
                                   options=options)
    report = run_reader(req, progress=False)
    assert report["stage"] == "reader" and report["context"] == "gr" and report["steps"] == 2
    assert report["method"] == "lora" and report["examples"] == 6
    assert report["prompt"] == {"builder": "single", "exemplars": "default", "shots": 6}
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2] and all(0 < r["learned_tokens"] < r["tokens"] for r in log)
    assert (out / "model.safetensors").exists() and not (out / "checkpoint").exists()
    lm = load_lm(f"hf:{out}", progress=False)
    answer = build_method("single", lm, FakeRetriever(), {"max_new_tokens": 4}).answer("Where was Ada Byrne born?")
    assert isinstance(answer.text, str)


def test_a_run_stopped_after_its_steps_resumes_without_duplicate_log_lines(tmp_path, tiny_model_dir, monkeypatch):
    import dynrag.training.reader_train as reader_train

    data = write_wiki(tmp_path / "wiki.json", 6)
    out = tmp_path / "m_g"
    options = TrainOptions(method="lora", lr=1e-2, max_steps=3, batch_size=2, threads=1, save_every=1)
    req = FineTuneReaderJobOptions(dataset="2wikimultihopqa", data=[data], out=out, context="g", model=f"hf:{tiny_model_dir}",
                                   options=options)

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(reader_train, "finish", crash)
        with pytest.raises(KeyboardInterrupt):
            run_reader(req, progress=False)
    assert json.loads((out / "checkpoint" / "state.json").read_text())["step"] == 2  # the last step is not saved
    run_reader(req, progress=False)
    steps = [json.loads(line)["step"] for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3]


def test_bad_context_and_unknown_option_are_one_line_errors(tmp_path):
    data = write_wiki(tmp_path / "wiki.json", 2)
    base = ["train", "reader", "--dataset", "2wikimultihopqa", "--data", str(data), "--out", str(tmp_path / "o")]
    bad = run_in_process(*base, "--context", "golden")
    assert bad.returncode != 0 and "--context 'golden': choose one of g, r, gr, gg" in bad.stderr
    assert "Traceback" not in bad.stderr
    order = run_in_process(*base, "--order", "random")
    assert order.returncode != 0 and "--order 'random': choose one of gold_first, shuffled" in order.stderr
    unknown = run_in_process(*base, "--option", "rank=4")
    assert unknown.returncode != 0 and "rank" in unknown.stderr and "Traceback" not in unknown.stderr
