"""The imitation loss mask, token by token, on the bundled model's own tokenizer."""

import pytest

from dynrag.corpus.passage import Passage
from dynrag.deeprag.examples import imitation_example
from dynrag.training.examples import IGNORE
from dynrag.deeprag.trajectory import Trajectory
from dynrag.methods.deeprag.narrative import INSTRUCTION, NarrativeStep


@pytest.fixture(scope="module")
def tokenizer():
    transformers = pytest.importorskip("transformers")
    from dynrag.errors import DynragError
    from dynrag.lm.bundled import ensure_converted, resolve_bundled

    try:
        path = ensure_converted(resolve_bundled("smollm2"), progress=False)
    except DynragError as exc:  # the weights package is not installed
        pytest.skip(str(exc))
    return transformers.AutoTokenizer.from_pretrained(path)


TRAJECTORY = Trajectory(
    id="q1",
    question="Where was the founder of Harbour Mill born?",
    steps=(
        NarrativeStep("Who founded Harbour Mill?", False, "Ada Byrne"),
        NarrativeStep("Where was Ada Byrne born?", True, "Tessaly",
                      (Passage("p1", "Ada Byrne", "Ada Byrne was born in Tessaly in 1850."),
                       Passage("p2", "Weather", "It rains in spring."))),
    ),
    final_answer="Tessaly",
)

LEARNED = (
    "Sub-question: Who founded Harbour Mill?\n"
    "Answer: Ada Byrne\n"
    "Sub-question: Where was Ada Byrne born?\n"
    "Search results:\n"
    "Answer: Tessaly\n"
    "So the answer is Tessaly.\n"
)
GIVEN = (
    INSTRUCTION + "\n\n"
    "Question: Where was the founder of Harbour Mill born?\n"
    "[1] Ada Byrne: Ada Byrne was born in Tessaly in 1850.\n"
    "[2] Weather: It rains in spring.\n"
    "Sub-question: Where was Ada Byrne born?\n"  # restated by the runner below the passages
)


def test_loss_falls_on_what_the_model_writes_and_never_on_prompt_or_passages(tokenizer):
    ex = imitation_example(tokenizer, TRAJECTORY)
    assert len(ex.input_ids) == len(ex.labels)
    pieces = [tokenizer.decode([t]) for t in ex.input_ids]
    learned, given = [], []
    for token, label, piece in zip(ex.input_ids, ex.labels, pieces):
        if label == IGNORE:
            given.append(piece)
        else:
            assert label == token  # labels are the tokens themselves; the model shifts them
            learned.append(piece)
    eos = tokenizer.eos_token
    assert pieces[-1] == eos and ex.labels[-1] == tokenizer.eos_token_id  # it learns to stop
    assert "".join(learned) == LEARNED + eos
    assert "".join(given) == GIVEN
    # token by token at the boundaries: the question's last token is given, "Sub" is learned;
    # every passage token is given and the "Answer" right after the passages is learned
    first = next(i for i, l in enumerate(ex.labels) if l != IGNORE)
    assert pieces[first] == "Sub" and pieces[first - 1] == "\n" and ex.labels[first - 1] == IGNORE
    text = "".join(pieces[:-1])
    start, end = text.index("[1] Ada Byrne"), text.index("Answer: Tessaly")
    pos = 0
    for i, piece in enumerate(pieces[:-1]):
        if start <= pos and pos + len(piece) <= end:
            assert ex.labels[i] == IGNORE, (i, piece)  # a passage token
        if pos == end:
            assert piece == "Answer" and ex.labels[i] != IGNORE
        pos += len(piece)
    assert ex.learned_tokens == len(learned)


def test_worked_examples_would_be_given_too(tokenizer):
    from dynrag.methods.deeprag.narrative import Narrative

    with_shots = imitation_example(tokenizer, TRAJECTORY, Narrative(shots=2))
    plain = imitation_example(tokenizer, TRAJECTORY)
    assert with_shots.learned_tokens == plain.learned_tokens
    assert len(with_shots) > len(plain)


def test_chat_trajectories_train_inside_the_models_template_on_the_same_learned_text(tokenizer):
    from dataclasses import replace

    from dynrag.deeprag.examples import training_narrative

    narrative = training_narrative(tokenizer, "chat")
    assert narrative.style == "chat" and narrative.shots == 0
    ex = imitation_example(tokenizer, replace(TRAJECTORY, narrative="chat"), narrative)
    pieces = [tokenizer.decode([t]) for t in ex.input_ids]
    learned = "".join(p for p, label in zip(pieces, ex.labels) if label != IGNORE)
    given = "".join(p for p, label in zip(pieces, ex.labels) if label == IGNORE)
    assert learned == LEARNED + tokenizer.eos_token  # what it learns to write is the plain narrative's
    system_turn = tokenizer.apply_chat_template(
        [{"role": "system", "content": INSTRUCTION}, {"role": "user", "content": "Question: " + TRAJECTORY.question}],
        tokenize=False, add_generation_prompt=True)
    assert given.startswith(system_turn)  # instruction, question, then the assistant's turn opens
    assert "[1] Ada Byrne: Ada Byrne was born in Tessaly in 1850.\n" in given


def test_a_chat_narrative_needs_a_template_and_one_style_per_training_set(tokenizer):
    from dataclasses import replace

    from dynrag.deeprag.examples import narrative_style, training_narrative
    from dynrag.errors import ConfigError, DataError

    assert training_narrative(None, "plain").frame is None
    no_template = type("NoTemplate", (), {"chat_template": None})()
    with pytest.raises(ConfigError, match="chat template"):
        training_narrative(no_template, "chat")
    assert narrative_style([TRAJECTORY, TRAJECTORY], "t.jsonl") == "plain"
    with pytest.raises(DataError, match="mixes chat and plain"):
        narrative_style([TRAJECTORY, replace(TRAJECTORY, narrative="chat")], "t.jsonl")
