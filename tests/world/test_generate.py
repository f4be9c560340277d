"""The generator: byte-for-byte determinism, hand-checked phrasing, splits without leaks, records
the musique / world loaders read with their decomposition."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from dynrag.datasets.loaders import load_examples
from dynrag.world.articles import fact_sentence, write_articles
from dynrag.world.build import build_files
from dynrag.errors import DataError
from dynrag.world.entities import Fact, WorldOptions, generate
from dynrag.world.knowledge import Knowledge, needs_retrieval, verdict
from dynrag.world.make import make_world, read_manifest, sha256
from dynrag.world.bank import RELATIONS
from dynrag.world.questions import chain_group, make_questions, phrase_chain

from tests.world.fixtures import TINY


def records(files: dict[str, bytes], split: str) -> list[dict]:
    return [json.loads(line) for line in files[f"{split}.jsonl"].decode().splitlines()]


def test_same_seed_and_options_give_identical_bytes(tmp_path: Path):
    a = make_world(TINY, tmp_path / "a", Knowledge())
    b = make_world(TINY, tmp_path / "b", Knowledge())
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    assert "manifest.json" in names and "corpus.jsonl" in names
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes(), name
    assert a == b == read_manifest(tmp_path / "a")
    assert a["sha256"]["corpus.jsonl"] == sha256((tmp_path / "a" / "corpus.jsonl").read_bytes())
    other = make_world(TINY.model_copy(update={"seed": 8}), tmp_path / "c", Knowledge())
    assert other["sha256"]["corpus.jsonl"] != a["sha256"]["corpus.jsonl"]


def test_a_tiny_world_has_its_sizes_distractors_and_real_articles():
    world = generate(TINY)
    kinds = [(e.kind, e.distractor) for e in world.entities if not e.real]
    assert kinds.count(("person", False)) == 4 and kinds.count(("person", True)) == 2
    assert kinds.count(("town", False)) == 2 and kinds.count(("town", True)) == 1
    passages, support = write_articles(world)
    titles = {p.title for p in passages}
    assert all(e.name in titles for e in world.entities)  # every entity, real ones too, has an article
    assert set(support) == {f.id for f in world.facts}
    for fact in world.facts:  # each fact's supporting passage states its value
        assert fact.value in passages[support[fact.id]].text, fact.id


def test_distractors_are_never_asked_about():
    world = generate(TINY)
    distractors = {e.id for e in world.entities if e.distractor}
    for split in ("train", "dev", "test"):
        for r in records(build_files(TINY, Knowledge()), split):
            assert not set(r["world"]["chain"]) & distractors


def test_phrasing_of_a_three_hop_chain_and_its_decomposition():
    hops = (Fact("c:founder", "c", "founder", "Ada Brin", "p"), Fact("p:born_in", "p", "born_in", "Velmor", "t"),
            Fact("t:country", "t", "country", "Peru", "country:Peru"))
    question, subs = phrase_chain(hops, "Zorlak Mills")
    assert question == "In which country does the town where the founder of Zorlak Mills was born lie?"
    assert subs == ("Who founded Zorlak Mills?", "In which town was #1 born?", "In which country does #2 lie?")
    capital = Fact("real:capital:Peru", "country:Peru", "capital", "Lima", real=True)
    assert phrase_chain(hops[2:] + (capital,), "Velmor")[0] == "Name the capital city of the country where Velmor lies."


def test_chains_among_real_facts_nest_their_noun_phrases():
    book = Fact("real:author:Faust", "book:Faust", "author", "Johann Wolfgang von Goethe",
                "writer:Johann Wolfgang von Goethe", real=True)
    home = Fact("real:homeland:Johann Wolfgang von Goethe", "writer:Johann Wolfgang von Goethe", "homeland",
                "Germany", "country:Germany", real=True)
    capital = Fact("real:capital:Germany", "country:Germany", "capital", "Berlin", "city:Berlin", real=True)
    question, subs = phrase_chain((book, home, capital), "Faust")
    assert question == "Name the capital city of the country the writer of Faust came from."
    assert subs == ("Name the writer of Faust.", "Name the country #1 came from.", "Name the capital city of #2.")
    capital_of = Fact("real:capital_of:London", "city:London", "capital_of", "United Kingdom",
                      "country:United Kingdom", real=True)
    currency = Fact("real:currency:United Kingdom", "country:United Kingdom", "currency", "pound", real=True)
    assert phrase_chain((capital_of, currency), "London")[0] == "Name the currency of the country whose capital is London."


def test_the_default_world_has_invented_mixed_and_real_chains_of_two_and_three_hops():
    world = generate(WorldOptions(seed=3))
    groups = Counter((len(q.hops), chain_group(q.hops)) for q in make_questions(world, Knowledge()))
    for hops in (2, 3):
        for group in ("invented", "mixed", "real"):
            assert groups[(hops, group)] >= 20, (hops, group, groups)
    assert groups[(1, "mixed")] == 0 and groups[(1, "real")] > 0  # one hop is invented or real
    # a real chain links bank subjects: the capital's city, the book's writer
    linked = {f.relation for f in world.facts if f.real and f.object is not None}
    assert {"capital", "author", "capital_of", "homeland"} <= linked


def test_no_real_hop_after_a_nested_country_repeats_a_word():
    town_in = Fact("t:country", "t", "country", "Peru", "country:Peru")
    for relation in (r for r in RELATIONS.values() if r.subject_kind == "country"):
        last = Fact(f"real:{relation.name}:Peru", "country:Peru", relation.name, "x", real=True)
        words = phrase_chain((town_in, last), "Velmor")[0].rstrip(".?").split()
        assert all(a != b for a, b in zip(words, words[1:])), relation.name


def test_an_article_sentence_takes_a_or_an():
    fact = Fact("p:profession", "p", "profession", "engineer")
    assert " an engineer." in fact_sentence(fact, "Ada Brin", 1)


def test_no_test_question_or_entity_chain_is_in_train():
    files = build_files(TINY, Knowledge())
    train, test = records(files, "train"), records(files, "test")
    assert train and test
    assert not {r["question"] for r in train} & {r["question"] for r in test}
    assert not {tuple(r["world"]["chain"]) for r in train} & {tuple(r["world"]["chain"]) for r in test}
    assert {r["world"]["hops"] for r in train} >= {1, 2, 3}


def test_each_hop_points_at_a_supporting_paragraph_holding_its_answer():
    for r in records(build_files(TINY, Knowledge()), "train"):
        for hop in r["question_decomposition"]:
            paragraph = r["paragraphs"][hop["paragraph_support_idx"]]
            assert paragraph["is_supporting"] and hop["answer"] in paragraph["paragraph_text"]
            assert hop["known"] is (None if hop["real"] else False)  # unprobed without a model


def test_the_world_and_musique_loaders_fill_the_decomposition(tmp_path: Path):
    make_world(TINY, tmp_path, Knowledge())
    raw = [json.loads(line) for line in (tmp_path / "dev.jsonl").read_text().splitlines()]
    for name in ("world", "musique"):
        examples = list(load_examples(name, tmp_path / "dev.jsonl"))
        assert [e.id for e in examples] == [r["id"] for r in raw]
        for e, r in zip(examples, raw):
            assert e.decomposition == [h["question"] for h in r["question_decomposition"]]
            assert len(e.supporting) == len({h["paragraph_support_idx"] for h in r["question_decomposition"]})


def test_left_out_facts_are_never_chained_and_known_hops_are_marked():
    world = generate(TINY)
    real = [f.id for f in world.facts if f.real]
    status = {fid: ("known", "unknown", "left_out")[i % 3] for i, fid in enumerate(real)}
    knowledge = Knowledge("m", status)
    files = build_files(TINY, knowledge)
    seen = set()
    for split in ("train", "dev", "test"):
        for r in records(files, split):
            for hop in r["question_decomposition"]:
                seen.add(hop["fact"])
                if hop["real"]:
                    assert status[hop["fact"]] != "left_out"
                    assert hop["known"] is (status[hop["fact"]] == "known")
    assert any(status.get(f) == "known" for f in seen) and any(status.get(f) == "unknown" for f in seen)


def test_verdicts_and_needs_retrieval():
    assert verdict([True, True, True]) == "known"
    assert verdict([False, False, False]) == "unknown"
    assert verdict([True, False, True]) == "left_out"
    assert needs_retrieval([True, False]) is True
    assert needs_retrieval([True, True]) is False
    assert needs_retrieval([True, None]) is None


def test_the_split_shares_move_first_entities_between_splits_and_must_leave_test_a_share():
    def sizes(options):
        files = build_files(options, Knowledge())
        return {s: len(records(files, s)) for s in ("train", "dev", "test")}

    wide = TINY.model_copy(update={"people": 10, "companies": 4, "towns": 4})
    default, more_test = sizes(wide), sizes(wide.model_copy(update={"train_share": 0.3, "dev_share": 0.1}))
    assert sum(default.values()) == sum(more_test.values())  # the same questions, split differently
    assert more_test["test"] > default["test"] and more_test["train"] < default["train"]
    with pytest.raises(ValueError, match="must leave a share for test"):
        WorldOptions(train_share=0.8, dev_share=0.2)


def test_a_world_of_the_first_format_is_refused_with_how_to_remake_it(tmp_path: Path):
    make_world(TINY, tmp_path, Knowledge())
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    (tmp_path / "manifest.json").write_text(json.dumps({**manifest, "format_version": 1}))
    with pytest.raises(DataError, match="format version 2"):
        read_manifest(tmp_path)


def test_making_a_world_again_leaves_unchanged_files_untouched_and_rewrites_changed_ones(tmp_path: Path):
    make_world(TINY, tmp_path, Knowledge())
    corpus, test = tmp_path / "corpus.jsonl", tmp_path / "test.jsonl"
    stamp = corpus.stat().st_mtime_ns
    test.write_text("edited by hand\n")
    make_world(TINY, tmp_path, Knowledge())
    assert corpus.stat().st_mtime_ns == stamp  # an index built from it stays fresh
    assert test.read_bytes() == build_files(TINY, Knowledge())["test.jsonl"]
