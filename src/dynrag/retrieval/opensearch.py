"""OpenSearch backend: BM25 over an OpenSearch (or Elasticsearch-7-compatible) index through
opensearch-py, the scale-out path for BM25 (the papers searched DPR's 21M psgs_w100 passages in
Elasticsearch). ``dynrag index CORPUS --engine opensearch --url URL --name INDEX`` fills an index
(opensearch_ingest.py); ``--retriever opensearch --retriever-option url=URL,index=INDEX`` searches it.

Index layout, as the papers' Elasticsearch index had it (DRAGIN built it with BEIR's loader): the
passage id is the document ``_id``; ``title`` and ``text`` are text fields analysed with the
built-in ``english`` analyzer (standard tokenizer, lower-case, English stop words, Porter stems)
and scored by BM25 with settable k1 and b (default 1.2 and 0.75, Lucene's and so Elasticsearch's
defaults); a query is a ``multi_match`` of type ``best_fields`` over both fields with
``tie_breaker`` 0.5, sent in batches through ``_msearch``. The mapping's ``_meta.dynrag`` records
the build (format, corpus checksum, passage count, k1, b) and whether ingest completed.

Rankings differ a little from ``bm25`` (bm25s): another stemmer (Porter against Snowball), stop
list and field weighting (best of two fields against title and text as one). Credentials, for a
secured cluster, come from the environment (``DYNRAG_OPENSEARCH_USER``,
``DYNRAG_OPENSEARCH_PASSWORD``) so they never land in a run's saved config.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, TypeVar

from dynrag.errors import DynragError, IndexDirError
from dynrag.retrieval.base import BatchSearch, Hit, without_blank_queries

DEFAULT_URL = "http://127.0.0.1:9200"
DEFAULT_INDEX = "dynrag"
INDEX_FORMAT = "dynrag-opensearch"
INDEX_FORMAT_VERSION = 1
MAX_WINDOW = 10_000  # OpenSearch's default index.max_result_window
TIE_BREAKER = 0.5
USER_ENV, PASSWORD_ENV = "DYNRAG_OPENSEARCH_USER", "DYNRAG_OPENSEARCH_PASSWORD"

T = TypeVar("T")


def build_hint(url: str, index: str) -> str:
    return f"build it with `dynrag index CORPUS --engine opensearch --url {url} --name {index}`"


def connect(url: str = DEFAULT_URL, *, timeout: float = 60.0, verify_certs: bool = True,
            ca_certs: str | None = None) -> Any:
    """An opensearch-py client for ``url`` (http or https), with credentials from the environment."""
    try:
        from opensearchpy import OpenSearch
    except ImportError as e:  # pragma: no cover - opensearch-py is a dependency
        raise DynragError("the OpenSearch backend needs opensearch-py: pip install opensearch-py") from e
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    kwargs: dict[str, Any] = {"timeout": timeout, "max_retries": 3, "retry_on_timeout": True}
    if user:
        kwargs["http_auth"] = (user, password or "")
    if url.startswith("https://"):
        kwargs.update(verify_certs=verify_certs, ca_certs=ca_certs, ssl_show_warn=verify_certs)
    return OpenSearch(hosts=[url], **kwargs)


def call(url: str, index: str, what: str, fn: Callable[[], T]) -> T:
    """``fn()`` with opensearch-py's errors turned into one line naming the server and the index."""
    import opensearchpy as osp

    try:
        return fn()
    except osp.ConnectionError as e:  # refused, DNS, TLS, timeout (ConnectionTimeout is one)
        raise DynragError(
            f"cannot reach OpenSearch at {url} ({_reason(e)}) while {what}; is the server running and the URL "
            "right? (--url, or --retriever-option url=...)"
        ) from None
    except osp.NotFoundError as e:
        if _error_type(e) == "index_not_found_exception":
            raise IndexDirError(f"OpenSearch at {url} has no index {index!r}; {build_hint(url, index)}") from None
        raise DynragError(f"OpenSearch at {url}: {what}: not found ({_reason(e)})") from None
    except (osp.AuthenticationException, osp.AuthorizationException) as e:
        raise DynragError(
            f"OpenSearch at {url} refused the request ({e.status_code}: {_reason(e)}) while {what}; "
            f"set {USER_ENV} and {PASSWORD_ENV} for a secured cluster"
        ) from None
    except osp.TransportError as e:
        raise DynragError(f"OpenSearch at {url}: {what} failed ({e.status_code}: {_reason(e)})") from None


def _error_type(e: Any) -> str:
    info = getattr(e, "info", None)
    if isinstance(info, dict) and isinstance(info.get("error"), dict):
        return str(info["error"].get("type", ""))
    return str(getattr(e, "error", ""))


