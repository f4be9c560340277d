import itertools
import json
from pathlib import Path

import pytest

from dynrag.corpus import Passage, read_passages
from dynrag.corpus.readers import read_folder, read_jsonl, read_tsv
from dynrag.errors import DataError, DynragError


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


# ---- JSONL -----------------------------------------------------------------------------------


def test_jsonl_reads_int_ids_optional_title_and_skips_blank_lines(tmp_path):
    f = write(
        tmp_path / "c.jsonl",
        '{"id": 7, "title": "Seven", "text": "seven days"}\n'
        "\n"
        '{"id": "b", "text": "no title here"}\n'
        '{"id": "c", "title": null, "text": "ünïcode — ok"}\n',
    )
    assert list(read_passages(f)) == [
        Passage("7", "Seven", "seven days"),
        Passage("b", "", "no title here"),
        Passage("c", "", "ünïcode — ok"),
    ]


def test_jsonl_malformed_line_reports_file_and_line(tmp_path):
    f = write(tmp_path / "c.jsonl", '{"id": 1, "text": "a"}\n\n{"id": 2, "text": \n')
    with pytest.raises(DataError) as e:
        list(read_jsonl(f))
    assert e.value.line == 3
    assert f"{f}:3" in str(e.value)


@pytest.mark.parametrize(
    "line, what",
    [
        ('{"id": "x"}', "text"),
        ('{"id": "x", "text": 5}', "text"),
        ('{"text": "x"}', "id"),
        ('{"id": true, "text": "x"}', "id"),
        ('["x", "y"]', "object"),
        ('{"id": "x", "text": "t", "title": 3}', "title"),
    ],
)
def test_jsonl_bad_records_name_the_problem(tmp_path, line, what):
    f = write(tmp_path / "c.jsonl", '{"id": 1, "text": "ok"}\n' + line + "\n")
    with pytest.raises(DataError, match=what) as e:
        list(read_jsonl(f))
    assert e.value.line == 2


def test_jsonl_non_utf8_line_is_a_data_error(tmp_path):
    f = write(tmp_path / "c.jsonl", b'{"id": 1, "text": "ok"}\n{"id": 2, "text": "\xff"}\n')
    with pytest.raises(DataError) as e:
        list(read_jsonl(f))
    assert e.value.line == 2


def test_jsonl_streams_lazily(tmp_path):
    # A bad line far down is not touched when only the first passages are asked for.
    good = "".join(json.dumps({"id": i, "text": f"t{i}"}) + "\n" for i in range(3))
    f = write(tmp_path / "c.jsonl", good + "not json\n")
    first_two = list(itertools.islice(read_passages(f), 2))
    assert [p.id for p in first_two] == ["0", "1"]


# ---- TSV -------------------------------------------------------------------------------------


def test_tsv_dpr_layout_with_quoted_fields(tmp_path):
    f = write(
        tmp_path / "psgs.tsv",
        'id\ttext\ttitle\n1\t"He said ""hi""\tand left"\tGreeting\n2\tplain text\tPlain\n',
    )
    assert list(read_passages(f)) == [
        Passage("1", "Greeting", 'He said "hi"\tand left'),
        Passage("2", "Plain", "plain text"),
    ]


def test_tsv_bad_row_reports_line(tmp_path):
    f = write(tmp_path / "psgs.tsv", "id\ttext\ttitle\n1\tok\tT\n2\tmissing title\n")
    with pytest.raises(DataError, match="3 tab-separated fields") as e:
        list(read_tsv(f))
    assert e.value.line == 3


def test_tsv_requires_header(tmp_path):
    f = write(tmp_path / "psgs.tsv", "1\tsome text\tTitle\n")
    with pytest.raises(DataError, match="header") as e:
        list(read_tsv(f))
    assert e.value.line == 1
    with pytest.raises(DataError, match="empty"):
        list(read_tsv(write(tmp_path / "empty.tsv", "")))


# ---- folders ---------------------------------------------------------------------------------


def test_folder_reads_txt_and_md_recursively_sorted(tmp_path):
    root = tmp_path / "docs"
    write(root / "b.txt", "bee text")
    write(root / "a" / "z.md", "intro line\n\n## Zed Heading ##\nbody\n")
    write(root / "a" / "plain.md", "no heading at all")
    write(root / "skip.py", "print('not a doc')")
    write(root / ".hidden" / "h.txt", "hidden")
    write(root / "blank.txt", "  \n")
    passages = list(read_passages(root))
    assert [p.id for p in passages] == ["a/plain.md", "a/z.md", "b.txt"]
    assert [p.title for p in passages] == ["plain", "Zed Heading", "b"]
    assert passages[1].text == "intro line\n\n## Zed Heading ##\nbody\n"


def test_folder_non_utf8_file_is_named(tmp_path):
    root = tmp_path / "docs"
    write(root / "ok.txt", "fine")
    bad = write(root / "bad.txt", b"caf\xe9")
    with pytest.raises(DataError) as e:
        list(read_folder(root))
    assert str(bad) in str(e.value)


# ---- dispatch --------------------------------------------------------------------------------


def test_unknown_suffix_lists_supported_kinds(tmp_path):
    f = write(tmp_path / "c.csv", "id,text\n")
    with pytest.raises(DynragError) as e:
        read_passages(f)
    msg = str(e.value)
    assert ".csv" in msg and ".jsonl" in msg and ".tsv" in msg and "folder" in msg


def test_missing_path_is_a_data_error_at_call_time(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        read_passages(tmp_path / "nope.jsonl")
