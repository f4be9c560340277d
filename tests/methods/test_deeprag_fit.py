"""A narrative prompt that outgrows the context window: exemplars go first, then the passage
blocks share what is left; a prompt that fits is not touched. Tokens here are words."""

from __future__ import annotations

from dynrag.corpus.passage import Passage
from dynrag.methods.deeprag.fit import fit_to_window
from dynrag.methods.deeprag.narrative import EXEMPLARS_SEG, PASSAGES_SEG, Narrative, NarrativeStep


class WordLM:
    def __init__(self, window):
        self.context_window = window

    def count_tokens(self, text):
        return len(text.split())


def long_prompt(words_per_passage=300, steps=2):
    steps = [NarrativeStep(f"Who is person {i}?", True, f"answer {i}",
                           tuple(Passage(f"p{i}{j}", f"Title {j}", " ".join(["word"] * words_per_passage))
                                 for j in range(3)))
             for i in range(steps)]
    return Narrative(shots=2).prompt("Where was the founder born?", steps)


def names(prompt):
    return [s.name for s in prompt.segments]


def test_a_prompt_that_fits_is_returned_as_it_is():
    prompt = long_prompt()
    assert fit_to_window(prompt, WordLM(100_000), 32) is prompt
    assert fit_to_window(prompt, object(), 32) is prompt  # a model stating no window


def test_exemplars_go_first_and_alone_when_that_is_enough():
    prompt = long_prompt(words_per_passage=20)
    size = WordLM(0).count_tokens(prompt.text)
    without = size - WordLM(0).count_tokens("".join(prompt.text[s.start:s.end] for s in prompt.segments
                                                    if s.name == EXEMPLARS_SEG))
    fitted = fit_to_window(prompt, WordLM(without + 32 + 16 + 5), 32)
    assert EXEMPLARS_SEG not in names(fitted) and fitted.truncated == [{"part": "exemplars"}]
    assert fitted.text.endswith(prompt.text[-200:])  # the question's own narrative is whole
    assert fitted.text.startswith("Answer the question")


def test_passage_blocks_share_what_is_left_and_the_prompt_fits():
    prompt = long_prompt(words_per_passage=300)  # 2 blocks of 3 x 300 words
    lm = WordLM(800)
    fitted = fit_to_window(prompt, lm, 32)
    assert lm.count_tokens(fitted.text) <= 800 - 32 - 16
    blocks = [fitted.text[s.start:s.end] for s in fitted.segments if s.name == PASSAGES_SEG]
    assert len(blocks) == 2 and all(b.endswith(" …\n") for b in blocks)
    sizes = [lm.count_tokens(b) for b in blocks]
    assert abs(sizes[0] - sizes[1]) <= 2  # equal shares
    assert [t["part"] for t in fitted.truncated] == ["exemplars", "passages", "passages"]
    assert "Who is person 1?" in fitted.text and fitted.text.endswith(prompt.text[prompt.text.rindex("Answer"):])


def test_writer_generates_from_the_fitted_prompt():
    from dynrag.methods.deeprag.writer import NarrativeWriter

    seen = []

    class Recording(WordLM):
        def generate(self, prompt, max_new_tokens, stop=None):
            seen.append((prompt, max_new_tokens))
            raise RuntimeError("stop here")

    writer = NarrativeWriter(Recording(800), Narrative(shots=2))
    narrative_steps = [NarrativeStep("Who?", True, "x", tuple(Passage(f"p{j}", "T", " ".join(["w"] * 400))
                                                              for j in range(3)))]
    try:
        writer.next_line("Where?", narrative_steps)
    except RuntimeError:
        pass
    prompt, n = seen[0]
    assert n == writer.max_subquery_tokens
    assert WordLM(0).count_tokens(prompt.text) <= 800 - n - 16 and prompt.truncated


def test_a_count_that_grows_when_parts_are_joined_is_corrected_until_the_prompt_fits():
    class Superadditive(WordLM):
        # 100 tokens more once the question and a passage are in one text: a cost that no part
        # counted alone shows (as tokens merging across the parts' boundaries do, on a small scale)
        def count_tokens(self, text):
            return len(text.split()) + (100 if "Question:" in text and "Title" in text else 0)

    lm = Superadditive(800)
    fitted = fit_to_window(long_prompt(words_per_passage=300), lm, 32)
    assert lm.count_tokens(fitted.text) <= 800 - 32 - 16
    assert [t["part"] for t in fitted.truncated] == ["exemplars", "passages", "passages"]  # recorded once
