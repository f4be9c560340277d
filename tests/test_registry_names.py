"""No module outside the registries and a choice's own module tests a method or retriever by name:
callers read the entry's traits, so a new method or retriever cannot be forgotten in a branch."""

import re
from pathlib import Path

from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS

SRC = Path(__file__).resolve().parents[1] / "src" / "dynrag"
REGISTRIES = {"registry.py", "methods/registry.py", "retrieval/factory.py"}
# Same words, other things: Milvus's search modes and `dynrag index --engine` (what builds an index).
OTHER_MEANINGS = {
    ("retrieval/milvus.py", "bm25"), ("retrieval/milvus.py", "dense"), ("cli.py", "bm25"), ("cli.py", "opensearch"),
}
ITERATION = re.compile(r"\bfor\s+[\w, ]+?\s+in\b")  # iterating over names is not telling them apart


def own_module(rel: str, name: str) -> bool:
    return rel in (f"methods/{name}.py", f"retrieval/{name}.py") or rel.startswith(f"methods/{name}/")


def comparisons(text: str, names: list[str]) -> list[tuple[int, str, str]]:
    words = "|".join(map(re.escape, names))
    pattern = re.compile(
        rf"""(?:==|!=|\bin)\s*[\(\{{\[]?\s*["']({words})["']|["']({words})["']\s*(?:==|!=)"""
    )
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for match in pattern.finditer(ITERATION.sub("for _ over", line)):
            found.append((number, match.group(1) or match.group(2), line.strip()))
    return found


def test_no_method_or_retriever_name_is_compared_outside_its_module():
    names = METHODS.names() + RETRIEVERS.names()
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel in REGISTRIES:
            continue
        for number, name, line in comparisons(path.read_text(encoding="utf-8"), names):
            if not own_module(rel, name) and (rel, name) not in OTHER_MEANINGS:
                found.append(f"{rel}:{number}: {line}")
    assert not found, "read the registry entry's traits instead:\n" + "\n".join(found)


def test_the_check_sees_each_form():
    text = 'if m == "dragin":\nif "direct" != m:\nif m in {"single", "x"}:\nif r in ("bm25",):\nfor n in ("dense",):\nx = [f(n) for n in ("dense", "bm25")]\n'
    assert [name for _, name, _ in comparisons(text, ["dragin", "direct", "single", "bm25", "dense"])] == [
        "dragin", "direct", "single", "bm25",
    ]
