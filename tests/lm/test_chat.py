"""Chat templates cut into frames, and prompts built inside them keep their named segments."""

import pytest

from dynrag.errors import ConfigError
from dynrag.lm.chat import ChatFrame, choose_style, frame_from, jinja_renderer
from dynrag.methods.prompting import ANSWER, DOCUMENTS, EXEMPLARS, QUESTION, PromptBuilder
from dynrag.retrieval.base import Hit

# ChatML, written here in a few lines (the shape Qwen's template renders for these messages).
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
# A template without a system role: it refuses one, as Gemma's does.
USER_ONLY = (
    "{{ bos_token }}{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('no system') }}"
    "{% endif %}<start_of_turn>user\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)


def test_chatml_frame_is_the_text_around_the_two_messages():
    frame = frame_from(jinja_renderer(CHATML))
    assert frame == ChatFrame("<|im_start|>system\n", "<|im_end|>\n<|im_start|>user\n",
                              "<|im_end|>\n<|im_start|>assistant\n")
    rendered = jinja_renderer(CHATML)([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}])
    assert frame.wrap("S", "U") == rendered


def test_a_template_without_a_system_role_puts_the_system_text_in_the_user_turn():
    frame = frame_from(jinja_renderer(USER_ONLY, bos_token="<bos>"))
    assert frame == ChatFrame("<bos><start_of_turn>user\n", "\n\n", "<end_of_turn>\n<start_of_turn>model\n")


def test_a_template_that_renders_no_message_gives_no_frame():
    assert frame_from(lambda messages: "nothing") is None


def test_style_auto_follows_the_model_and_chat_needs_a_template():
    frame = ChatFrame("a", "b", "c")
    assert choose_style("auto", "chat", frame) == "chat"
    assert choose_style("auto", "plain", frame) == "plain"
    assert choose_style("plain", "chat", frame) == "plain"
    assert choose_style("auto", "chat", None) == "plain"
    with pytest.raises(ConfigError, match="prompt=chat"):
        choose_style("chat", "plain", None)


class ChatModel:
    name = "chat-double"
    prompt_style = "chat"
    chat_frame = frame_from(jinja_renderer(CHATML))
    context_window = None


def test_chat_prompt_keeps_every_segment_and_opens_the_assistant_turn():
    builder = PromptBuilder.for_dataset("hotpotqa", n_exemplars=2)
    hits = [Hit("1", "Essenford", "Mira Tal was born in Essenford.", 1.0)]
    prompt = builder.build("Where was Mira Tal born?", hits, "Mira Tal was born in", lm=ChatModel())
    text = prompt.text
    assert text.startswith("<|im_start|>system\n" + builder.instruction_text(chat=True))
    assert text.endswith("<|im_end|>\n<|im_start|>assistant\nMira Tal was born in")
    spans = {s.name: text[s.start:s.end] for s in prompt.segments}
    assert spans[QUESTION] == "Where was Mira Tal born?"
    assert spans[ANSWER] == "Mira Tal was born in"
    assert "[1] Essenford: Mira Tal was born in Essenford." in spans[DOCUMENTS]
    exemplar_text = "".join(text[s.start:s.end] for s in prompt.segments if s.name == EXEMPLARS)
    assert builder.examples_text() in exemplar_text
    # the shared instruction and exemplars end where a model may keep its cache
    assert text[: prompt.reusable_prefix].endswith(builder.examples_text())


def test_plain_prompt_is_unchanged_by_a_model_without_chat_style():
    builder = PromptBuilder.for_dataset("hotpotqa", n_exemplars=2)
    plain = builder.build("Q?", None, "A", lm=None)
    assert plain.text.startswith(builder.instruction_text() + "\n\n")
    assert plain.text.endswith("Question: Q?\nAnswer: A")
