"""`openai:<base_url>#<model>`: the LanguageModel protocol over an OpenAI-compatible server.

Any server that speaks OpenAI's `/v1/completions` with `logprobs` (vLLM, the llama.cpp server,
llama-cpp-python, `dynrag serve` itself) can stand in for a local model. Decoding is greedy
(temperature 0) with the server's repetition penalty off (llama.cpp applies 1.1 unless told 1.0,
and the chosen token then differs from the argmax of the reported log-probabilities).

Responses are streamed, and stop strings, `stop_after` strings and `stop_when` callbacks are
applied here, token by token, exactly as the local backend applies them; when one fires, the
stream is closed and the server stops generating. So every method sees the same Generation shape,
except for what an HTTP server cannot give:

* no attention (Capabilities say so; DRAGIN refuses this backend);
* no token ids (each is -1) and no prompt tokens; `raw_tokens` are the text pieces;
* the entropy of each next-token distribution is an **estimate** from the server's top-k
  log-probabilities (`topk_entropy`): the top-k outcomes plus the rest of the mass as one lumped
  outcome. It is a lower bound of the true entropy, exact when the top-k hold all the mass.
"""

from __future__ import annotations

import json
import math
import os
import time
from contextlib import closing
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import urlparse

import numpy as np

from dynrag.errors import ConfigError, DynragError
from dynrag.lm.base import Capabilities, Generation, Prompt, WithoutOptionalCapabilities
from dynrag.lm.spec import OPENAI_PREFIX as SPEC_PREFIX
from dynrag.lm.stopping import DecodeState, StopWhen, check_stops

SPEC_FORM = "openai:BASE_URL#MODEL"
DEFAULT_TOP_LOGPROBS = 20  # vLLM's default ceiling; OpenAI's own legacy endpoint allows 5
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


