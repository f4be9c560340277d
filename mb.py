import json, time, sys
import numpy as np
from json.decoder import scanstring
from dynrag.corpus import read_passages
from dynrag.retrieval import BM25Index
from dynrag.retrieval.stored_hits import new_hit
from dynrag.retrieval.passage_lines import _ID_PREFIX, _TITLE_SEP, _TEXT_SEP, _LINE_END
out = "/tmp/arch_mb/idx"
import os
if not os.path.exists(out):
    BM25Index.build(read_passages("/work/shared/data/wiki_corpus/passages.jsonl"), out, progress=False)
idx = BM25Index.load(out, backend="auto")
qs = [r["question"] for r in json.load(open("/work/shared/data/hotpotqa/hotpot_dev_distractor_sample.json"))][:185] * 6
k = 10
st = idx.store
def old(queries, k):
    results = [[] for _ in queries]
    row_matrix, score_matrix = idx.search_rows_batch(queries, k)
    if row_matrix.size == 0: return results
    k = row_matrix.shape[1]
    active = [i for i in range(len(queries)) if row_matrix[i, 0] >= 0]
    rows = row_matrix[active].reshape(-1); scores = score_matrix[active]
    rows = np.where(rows < 0, 0, rows)
    line_starts = st._offsets[rows].tolist(); line_ends = st._offsets[rows + 1].tolist()
    title_at, text_at = np.asarray(st._fields[rows], dtype=np.int64).T.tolist()
    flat_scores = np.asarray(scores).reshape(-1).tolist()
    mm, nh, scan = st._mm, new_hit, scanstring
    id_at = len(_ID_PREFIX) + 1
    title_gap, text_gap, end_gap = len(_TITLE_SEP) + 1, len(_TEXT_SEP) + 1, len(_LINE_END) + 1
    pos = 0
    for qi in active:
        hits = results[qi]
        for j in range(pos, pos + k):
            score = flat_scores[j]
            if score <= 0.0: break
            line = mm[line_starts[j]:line_ends[j]].decode("utf-8")
            a, b = title_at[j], text_at[j]
            if line.find("\\", id_at) < 0:
                hit = nh(line[id_at:a - title_gap], line[a + 1:b - text_gap], line[b + 1:-end_gap], score)
            else:
                hit = nh(scan(line, id_at)[0], scan(line, a + 1)[0], scan(line, b + 1)[0], score)
            hits.append(hit)
        pos += k
    return results
assert old(qs, k) == idx.search_batch(qs, k)
old(qs, k); idx.search_batch(qs, k)
res = {"old": [], "new": [], "rows": []}
for r in range(9):
    for name, f in (("old", lambda: old(qs, k)), ("new", lambda: idx.search_batch(qs, k)), ("rows", lambda: idx.search_rows_batch(qs, k))):
        t = time.process_time(); f(); res[name].append(time.process_time() - t)
b = {n: min(v) for n, v in res.items()}
print({n: round(len(qs) / v) for n, v in b.items()}, "new/old speed:", round(b["old"] / b["new"], 3))
