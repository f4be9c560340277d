"""A model's chat template cut into the fixed text around a system and a user message.

Instruct models read far better when the prompt comes inside their own chat template than as plain
few-shot text (benchmarks/LOG.md, "A bundled reader that can read"). The prompt builder keeps
its named segments (exemplars, documents, question, answer), which attention-reading methods trace
back to, so the template is not applied to a finished string: it is rendered once around two marker
messages, and the text before, between and after the markers becomes a ``ChatFrame`` that the
builder puts around its own parts. The assistant's turn is left open, so the answer written so far
continues in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Literal

# Strings no template writes and no tokenizer merges with their neighbours.
SYSTEM_MARK = "\u0002system-message\u0003"
USER_MARK = "\u0002user-message\u0003"

PromptStyle = Literal["plain", "chat"]
Messages = list[dict[str, str]]


@dataclass(frozen=True)
class ChatFrame:
    """The template's fixed text: ``head`` + system text + ``between`` + user text + ``tail``, after
    which the assistant writes. A template without a system role puts the system text at the start
    of the user message (``head`` then opens the user turn and ``between`` is a blank line)."""

    head: str
    between: str
    tail: str

    def wrap(self, system: str, user: str, answer: str = "") -> str:
        return f"{self.head}{system}{self.between}{user}{self.tail}{answer}"


def frame_from(render: Callable[[Messages], str]) -> ChatFrame | None:
    """The frame of a template, given ``render(messages)`` that applies it with the generation
    prompt added; None when the template cannot hold even one user message."""
    try:
        text = render([{"role": "system", "content": SYSTEM_MARK}, {"role": "user", "content": USER_MARK}])
    except Exception:  # a template may raise on a role it does not know (Gemma's on "system")
        text = ""
    if SYSTEM_MARK in text and USER_MARK in text and text.index(SYSTEM_MARK) < text.index(USER_MARK):
        head, rest = text.split(SYSTEM_MARK, 1)
        between, tail = rest.split(USER_MARK, 1)
        return ChatFrame(head, between, tail)
    try:
        text = render([{"role": "user", "content": USER_MARK}])
    except Exception:
        return None
    if USER_MARK not in text:
        return None
    head, tail = text.split(USER_MARK, 1)
    return ChatFrame(head, "\n\n", tail)


def jinja_renderer(template: str, bos_token: str = "", eos_token: str = "") -> Callable[[Messages], str]:
    """``render(messages)`` for a template given as Jinja text (a GGUF file's
    ``tokenizer.chat_template``), sandboxed as transformers renders it."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message: str) -> None:
        raise ValueError(message)

    compiled = env.from_string(template)
    return lambda messages: compiled.render(
        messages=messages, add_generation_prompt=True, bos_token=bos_token, eos_token=eos_token,
        raise_exception=raise_exception,
    )


def tokenizer_renderer(tokenizer) -> Callable[[Messages], str] | None:
    """``render(messages)`` through a transformers tokenizer's own chat template, or None."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    return lambda messages: tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)


def tokenizer_frame(tokenizer) -> ChatFrame | None:
    """The frame of a transformers tokenizer's own chat template, or None when it has none."""
    render = tokenizer_renderer(tokenizer)
    return frame_from(render) if render is not None else None


def choose_style(asked: str, preferred: PromptStyle, frame: ChatFrame | None) -> PromptStyle:
    """The style a model is prompted in: what ``?prompt=`` asked, else (``auto``) the model's own
    preference (a bundled model's measured one, ``chat`` for any other model with a template);
    ``chat`` needs a template."""
    from dynrag.errors import ConfigError

    style = preferred if asked == "auto" else asked
    if style == "chat" and frame is None:
        if asked == "chat":
            raise ConfigError("model option prompt=chat: this model's tokenizer has no chat template; use prompt=plain")
        return "plain"
    return style  # type: ignore[return-value]


def frame_of(lm: object) -> ChatFrame | None:
    """The frame to build ``lm``'s prompts in: its chat template's, when it is prompted in the
    chat style; None for plain text (and for no model at all)."""
    if lm is None or getattr(lm, "prompt_style", "plain") != "chat":
        return None
    return getattr(lm, "chat_frame", None)
