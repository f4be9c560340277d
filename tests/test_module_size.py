"""Every source file of the package stays small enough to read in one sitting: at most
``MAX_LINES`` lines. A file that grows past it holds more than one job; split it along its seams
rather than raise the limit. Packaged data (JSON, JSONL, weights) is not code and is not counted."""

from __future__ import annotations

from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
MAX_LINES = 400
CODE_SUFFIXES = {".py", ".js", ".css", ".html"}


def line_count(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def source_files() -> list[Path]:
    return sorted(p for p in SRC.rglob("*") if p.suffix in CODE_SUFFIXES and "__pycache__" not in p.parts)


def test_no_source_file_is_over_the_limit():
    files = source_files()
    assert len(files) > 50, f"found only {len(files)} source files under {SRC}"
    long = [f"{p.relative_to(SRC.parent)}: {n} lines" for p in files if (n := line_count(p)) > MAX_LINES]
    assert not long, f"over {MAX_LINES} lines; split along their seams:\n" + "\n".join(long)
