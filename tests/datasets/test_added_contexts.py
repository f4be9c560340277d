"""contexts_to_add: a benchmark's distinct paragraphs that a corpus does not already hold."""

from dynrag.datasets.added_contexts import contexts_to_add, text_key
from tests.eval import fixtures as fx


def test_whitespace_alone_does_not_make_a_paragraph_new():
    assert text_key("Lyon is  a city.\n The Rhone") == text_key("Lyon is a city. The Rhone")
    assert text_key("Lyon is a city.") != text_key("Lyon is a town.")


def test_each_missing_paragraph_is_added_once_in_file_order(tmp_path):
    dev = fx.write_json(tmp_path / "dev.json", fx.HOTPOT)
    added = contexts_to_add([("hotpotqa", dev)], ["Paris is the capital of France."])
    assert [p.title for p in added] == ["Velmora bridge", "Lyon"]  # h2's Lyon is h1's; Paris is present
    assert contexts_to_add([("hotpotqa", dev)], [p.text for p in added] + ["Paris is the capital of France."]) == []
