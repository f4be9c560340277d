"""docs/architecture.md names every module of the package, so a new file cannot go undescribed.

The rule, kept simple so it reads the document the way a person does: the document is cut into
blocks — a paragraph, a list item (with its indented continuation lines) or a heading; fenced
code (the floor diagram) belongs to no block. A module ``a/b/c.py`` counts as named when one
block holds

- every directory of its path as a word ending in a slash (``a/`` and ``b/``; ``a/b/`` holds both),
  the package's own entry, say, and
- a tail of its path ending in the file name, not glued to a longer path or word: ``c.py``,
  ``b/c.py`` or ``a/b/c.py``.

So ``classify/logistic.py`` anywhere names it, and so does ``logistic.py`` inside the bullet of
``classify/``; a top-level module (``config.py``) has no directory and needs only its name.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "dynrag"
DOC = ROOT / "docs" / "architecture.md"

BLOCK_START = re.compile(r"^(?:#|[-*+] |\d+\. )")  # a heading or a list item starts a new block


def modules() -> list[str]:
    """Every Python module of the package but the ``__init__.py`` files, relative to it."""
    return sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py" and "__pycache__" not in p.parts
    )


def blocks(doc: str) -> list[str]:
    """The document cut into paragraphs, list items and headings; fenced code is left out."""
    found: list[list[str]] = []
    current: list[str] = []
    fenced = False
    for line in doc.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            if current:
                found.append(current)
            current = []
            continue
        if fenced:
            continue
        if not line.strip() or BLOCK_START.match(line):
            if current:
                found.append(current)
            current = [line] if line.strip() else []
            continue
        current.append(line)
    if current:
        found.append(current)
    return ["\n".join(b) for b in found]


def _names_directory(block: str, directory: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(directory)}/", block) is not None


def _names_tail(block: str, parts: list[str]) -> bool:
    tails = ["/".join(parts[i:]) for i in range(len(parts))]
    pattern = "|".join(re.escape(t) for t in tails)
    return re.search(rf"(?<![\w/.*-])(?:{pattern})(?![\w/])", block) is not None


def named_in(block: str, module: str) -> bool:
    parts = module.split("/")
    return all(_names_directory(block, d) for d in parts[:-1]) and _names_tail(block, parts)


def unnamed(doc: str, names: list[str]) -> list[str]:
    """The modules of ``names`` that no block of ``doc`` names."""
    cut = blocks(doc)
    return [m for m in names if not any(named_in(b, m) for b in cut)]


def test_the_architecture_names_every_module():
    names = modules()
    assert len(names) > 100, f"found only {len(names)} modules under {PACKAGE}"
    missing = unnamed(DOC.read_text(encoding="utf-8"), names)
    assert not missing, (
        "docs/architecture.md does not name these modules; add each, with its one job, under its "
        "package's entry:\n" + "\n".join(missing)
    )


FAKE_DOC = """\
# Fake

- **`classify/`** — the classifier: `logistic.py` (the model) and `query.py`.
- **`text/`** — words (`text/words.py`).

A paragraph naming `retrieval/hybrid.py` by its path, and `dragin/` with `scoring.py`.
Another line of the same paragraph, `methods/` in it.

- **`eval/`** — `runner.py`.

```
9  world/  teach.py
```

`config.py` is the run configuration.
"""


def test_the_matcher_reports_a_module_the_document_does_not_name():
    names = [
        "classify/logistic.py",  # bare name in its package's bullet
        "classify/query.py",
        "classify/training.py",  # absent
        "text/words.py",  # its whole path
        "text/content.py",  # absent
        "retrieval/hybrid.py",  # its whole path in a paragraph
        "methods/dragin/scoring.py",  # bare name, both directories in one paragraph
        "eval/runner.py",
        "eval/summary.py",  # absent
        "world/teach.py",  # only in fenced code: not named
        "config.py",  # top level: the name alone
        "render.py",  # absent
        "retrieval/query.py",  # `query.py` is named, but in classify/'s bullet, not retrieval/'s
        "methods/deeprag/scoring.py",  # no block names deeprag/
    ]
    assert unnamed(FAKE_DOC, names) == [
        "classify/training.py",
        "text/content.py",
        "eval/summary.py",
        "world/teach.py",
        "render.py",
        "retrieval/query.py",
        "methods/deeprag/scoring.py",
    ]


def test_a_name_glued_to_a_longer_one_does_not_count():
    doc = "- **`training/`** — `reader_train.py` and `lm/bundled.py`; `bestpractice*.py`.\n"
    assert unnamed(doc, ["training/train.py", "training/bundled.py", "training/bestpractice.py"]) == [
        "training/train.py",
        "training/bundled.py",
        "training/bestpractice.py",
    ]
