"""How much a BOS token changes the `reference` RIND pass: the first word's sentence-normalised
weight without BOS (the authors' pass) over the same weight with BOS, on the bundled model's
closed-book answers to the first HotpotQA questions.

    .venv/bin/python benchmarks/dragin_bos_weight.py HOTPOT_DEV.json [N]
"""
import argparse
import json

import numpy as np

from dynrag.datasets.loaders import load_examples
from dynrag.lm import load_lm
from dynrag.methods.dragin.scoring import reference_token_weights, reference_word_weights
from dynrag.methods.dragin.wordscores import sentence_index
from dynrag.methods.prompting import PromptBuilder
from dynrag.text.words import merge_words

ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
ap.add_argument("data", help="HotpotQA JSON file")
ap.add_argument("n", nargs="?", type=int, default=10, help="questions (default 10)")
args = ap.parse_args()
DATA, N = args.data, args.n
lm = load_lm("bundled")
b = PromptBuilder.for_dataset("hotpotqa")
ratios = []
for ex in list(load_examples("hotpotqa", DATA, limit=N)):
    gen = lm.generate(b.build(ex.question), 64, stop=("\n", "Question:"))
    words = merge_words(gen.raw_tokens, gen.pieces)
    if len(words) < 3:
        continue
    sent = sentence_index(words)
    w = {}
    for bos in (False, True):
        heads = lm.attention_pass(gen.token_ids, per_head=True, bos=bos)
        w[bos] = reference_word_weights(reference_token_weights(heads), words, sent)
    ratios.append(w[False][0] / w[True][0])
print(json.dumps({"n": len(ratios), "first_word_weight_without_over_with_bos": [round(r, 3) for r in ratios],
                  "median": round(float(np.median(ratios)), 3)}))
