"""Tiny randomly initialised transformers models and a word-level tokenizer, built offline in ms.

For unit tests of shapes and formulas; integration tests use the bundled model.
"""

from __future__ import annotations

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import (
    Gemma3ForCausalLM,
    Gemma3TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
)

from dynrag.lm.hf import HFLanguageModel

WORDS = (
    "the a of in on and to is was by river town bridge built founder born city year "
    "who which where when what question answer so . , ? : paris lyon rhone 1887 engineer "
    "harbour mill school museum north south east west old new first second"
).split(" ")


def tiny_tokenizer(add_bos: bool = False) -> PreTrainedTokenizerFast:
    """Word-level, SentencePiece-style: every word is one token carrying a leading '▁'.

    With ``add_bos`` encoding a text with special tokens puts ``<bos>`` first, as Llama's does.
    """
    vocab = {"<unk>": 0, "<bos>": 1, "<eos>": 2}
    for word in WORDS:
        vocab.setdefault("▁" + word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    tok.decoder = decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    if add_bos:
        tok.post_processor = processors.TemplateProcessing(single="<bos> $A", special_tokens=[("<bos>", 1)])
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>"
    )
    return fast


def tiny_llama(vocab_size: int, seed: int = 0, attn: str = "sdpa") -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, as in the bundled models
        max_position_embeddings=4096,  # six exemplars and a few passages fit: prompts are kept within it
        bos_token_id=1,
        eos_token_id=2,
        attn_implementation=attn,
    )
    return LlamaForCausalLM(config).eval()


def tiny_gemma3(vocab_size: int, seed: int = 0, attn: str = "sdpa") -> Gemma3ForCausalLM:
    torch.manual_seed(seed)
    config = Gemma3TextConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=1,
        head_dim=16,
        # Short window, so the sliding layers' mask matters for prompts of a dozen tokens.
        sliding_window=4,
        layer_types=["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=4096,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        attn_implementation=attn,
    )
    return Gemma3ForCausalLM(config).eval()


def tiny_llama_lm(seed: int = 0):
    """The tiny Llama behind dynrag's own model wrapper, with the word-level tokenizer."""
    tok = tiny_tokenizer()
    return HFLanguageModel(tiny_llama(len(tok), seed=seed), tok, name="tiny")


def save_tiny_llama(directory, seed: int = 0):
    """The tiny Llama and its tokenizer saved as a Hugging Face model directory, for commands
    run as a user would (`--model hf:DIR`): loads in well under a second, generates garbage."""
    tok = tiny_tokenizer()
    tiny_llama(len(tok), seed=seed).save_pretrained(directory)
    tok.save_pretrained(directory)
    return directory


class RecordingTinyLM(HFLanguageModel):
    """The tiny Llama behind the real backend, with a context window of ``window`` tokens, never
    writing token 0, and recording every count_tokens call and every prompt it is asked to extend."""

    def __init__(self, window: int):
        tok = tiny_tokenizer()
        model = tiny_llama(len(tok), seed=5)
        model.lm_head.register_forward_hook(lambda m, a, out: out.index_fill(-1, torch.tensor([0]), -1e4))
        super().__init__(model, tok, name="tiny")
        self.context_window = window
        self.counted: list[int] = []
        self.prompts: list[tuple[int, int]] = []  # (prompt tokens, max_new_tokens)

    def count_tokens(self, text: str) -> int:
        self.counted.append(len(text))
        return super().count_tokens(text)

    def generate(self, prompt, max_new_tokens, *args, **kwargs):
        gen = super().generate(prompt, max_new_tokens, *args, **kwargs)
        self.prompts.append((gen.prompt_length, max_new_tokens))
        return gen