class RetryableError(DynragError):
    """A failure worth trying again: no connection, a 5xx, a 429, or a stream cut short."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


def parse_spec(spec: str) -> tuple[str, str]:
    """`openai:http://host:port/v1#model` -> (base URL without a trailing slash, model name)."""
    body = spec.strip()[len(SPEC_PREFIX):] if spec.strip().startswith(SPEC_PREFIX) else spec.strip()
    base_url, sep, model = body.partition("#")
    base_url = base_url.strip().rstrip("/")
    url = urlparse(base_url)
    if url.scheme not in ("http", "https") or not url.netloc:
        raise ConfigError(
            f"model spec {spec!r}: {base_url!r} is not an http(s) URL; expected {SPEC_FORM}, "
            "e.g. openai:http://127.0.0.1:8080/v1#smollm2 (the base URL an OpenAI client takes, with /v1)"
        )
    if not sep or not model.strip():
        raise ConfigError(f"model spec {spec!r} names no model after '#'; expected {SPEC_FORM}")
    return base_url, model.strip()


def topk_entropy(logprobs: Sequence[float] | np.ndarray) -> float:
    """Entropy estimate (nats) from the top-k log-probabilities of one next-token distribution.

    The k outcomes contribute -p log p each; the remaining mass r = 1 - sum(p) counts as one more
    outcome (-r log r). Lumping outcomes together never raises entropy, so this is a lower bound of
    the full distribution's entropy, equal to it when the top-k hold all the mass.
    """
    lp = np.asarray(logprobs, dtype=np.float64)
    lp = lp[np.isfinite(lp)]
    if lp.size == 0:
        return 0.0
    p = np.exp(lp)
    total = float(p.sum())
    if total > 1.0:  # rounding on the server side; renormalise rather than count negative mass
        p, lp, total = p / total, lp - math.log(total), 1.0
    entropy = float(-(p * lp).sum())
    rest = 1.0 - total
    if rest > 1e-12:
        entropy -= rest * math.log(rest)
    return entropy


class OpenAICompatLM(WithoutOptionalCapabilities):
    """Greedy completions with top-k log-probabilities from an OpenAI-compatible server.

    Of the optional capabilities it has next-token log-probabilities (from a 1-token completion's
    top-k, matched by text) with token ids from the server's tokenize route; no attention passes and
    no text log-probabilities. Thread-safe: several questions may be in flight at once
    (`dynrag eval --concurrency N`).
    """

    capabilities = Capabilities(attention=False, logprobs=True, next_token_logprobs=True)
    concurrent = True  # may be called from several threads at once

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        top_logprobs: int = DEFAULT_TOP_LOGPROBS,
        timeout: float = 120.0,
        retries: int = 4,
        backoff: float = 0.5,
        api_key: str | None = None,
        name: str | None = None,
    ):
        import httpx

        self.base_url, self.model = base_url.rstrip("/"), model
        self.name = name or f"{SPEC_PREFIX}{self.base_url}#{model}"
        self.top_logprobs, self.timeout, self.retries, self.backoff = top_logprobs, timeout, retries, backoff
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._client = httpx.Client(
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(10.0, timeout)),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
        )
        self._tokenize_route: str | None = None

    @classmethod
    def from_spec(cls, spec: str, **kwargs) -> "OpenAICompatLM":
        base_url, model = parse_spec(spec)
        kwargs.setdefault("api_key", os.environ.get("OPENAI_API_KEY") or None)
        return cls(base_url, model, name=spec.strip(), **kwargs)

    def close(self) -> None:
        self._client.close()

    # -- generation ------------------------------------------------------------------------

    def payload(self, text: str, max_new_tokens: int) -> dict:
        """The request body: greedy, repetition penalties off, top-k log-probabilities, streamed."""
        return {
            "model": self.model,
            "prompt": text,
            "max_tokens": max_new_tokens,
            "temperature": 0.0,
            "top_p": 1.0,
            "logprobs": self.top_logprobs,
            "stream": True,
            "frequency_penalty": 0.0,
            "presence_penalty": 0.0,
            "repeat_penalty": 1.0,  # llama.cpp / llama-cpp-python (default 1.1)
            "repetition_penalty": 1.0,  # vLLM
        }

    def generate(
        self,
        prompt: str | Prompt,
        max_new_tokens: int,
        stop: Sequence[str] = (),
        capture_attention: bool = False,
        stop_after: Sequence[str] = (),
        stop_when: StopWhen | None = None,
    ) -> Generation:
        if capture_attention:
            raise ConfigError(
                f"model {self.name!r} is an HTTP server and cannot give attention rows; "
                "use a local model (bundled or hf:) for methods that need them"
            )
        prompt = Prompt.of(prompt)
        return self._with_retries(lambda: self._generate_once(prompt, max_new_tokens, stop, stop_after, stop_when))

    def _generate_once(self, prompt: Prompt, max_new_tokens: int, stop, stop_after, stop_when) -> Generation:
        state = DecodeState(0, [], [], [], [], [], [])
        with closing(self._stream_tokens(prompt.text, max_new_tokens)) as tokens:
            stop_reason, decoded = self._decode(tokens, state, max_new_tokens, stop, stop_after, stop_when)
        return Generation(
            prompt=prompt,
            prompt_token_ids=[],
            prompt_offsets=[],
            prompt_raw_tokens=[],
            token_ids=state.token_ids,
            pieces=state.pieces,
            raw_tokens=state.raw_tokens,
            logprobs=np.asarray(state.logprobs, dtype=np.float32),
            entropies=np.asarray(state.entropies, dtype=np.float32),
            attention=None,
            stop_reason=stop_reason,
            decoded_tokens=decoded,
        )

    @staticmethod
    def _decode(tokens, state: DecodeState, max_new_tokens: int, stop, stop_after, stop_when) -> tuple[str, int]:
        """Consume streamed tokens into `state` until a stop applies: (stop reason, tokens decoded,
        counting those trimmed off after a stop string)."""
        text = ""
        decoded = 0
        for piece, logprob, top in tokens:
            if piece is None:  # the server ended the answer (EOS)
                return "eos", decoded
            decoded += 1
            state.token_ids.append(-1)
            state.pieces.append(piece)
            state.logprobs.append(logprob)
            values = list(top.values()) if piece in top else [*top.values(), logprob]
            state.entropies.append(topk_entropy(values))
            state.raw_tokens.append(piece)
            text += piece
            reason = check_stops(state, text, piece, stop, stop_after, stop_when)
            if reason is not None:
                return reason, decoded
            if len(state.pieces) >= max_new_tokens:
                return "length", decoded
        return "length", decoded

    def _stream_tokens(self, text: str, max_new_tokens: int) -> Iterator[tuple[str | None, float, dict]]:
        """(piece, log-probability, top-k {piece: logprob}) per token; (None, 0, {}) at the end
        of an answer the server finished itself. Closing the generator closes the stream."""
        import httpx

        url = f"{self.base_url}/completions"
        try:
            with self._client.stream("POST", url, json=self.payload(text, max_new_tokens)) as response:
                if response.status_code != 200:
                    response.read()
                    self._raise_for_status(response)
                finished = False
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue  # blank separators, comments, event names
                    data = line[5:].strip()
                    if data == "[DONE]":
                        break
                    try:
                        chunk = json.loads(data)
                    except ValueError as exc:
                        raise DynragError(f"{url}: not a JSON stream chunk: {data[:120]!r}") from exc
                    if "error" in chunk:
                        raise DynragError(f"{url}: the server reported an error: {_error_message(chunk)}")
                    for choice in chunk.get("choices") or []:
                        yield from _choice_tokens(choice)
                        if choice.get("finish_reason"):
                            finished = True
                            if choice["finish_reason"] != "length":
                                yield None, 0.0, {}
                            return
                if not finished:
                    raise RetryableError(
                        f"{url}: the stream ended before the answer did (no finish_reason); a llama-cpp-python "
                        "server interrupts a stream when another request waits: start it with --interrupt_requests False"
                    )
        except httpx.TimeoutException as exc:
            raise DynragError(f"{url}: no answer within {self.timeout:g} s ({type(exc).__name__})") from exc
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise RetryableError(f"{url}: {type(exc).__name__}: {exc or 'connection failed'}") from exc

    def _raise_for_status(self, response) -> None:
        status = response.status_code
        try:
            message = _error_message(response.json())
        except ValueError:
            message = response.text[:300]
        where = f"{response.request.method} {response.request.url}"
        if status in RETRY_STATUSES:
            retry_after = response.headers.get("retry-after")
            raise RetryableError(f"{where}: HTTP {status}: {message}",
                                 retry_after=float(retry_after) if retry_after and retry_after.isdigit() else None)
        raise DynragError(f"{where}: HTTP {status}: {message}")

    def _with_retries(self, call):
        """Call, and on a RetryableError wait 0.5, 1, 2, 4 ... s (or what Retry-After says) and try again."""
        for attempt in range(self.retries + 1):
            try:
                return call()
            except RetryableError as exc:
                if attempt == self.retries:
                    raise DynragError(f"model server {self.base_url} failed {attempt + 1} times; last: {exc}") from exc
                wait = self.backoff * (2 ** attempt)
                if exc.retry_after is not None:
                    wait = max(wait, min(exc.retry_after, 30.0))
                time.sleep(wait)
        raise AssertionError("unreachable")

    # -- next-token scores (DeepRAG's margin decision) ---------------------------------------

    def next_token_logprobs(self, prompt: str | Prompt, candidates: Sequence[str]) -> np.ndarray:
        """log P(next token starts each candidate | prompt), from one 1-token completion's top-k.

        Without the server's vocabulary a candidate's first token is taken to be the longest top-k
        token that the candidate starts with. A candidate none of the top-k starts is given the
        k-th log-probability: an upper bound (it is less likely than every listed token).
        """
        text = Prompt.of(prompt).text
        top = self._with_retries(lambda: self._top_next(text))
        floor = min(top.values()) if top else -math.inf
        out = []
        for candidate in candidates:
            matches = [tok for tok in top if tok and candidate.startswith(tok)]
            out.append(top[max(matches, key=len)] if matches else floor)
        return np.asarray(out, dtype=np.float64)

    def _top_next(self, text: str) -> dict[str, float]:
        import httpx

        body = {**self.payload(text, 1), "stream": False}
        url = f"{self.base_url}/completions"
        try:
            response = self._client.post(url, json=body)
        except httpx.TimeoutException as exc:
            raise DynragError(f"{url}: no answer within {self.timeout:g} s ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise RetryableError(f"{url}: {type(exc).__name__}: {exc or 'connection failed'}") from exc
        if response.status_code != 200:
            self._raise_for_status(response)
        choice = (response.json().get("choices") or [{}])[0]
        tops = (choice.get("logprobs") or {}).get("top_logprobs") or [{}]
        return {str(k): float(v) for k, v in (tops[0] or {}).items()}

    # -- tokens ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        """Tokens of `text` as the server's tokenizer counts them (its tokenize route)."""
        return len(self.tokenize(text))

    def first_token_id(self, text: str) -> int:
        ids = self.tokenize(text)
        if not ids:
            raise ValueError(f"{text!r} encodes to no tokens")
        return int(ids[0])

    def tokenize(self, text: str) -> list[int]:
        """Token ids of `text` (no special tokens where the route allows) from the server."""
        return self._with_retries(lambda: self._tokenize_once(text))

    def _tokenize_once(self, text: str) -> list[int]:
        import httpx

        root = self.base_url[: -len("/v1")] if self.base_url.endswith("/v1") else self.base_url
        routes = {
            "llama-cpp-python": (f"{root}/extras/tokenize", {"input": text}),
            "vllm": (f"{root}/tokenize", {"model": self.model, "prompt": text, "add_special_tokens": False}),
            "llama.cpp": (f"{root}/tokenize", {"content": text}),
        }
        order = [self._tokenize_route] if self._tokenize_route else list(routes)
        for route in order:
            url, body = routes[route]
            try:
                response = self._client.post(url, json=body)
            except httpx.TransportError as exc:
                raise RetryableError(f"{url}: {type(exc).__name__}") from exc
            if response.status_code in RETRY_STATUSES:
                self._raise_for_status(response)
            if response.status_code == 200:
                tokens = response.json().get("tokens")
                if isinstance(tokens, list):
                    self._tokenize_route = route
                    return [int(t) for t in tokens]
        raise DynragError(f"model server {self.base_url} has no tokenize route (tried {', '.join(routes)})")


