"""No module outside the registries and a choice's own module tests a registered name (a method,
retriever, dataset, query transform or fine-tuning method): callers read the entry's traits, so a
new choice cannot be forgotten in a branch."""

import re
from collections.abc import Callable
from pathlib import Path

from dynrag.datasets.formats import DATASETS
from dynrag.methods.registry import METHODS
from dynrag.retrieval.factory import RETRIEVERS
from dynrag.retrieval.transform_registry import QUERY_TRANSFORMS
from dynrag.training.finetune import FineTune

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
        rf"""(?:==|!=|\bin)\s*["']({words})["']"""  # x == "a", x in "a"
        rf"""|\bin\s*[\(\{{\[][^\)\}}\]]*?["']({words})["']"""  # x in ("a", ...), x in (None, "a")
        rf"""|["']({words})["']\s*(?:==|!=)"""  # "a" == x
        rf"""|\.startswith\(\s*["']({words})["']"""  # x.startswith("a")
    )
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("#"):
            continue
        for match in pattern.finditer(ITERATION.sub("for _ over", line)):
            found.append((number, next(g for g in match.groups() if g), line.strip()))
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


# Dataset, query transform and fine-tuning names, each with the modules allowed to spell them out:
# the registry and the entries' own modules.
def dataset_home(rel: str) -> bool:
    return rel.startswith("datasets/formats/")


def transform_home(rel: str) -> bool:
    return rel == "retrieval/transform_registry.py"


def finetune_home(rel: str) -> bool:
    return rel == "training/finetune.py"


# Words that are also everyday values of other settings ("none": no chunking, reranker, compressor
# or pruner; "auto": a device, dtype, worker count or backend chosen for you): a comparison of one
# counts only on a line that names what its registry chooses.
SHARED_WORDS = {"none": "transform", "auto": "method"}


def named_choices() -> list[tuple[list[str], Callable[[str], bool]]]:
    return [
        (DATASETS.names(), dataset_home),
        (QUERY_TRANSFORMS.names(), transform_home),
        ([member.value for member in FineTune], finetune_home),
    ]


def violations(rel: str, text: str, names: list[str], home: Callable[[str], bool]) -> list[str]:
    if home(rel):
        return []
    return [
        f"{rel}:{number}: {line}" for number, name, line in comparisons(text, names)
        if name not in SHARED_WORDS or SHARED_WORDS[name] in line.lower()
    ]


def test_no_dataset_transform_or_finetune_name_is_compared_outside_its_registry():
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        text = path.read_text(encoding="utf-8")
        for names, home in named_choices():
            found += violations(rel, text, names, home)
    assert not found, "read the registry entry's traits (or compare with FineTune's members) instead:\n" + "\n".join(found)


def test_the_check_finds_a_planted_comparison_of_each_kind():
    planted = (
        'if dataset != "2wikimultihopqa":\n'
        'if transform not in (None, "none"):\n'
        'if name.startswith("hyde"):\n'
        'if options.method == "lora":\n'
        'if chunk.kind == "none":\n'  # another setting's "none": allowed
        'if device == "auto":\n'  # another setting's "auto": allowed
    )
    found = [hit for names, home in named_choices() for hit in violations("eval/x.py", planted, names, home)]
    assert [hit.split(": ", 1)[0] for hit in found] == ["eval/x.py:1", "eval/x.py:2", "eval/x.py:3", "eval/x.py:4"]
    assert not violations("training/finetune.py", 'if m == "lora":\n', [m.value for m in FineTune], finetune_home)