def _reason(e: Any) -> str:
    info = getattr(e, "info", None)
    if isinstance(info, dict) and isinstance(info.get("error"), dict):
        err = info["error"]
        return f"{err.get('type', '')}: {err.get('reason', '')}".strip(": ")
    if getattr(e, "error", None) and not isinstance(info, Exception):
        return str(e.error)
    text = str(info if isinstance(info, Exception) else e)
    for marker in ("Connection refused", "Name or service not known", "timed out", "certificate verify failed"):
        if marker in text:
            return marker
    return text.splitlines()[0][:200] if text else type(e).__name__


def index_meta(client: Any, url: str, index: str) -> dict[str, Any] | None:
    """The index's ``_meta.dynrag`` (None for an index dynrag did not build); IndexDirError if missing."""
    mapping = call(url, index, f"reading index {index!r}", lambda: client.indices.get_mapping(index=index))
    body = next(iter(mapping.values()), {}) if isinstance(mapping, dict) else {}
    meta = (body.get("mappings") or {}).get("_meta") or {}
    return meta.get("dynrag") if isinstance(meta.get("dynrag"), dict) else None


class OpenSearchRetriever(BatchSearch):
    """BM25 search over one OpenSearch index (see the module doc for its layout)."""

    def __init__(self, client: Any, url: str, index: str, *, title_field: str = "title",
                 text_field: str = "text", meta: dict[str, Any] | None = None):
        self.client, self.url, self.index = client, url, index
        self.title_field, self.text_field = title_field, text_field
        self.meta = meta

    @classmethod
    def open(cls, url: str = DEFAULT_URL, index: str = DEFAULT_INDEX, *, title_field: str = "title",
             text_field: str = "text", timeout: float = 60.0, verify_certs: bool = True,
             ca_certs: str | None = None) -> OpenSearchRetriever:
        """Connect and check the index is there (and, if dynrag built it, that its ingest finished)."""
        client = connect(url, timeout=timeout, verify_certs=verify_certs, ca_certs=ca_certs)
        meta = index_meta(client, url, index)
        if meta is not None:
            if meta.get("format") != INDEX_FORMAT or meta.get("format_version") != INDEX_FORMAT_VERSION:
                raise IndexDirError(f"OpenSearch index {index!r} at {url} has an unknown dynrag format "
                                  f"{meta.get('format')!r} v{meta.get('format_version')!r}; rebuild it with --replace")
            if not meta.get("complete"):
                raise IndexDirError(
                    f"OpenSearch index {index!r} at {url} is incomplete: ingest stopped after "
                    f"{meta.get('ingested', 0):,} passages; run the same `dynrag index ... --engine opensearch` "
                    "command again to finish it"
                )
        return cls(client, url, index, title_field=title_field, text_field=text_field, meta=meta)

    def _body(self, query: str, k: int) -> dict[str, Any]:
        return {
            "size": k,
            "_source": [self.title_field, self.text_field],
            "query": {"multi_match": {"query": query, "type": "best_fields",
                                      "fields": [self.title_field, self.text_field], "tie_breaker": TIE_BREAKER}},
        }

    def search_batch(self, queries: list[str], k: int) -> list[list[Hit]]:
        """Top-k hits per query, best first; a blank query gets [], k is capped at 10,000."""
        k = min(int(k), MAX_WINDOW)
        if not queries or k <= 0:
            return [[] for _ in queries]
        return without_blank_queries(queries, lambda texts: self._msearch(texts, k))

    def _msearch(self, queries: list[str], k: int) -> list[list[Hit]]:
        lines: list[dict[str, Any]] = []
        for q in queries:
            lines += [{"index": self.index}, self._body(q, k)]
        result = call(self.url, self.index, f"searching index {self.index!r}", lambda: self.client.msearch(body=lines))
        out = []
        for response in result.get("responses", []):
            if "error" in response:
                err = response["error"]
                kind = err.get("type", "") if isinstance(err, dict) else str(err)
                if kind == "index_not_found_exception":
                    raise IndexDirError(f"OpenSearch at {self.url} has no index {self.index!r}; "
                                      f"{build_hint(self.url, self.index)}")
                reason = err.get("reason", "") if isinstance(err, dict) else ""
                raise DynragError(f"OpenSearch at {self.url}: search in {self.index!r} failed ({kind}: {reason})")
            hits = []
            for h in response["hits"]["hits"]:
                source = h.get("_source") or {}
                hits.append(Hit(str(h["_id"]), str(source.get(self.title_field, "")),
                                str(source.get(self.text_field, "")), float(h.get("_score") or 0.0)))
            out.append(hits)
        return out

    def __len__(self) -> int:
        result = call(self.url, self.index, f"counting index {self.index!r}", lambda: self.client.count(index=self.index))
        return int(result["count"])

    def close(self) -> None:
        self.client.close()