def _choice_tokens(choice: Mapping) -> Iterator[tuple[str, float, dict]]:
    """The tokens of one streamed choice, from its `logprobs` block (the text when there is none)."""
    logprobs = choice.get("logprobs") or {}
    tokens = logprobs.get("tokens") or []
    text = choice.get("text") or ""
    if not tokens:
        if text:
            raise DynragError(
                "the model server sent text without log-probabilities; it must support `logprobs` on "
                "/v1/completions (vLLM, llama.cpp, llama-cpp-python and `dynrag serve` do)"
            )
        return
    token_logprobs = logprobs.get("token_logprobs") or [None] * len(tokens)
    tops = logprobs.get("top_logprobs") or [None] * len(tokens)
    # The tokens spell the text; when a server splits a multi-byte character differently, the
    # text wins and the first token carries it.
    pieces = list(tokens) if "".join(tokens) == text or not text else [text] + [""] * (len(tokens) - 1)
    for piece, lp, top in zip(pieces, token_logprobs, tops):
        top = dict(top or {})
        lp = float(lp) if lp is not None else (max(top.values()) if top else 0.0)
        yield piece, lp, top


def _error_message(body) -> str:
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)
        if isinstance(body.get("detail"), (str, list)):
            return str(body["detail"])
        return str(err)
    return str(body)[:300]
