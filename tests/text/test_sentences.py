import pytest

from dynrag.text.sentences import split_sentences


@pytest.mark.parametrize(
    "text, expected",
    [
        ("Dr. Smith went home. He slept.", ["Dr. Smith went home.", "He slept."]),
        (
            "J. R. R. Tolkien wrote books. They sold well!",
            ["J. R. R. Tolkien wrote books.", "They sold well!"],
        ),
        ("It costs 3.5 dollars. Cheap? Yes.", ["It costs 3.5 dollars.", "Cheap?", "Yes."]),
        ("Use tools, e.g. Hammers and saws. Fine.", ["Use tools, e.g. Hammers and saws.", "Fine."]),
        ("Use tools, i.e. hammers. Fine.", ["Use tools, i.e. hammers.", "Fine."]),
        ('He said "Stop." Then he left.', ['He said "Stop."', "Then he left."]),
        ("See No. 5 and Fig. 3 here. Next one.", ["See No. 5 and Fig. 3 here.", "Next one."]),
        ("I said no. Then I left.", ["I said no.", "Then I left."]),
        ("The U.S. Army won. Later it lost.", ["The U.S. Army won.", "Later it lost."]),
        ("lower case after a dot. stays joined", ["lower case after a dot. stays joined"]),
        ("First paragraph\n\nsecond one", ["First paragraph", "second one"]),
        ("Wait... What happened?", ["Wait...", "What happened?"]),
        ("No final punctuation", ["No final punctuation"]),
        ("", []),
        ("  \n ", []),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


def test_sentences_keep_all_words():
    text = "Mr. Jones met Prof. Lee on Jan. 3. They talked. Then, at 4.30 p.m. They left!"
    assert " ".join(split_sentences(text)).split() == text.split()
