"""SeaKR: retrieve when the model's hidden states say it is unsure (Yao et al., 2024).

Every call SeaKR makes writes a greedy continuation and also samples ``samples`` continuations of the
same prompt, reading one middle block's hidden state at an end-of-sequence token after each; the
eigen-score of those states (uncertainty.py) is the model's self-aware uncertainty.

1. Self-aware retrieval: write the next reasoning step (one sentence) with the passages chosen so
   far. If its uncertainty is at most ``threshold`` keep it; otherwise search with a query made
   from that step (query.py).
2. Self-aware re-ranking: write the step again once per retrieved passage not used yet (the chosen
   passages plus that one), and keep the passage, and its step, whose uncertainty is lowest. Chosen
   passages accumulate; a repeated query, or no new passage, ends the reasoning.
3. Self-aware reasoning: when the steps end (the answer phrase, ``max_steps``, ``max_docs``), answer
   twice, once from the reasoning steps given as the passages and once from every chosen passage,
   and return the answer whose call was less uncertain.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from dynrag.lm.base import Generation, Prompt, require
from dynrag.methods.answering import complete_answer
from dynrag.methods.base import Answer, MethodTraits, Step
from dynrag.methods.iterative import SENTENCE_ENDS, IterativeMethod, IterativeOptions, LoopState
from dynrag.methods.prompting import ANSWER_STOPS, has_complete_answer
from dynrag.methods.seakr.query import authors_step_query, masked_step_query
from dynrag.methods.seakr.uncertainty import choose_strategy, rank_by_uncertainty, sample_uncertainty, should_retrieve
from dynrag.retrieval.base import Hit
from dynrag.text.sentences import split_sentences

# The authors' BM25 query keeps its last 64 tokens of the model's tokenizer.
DEFAULT_QUERY_TOKENS = {"paper": None, "reference": 64}


class SeakrOptions(IterativeOptions):
    variant: Literal["paper", "reference"] = Field(
        "paper", description="paper: every step's uncertainty is checked and the query is the step without its "
        "doubted tokens; reference: the authors' code (a step stating the answer is kept unchecked, their query rule)")
    threshold: float = Field(-6.0, description="retrieve when the eigen-score exceeds this (the authors' -6.0)")
    samples: int = Field(20, ge=2, description="continuations sampled per call for the eigen-score (k)")
    layer: int | None = Field(None, ge=0, description="decoder block read (0-based); None: the middle one, L // 2 - 1")
    alpha: float = Field(1e-3, gt=0.0, description="regulariser added to the Gram matrix's diagonal")
    representation: Literal["ffn", "residual"] = Field(
        "ffn", description="ffn: the block's feed-forward output (as the authors read it); residual: the hidden "
        "state after the block (transformers' output_hidden_states)")
    temperature: float = Field(1.0, gt=0.0, description="sampling temperature of the k continuations")
    top_k: int = Field(50, ge=0, description="sample among the top_k most likely tokens (0: all)")
    top_p: float = Field(0.9, gt=0.0, le=1.0, description="then among the nucleus of this mass")
    seed: int = Field(42, description="seed of the samples (each call's seed also depends on its prompt)")
    max_step_tokens: int = Field(100, ge=4, description="longest reasoning step, greedy or sampled")
    max_steps: int = Field(7, ge=1, description="most reasoning steps per question (the authors' README runs 7)")
    max_docs: int = Field(5, ge=1, description="reasoning ends once this many passages are chosen")
    query_doubt: float = Field(
        0.1, ge=0.0, le=1.0, description="a token whose 1 - p is above this is doubted: left out of the query")
    max_query_tokens: int | None = Field(
        None, ge=1, description="keep the query's last N tokens; None: the variant's default (reference 64, paper no cut)")


class Seakr(IterativeMethod):
    name: ClassVar[str] = "seakr"
    traits: ClassVar[MethodTraits] = MethodTraits(needs_hidden_states=True, tune_space=("threshold=-6.5:-3",))
    Options: ClassVar[type] = SeakrOptions

    def __init__(self, lm, builder, options, retriever):
        instead = ("use a local model (--model bundled or hf:PATH, on transformers or backend=llama.cpp), whose "
                   "hidden states are read; or flare or dragin, which decide from token probabilities and attention")
        require(lm, "hidden_states", needed_by="method 'seakr'", instead=instead)
        require(lm, "logprobs", needed_by="method 'seakr'", instead=instead)
        super().__init__(lm, builder, options, retriever)
        self.chain.max_query_tokens = self.max_query_tokens

    @property
    def max_query_tokens(self) -> int | None:
        given = self.options.max_query_tokens
        return DEFAULT_QUERY_TOKENS[self.options.variant] if given is None else given

    # -- one call: a greedy continuation and its uncertainty ------------------------------------

    def _call(self, state: LoopState, documents: list[Hit], answer: str, max_tokens: int, *,
              step: bool) -> tuple[Generation, float | None, dict[str, Any]]:
        """The greedy continuation of the prompt with ``documents`` and ``answer`` so far (one
        sentence when ``step``), the eigen-score of ``samples`` sampled ones, and trace details."""
        o = self.options
        prompt = self.builder.build(state.question, documents or None, answer, lm=self.lm, max_new_tokens=max_tokens)
        state.trace.note_prompt(prompt)
        gen = self.lm.generate(prompt, max_tokens, stop=ANSWER_STOPS, stop_after=SENTENCE_ENDS if step else ())
        sampled = self.lm.sample_hidden_states(
            prompt, o.samples, o.layer, max_tokens, stop=ANSWER_STOPS + (SENTENCE_ENDS if step else ()),
            representation=o.representation, temperature=o.temperature, top_k=o.top_k, top_p=o.top_p,
            seed=self._seed(prompt))
        score = sample_uncertainty(sampled.texts, sampled.states, o.alpha)
        details = {
            "uncertainty": None if score is None else round(score, 4),
            "threshold": o.threshold,
            "samples": len(sampled.texts),
            "blank_samples": sum(1 for t in sampled.texts if not t.strip()),
            "hidden_size": int(sampled.states.shape[1]),
            "sampled_tokens": sum(len(t) for t in sampled.token_ids),
            "tokens": gen.pieces,
        }
        return gen, score, details

    def _seed(self, prompt: Prompt) -> int:
        # From the prompt, not a call counter: questions answered on several threads at once (eval
        # --batch) draw the same samples as when answered one by one.
        digest = hashlib.sha256(f"{self.options.seed}:{prompt.text}".encode()).digest()
        return int.from_bytes(digest[:8], "little") >> 1

    def _step_tokens(self, state: LoopState) -> int:
        return max(1, min(self.options.max_step_tokens, self.remaining_tokens(state), self.decoding_left(state)))

    # -- the loop ----------------------------------------------------------------------------

    def answer(self, question: str) -> Answer:
        state = self.start(question)
        state.trace.options["max_query_tokens"] = self.max_query_tokens  # the resolved value, not None
        chosen: list[Hit] = []  # passages chosen by re-ranking, in order; every later prompt shows them
        rationales: list[str] = []
        searched: set[str] = set()
        steps = 0
        while not self.done(state):
            gen, score, details = self._call(state, chosen, state.answer, self._step_tokens(state), step=True)
            steps += 1
            states_answer = has_complete_answer(state.answer + gen.text, self.builder.answer_phrase)
            checked = not (states_answer and self.options.variant == "reference")
            unsure = checked and should_retrieve(score, self.options.threshold)
            details["decision"] = "retrieve" if unsure and self.can_retrieve(state) else "keep"
            if details["decision"] == "keep":
                self._keep(state, gen, details, rationales)
            else:
                state.trace.steps.append(Step("tentative", gen.text, "", gen.decoded_tokens or len(gen), 0, details))
                found = self._retrieve_and_rerank(state, gen, chosen, rationales, searched)
                if found is None:
                    break
                gen = found
            state.steps = steps  # re-ranking's generations are not reasoning steps
            if len(chosen) >= self.options.max_docs or gen.stop_reason not in ("stop_after", "length"):
                break
        return self._finish(state, chosen, rationales)

    def _keep(self, state: LoopState, gen: Generation, details: dict[str, Any], rationales: list[str]) -> None:
        rationales.append(self.keep(state, gen, details=details).strip())

    def _retrieve_and_rerank(self, state: LoopState, gen: Generation, chosen: list[Hit], rationales: list[str],
                             searched: set[str]) -> Generation | None:
        """Search with a query from the unsure step, write the step once per new passage, keep the
        least uncertain; None when the query repeats or no new passage came back."""
        o = self.options
        probabilities = list(gen.logprobs)
        if o.variant == "reference":
            previous = rationales[-1] if rationales else ""
            query = authors_step_query(gen.raw_tokens, gen.pieces, probabilities, o.query_doubt, state.question, previous)
        else:
            query = masked_step_query(gen.pieces, probabilities, o.query_doubt, state.question)
        if query in searched:
            state.trace.steps.append(Step("stop", "", "", 0, 0, {"reason": f"query repeated: {query!r}"}))
            return None
        searched.add(query)
        score = state.trace.steps[-1].details.get("uncertainty")
        reason = f"uncertainty {score} > {o.threshold}" if score is not None else "no usable sample"
        hits = self.chain.retrieve(query, state.trace, position=state.kept_tokens, reason=reason)
        used = {h.id for h in chosen}
        fresh = [h for h in hits if h.id not in used]
        if not fresh:
            state.trace.steps.append(Step("stop", "", "", 0, 0, {"reason": "no passage that is not chosen already"}))
            return None
        tried = [self._call(state, chosen + [hit], state.answer, self._step_tokens(state), step=True) for hit in fresh]
        order = rank_by_uncertainty([t[1] for t in tried], [bool(t[0].text.strip()) for t in tried])
        for rank, i in enumerate(order):
            tried[i][2].update({"candidate": fresh[i].id, "rank": rank + 1})
        for i, (candidate, _, details) in enumerate(tried):
            if i != order[0]:
                state.trace.steps.append(Step("candidate", candidate.text, "", candidate.decoded_tokens or len(candidate),
                                              0, details))
        best, _, details = tried[order[0]]
        chosen.append(fresh[order[0]])
        details.update({"decision": "chosen", "passage": fresh[order[0]].id})
        self._keep(state, best, details, rationales)
        return best

    # -- self-aware reasoning ------------------------------------------------------------------

    def _finish(self, state: LoopState, chosen: list[Hit], rationales: list[str]) -> Answer:
        steps = self._steps_for_reading(rationales)
        as_passages = [Hit(f"step-{i + 1}", "", text, 0.0) for i, text in enumerate(steps)]
        read = {name: self._read(state, docs, name) for name, docs in (("rationales", as_passages), ("documents", chosen))}
        pick = choose_strategy(*((read[n][0].final_answer, read[n][1]) for n in ("rationales", "documents")))
        answer, _, step = read[pick]
        step.kept_text, step.kept_tokens = step.text, step.generated_tokens  # the text returned is this read's
        state.trace.steps.append(Step("choose", "", "", 0, 0, {
            "strategy": pick, **{f"{n}_uncertainty": read[n][1] for n in read},
            **{f"{n}_answer": read[n][0].final_answer for n in read}}))
        state.trace.seconds = time.perf_counter() - state.started
        return answer

    def _steps_for_reading(self, rationales: list[str]) -> list[str]:
        """The reasoning steps the rationale reading gets: without the sentences that state the
        answer (the authors take them out of the last step, so the reading answers afresh)."""
        phrase = self.builder.answer_phrase.lower()
        out = []
        for text in rationales:
            kept = " ".join(s for s in split_sentences(text) if phrase not in s.lower())
            if kept.strip():
                out.append(kept.strip())
        return out

    def _read(self, state: LoopState, documents: list[Hit], strategy: str) -> tuple[Answer, float | None, Step]:
        """A full answer written with ``documents`` (the answer phrase asked for when it is
        missing), its uncertainty, and its trace step."""
        gen, score, details = self._call(state, documents, "", max(1, self.options.max_new_tokens), step=False)
        details.update({"strategy": strategy, "passages": [h.id for h in documents]})
        step = Step("read", gen.text, "", gen.decoded_tokens or len(gen), 0, details)
        state.trace.steps.append(step)
        answer = complete_answer(self.lm, self.builder, state.trace, state.question, documents or None, gen.text.strip())
        return answer, score, step
