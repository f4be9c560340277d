"""The bad-input battery: every hostile input and fault of issue 13's table, run through the real
`dynrag` command as a user would, each printed PASS / FAIL (or SKIP, with the reason).

    .venv/bin/python -m tests.reliability.battery            # all cases (a few minutes)
    .venv/bin/python -m tests.reliability.battery -k eval    # the cases whose name holds "eval"
    .venv/bin/python -m tests.reliability.battery --list

A case passes when the command does what the standards ask: bad input gets one line starting
"error:" that names the input (no traceback) and a non-zero exit; nothing already written is
lost or doubled; warnings say what to do. Real files, real processes, kill -9 where the fault is a
kill, a read-only or full tmpfs in a private mount namespace (tests/mounts.py) for disk faults.
The model is the tiny random one saved as a Hugging Face directory (fast; what it answers is not
the point), so the battery needs neither the bundled weights nor a network.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from dynrag.cli import quiet_model_libraries  # noqa: E402
from tests.mounts import in_mount, mounts_unavailable  # noqa: E402
from tests.tiny_models import save_tiny_llama  # noqa: E402

quiet_model_libraries()  # the battery's own model saves and index loads draw no bars between the lines

DYNRAG = [sys.executable, "-m", "dynrag.cli"]


class Skip(Exception):
    pass


class Fail(Exception):
    pass


@dataclass
class Case:
    name: str
    check: Callable[[Path], None]


CASES: list[Case] = []


def case(name: str):
    def add(fn: Callable[[Path], None]) -> Callable[[Path], None]:
        CASES.append(Case(name, fn))
        return fn
    return add


# ---- helpers ------------------------------------------------------------------------------------

_MODEL: list[Path] = []


def tiny_model() -> str:
    if not _MODEL:
        _MODEL.append(save_tiny_llama(Path(tempfile.mkdtemp(prefix="battery-model-")) / "tiny"))
    return f"hf:{_MODEL[0]}"


def dynrag(*args, timeout: float = 300, cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*DYNRAG, *map(str, args)], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env)


def error_line(r: subprocess.CompletedProcess) -> str:
    if "Traceback" in r.stderr:
        raise Fail("traceback: " + r.stderr.strip().splitlines()[-1])
    lines = [line for line in r.stderr.splitlines() if line.startswith("error: ")]
    if not lines:
        raise Fail(f"no error line (exit {r.returncode}): {r.stderr.strip()[-300:]}")
    return lines[-1]


def expect_error(r: subprocess.CompletedProcess, *needles: str) -> str:
    if r.returncode == 0:
        raise Fail(f"exit 0, expected an error; stderr: {r.stderr.strip()[-300:]}")
    line = error_line(r)
    for needle in needles:
        if needle not in line:
            raise Fail(f"{needle!r} not in {line!r}")
    return line


def expect_ok(r: subprocess.CompletedProcess) -> None:
    if r.returncode != 0:
        raise Fail(f"exit {r.returncode}: {r.stderr.strip()[-400:]}")


def need(condition: bool, what: str) -> None:
    if not condition:
        raise Fail(what)


def jsonl(path: Path, *rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def corpus(d: Path, n: int = 3, word: str = "bridge") -> Path:
    return jsonl(d / "corpus.jsonl", *({"id": f"p{i}", "title": f"Town {i}", "text": f"the {word} of town {i}"}
                                       for i in range(n)))


def index(d: Path, n: int = 3, *extra) -> Path:
    out = d / "idx"
    expect_ok(dynrag("index", corpus(d, n), "--out", out, *extra))
    return out


def qa(d: Path, n: int = 3, name: str = "qa.jsonl") -> Path:
    return jsonl(d / name, *({"id": f"q{i}", "question": f"Which town has bridge {i}?", "answers": [f"town {i}"],
                              "contexts": [{"title": f"Town {i}", "text": f"the bridge of town {i}"}]}
                             for i in range(n)))


def hotpot(d: Path) -> Path:
    """A one-question file with a supporting context, enough for eval-retrieval."""
    return jsonl(d / "h.jsonl", {"id": "h", "question": "q?", "answers": ["a"],
                                 "contexts": [{"title": "T", "text": "a b", "supporting": True}]})


def retrieval_run(d: Path) -> Path:
    out = d / "ret"
    expect_ok(dynrag("eval-retrieval", "--dataset", "jsonl", "--data", hotpot(d), "--out", out, "--option",
                     "backend=numpy"))
    return out


def mounts() -> None:
    reason = mounts_unavailable()
    if reason:
        raise Skip(reason)


def read_only(d: Path, command: str, target: str) -> subprocess.CompletedProcess:
    """``command`` (a shell line whose output path is $M/target) on a read-only disk: the error
    names the target and the OS's reason."""
    mounts()
    r = in_mount(d / "m", command, options="ro")
    expect_error(r, str(d / "m" / target), "Read-only file system")
    return r


def ids(run: Path) -> list[str]:
    return [json.loads(line)["id"] for line in (run / "predictions.jsonl").read_text().splitlines() if line.strip()]


def evaluate(data: Path, out: Path, *extra) -> subprocess.CompletedProcess:
    return dynrag("eval", "--dataset", "jsonl", "--data", data, "--method", "direct", "--model", tiny_model(),
                  "--option", "max_new_tokens=2", "--out", out, "--no-progress", *extra)


# ---- the table: one bad input each, the error it must give ---------------------------------------
# (name, files to create under the case's directory, the dynrag arguments, what the error line
# names). In files and arguments "{d}" is the case's directory; a file's content None makes a
# folder, bytes are written as they are.

DIR = None
TABLE: list[tuple[str, dict, list[str], list[str]]] = [
    ("index: missing corpus file", {}, ["index", "{d}/nope.jsonl", "--out", "{d}/i"],
     ["{d}/nope.jsonl", "no such file"]),
    ("index: unsupported corpus kind (.csv)", {"c.csv": "id,text\n1,a\n"}, ["index", "{d}/c.csv", "--out", "{d}/i"],
     ["c.csv", "unsupported corpus kind", ".jsonl"]),
    ("index: empty .jsonl", {"c.jsonl": ""}, ["index", "{d}/c.jsonl", "--out", "{d}/i"],
     ["c.jsonl", "nothing to index", "the file is empty"]),
    ("index: .jsonl of blank lines", {"c.jsonl": "\n \n\n"}, ["index", "{d}/c.jsonl", "--out", "{d}/i"],
     ["c.jsonl", "only blank lines"]),
    ("index: invalid JSON on line 2", {"c.jsonl": '{"id": "1", "text": "a"}\n{"id": "2", oops}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i"], ["{d}/c.jsonl:2", "not valid JSON"]),
    ("index: a JSON line that is not an object", {"c.jsonl": "[1, 2]\n"}, ["index", "{d}/c.jsonl", "--out", "{d}/i"],
     ["{d}/c.jsonl:1", "expected a JSON object"]),
    ("index: a record without text", {"c.jsonl": '{"id": "1", "title": "T"}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i"], ["{d}/c.jsonl:1", "'text'"]),
    ("index: an id of the wrong type", {"c.jsonl": '{"id": [1], "text": "a"}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i"], ["{d}/c.jsonl:1", "'id'"]),
    ("index: a title that is not a string", {"c.jsonl": '{"id": "1", "text": "a", "title": 5}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i"], ["{d}/c.jsonl:1", "'title'"]),
    ("index: a non-UTF-8 byte on line 3 of a .jsonl",
     {"c.jsonl": b'{"id": "1", "text": "a"}\n{"id": "2", "text": "b"}\n{"id": "3", "text": "\xff"}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i"], ["{d}/c.jsonl:3"]),
    ("index: TSV with a header only", {"c.tsv": "id\ttext\ttitle\n"}, ["index", "{d}/c.tsv", "--out", "{d}/i"],
     ["c.tsv", "header row and no rows"]),
    ("index: TSV header without an id column", {"c.tsv": "name\ttext\nx\ty\n"},
     ["index", "{d}/c.tsv", "--out", "{d}/i"], ["{d}/c.tsv:1", "header must name"]),
    ("index: TSV row with the wrong number of fields (line 3)", {"c.tsv": "id\ttext\ttitle\n1\ta\tA\n2\tb\n"},
     ["index", "{d}/c.tsv", "--out", "{d}/i"], ["{d}/c.tsv:3", "tab-separated fields"]),
    ("index: TSV non-UTF-8 byte named on its own line (3)", {"c.tsv": b"id\ttext\ttitle\n1\tok\tT\n2\tbad \xff\tT\n"},
     ["index", "{d}/c.tsv", "--out", "{d}/i"], ["{d}/c.tsv:3", "not UTF-8"]),
    ("index: a folder without .txt/.md files", {"docs": DIR, "docs/a.pdf": b"%PDF"},
     ["index", "{d}/docs", "--out", "{d}/i"], ["docs", "no .txt or .md files", "a.pdf"]),
    ("index: a directory named x.jsonl", {"x.jsonl": DIR}, ["index", "{d}/x.jsonl", "--out", "{d}/i"],
     ["x.jsonl", "is a folder, not a .jsonl file"]),
    ("index: a folder of empty files", {"docs": DIR, "docs/a.md": "  \n"}, ["index", "{d}/docs", "--out", "{d}/i"],
     ["docs", "every .txt/.md file in the folder is empty"]),
    ("index: bad --chunk spec", {"c.jsonl": '{"id": "1", "text": "a"}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i", "--chunk", "tokens:abc"], ["tokens:abc"]),
    ("index: --embedding-model without --dense", {"c.jsonl": '{"id": "1", "text": "a"}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i", "--embedding-model", "{d}"], ["add --dense"]),
    ("index: --embedding-model that does not exist", {"c.jsonl": '{"id": "1", "text": "a"}\n'},
     ["index", "{d}/c.jsonl", "--out", "{d}/i", "--dense", "--embedding-model", "{d}/nope"], ["nope"]),
    ("index: --out is a file", {"c.jsonl": '{"id": "1", "text": "a"}\n', "f": "x"},
     ["index", "{d}/c.jsonl", "--out", "{d}/f"], ["{d}/f", "not a directory"]),
    ("index: a path holding rich markup [/red]", {}, ["index", "{d}/p[/red]/c[v2].jsonl", "--out", "{d}/i"],
     ["{d}/p[/red]/c[v2].jsonl"]),
    ("ask: empty question", {}, ["ask", "   ", "--method", "direct"], ["question is empty"]),
    ("ask: missing --index directory", {}, ["ask", "Who?", "--index", "{d}/nope"], ["{d}/nope"]),
    ("ask: unknown method lists the choices", {}, ["ask", "Who?", "--method", "magic"], ["magic", "dragin"]),
    ("ask: unknown option lists the valid ones", {},
     ["ask", "Who?", "--method", "flare", "--option", "tehta=0.1", "--index", "{d}"], ["tehta", "theta"]),
    ("ask: option value of the wrong type", {},
     ["ask", "Who?", "--method", "flare", "--option", "theta=high", "--index", "{d}"], ["theta"]),
    ("ask: unknown model spec lists the forms", {}, ["ask", "Who?", "--method", "direct", "--model", "gpt-9"],
     ["gpt-9", "hf:"]),
    ("ask: an empty hf: directory, message not cut off", {"m": DIR},
     ["ask", "Who?", "--method", "direct", "--model", "hf:{d}/m"], ["empty directory", "tokenizer files"]),
    ("ask: an hf: directory without config.json", {"m": DIR, "m/model.safetensors": b"x"},
     ["ask", "Who?", "--method", "direct", "--model", "hf:{d}/m"], ["no config.json"]),
    ("ask: unknown retriever option", {},
     ["ask", "Who?", "--index", "{d}", "--retriever", "hybrid", "--retriever-option", "alpah=1"], ["alpah", "alpha"]),
    ("ask: --retriever on a method that does not retrieve", {},
     ["ask", "Who?", "--method", "direct", "--retriever", "bm25"], ["does not retrieve"]),
    ("ask: --config not valid YAML", {"run.yaml": "method: [single\n"}, ["ask", "Who?", "--config", "{d}/run.yaml"],
     ["run.yaml", "not valid YAML"]),
    ("ask: --config with an unknown key", {"run.yaml": "methd: single\n"}, ["ask", "Who?", "--config", "{d}/run.yaml"],
     ["methd", "unknown key"]),
    ("eval: unknown dataset lists the choices", {"qa.jsonl": '{"id": "q", "question": "q?", "answers": ["a"]}\n'},
     ["eval", "--dataset", "squad", "--data", "{d}/qa.jsonl", "--method", "direct", "--out", "{d}/r"],
     ["squad", "hotpotqa"]),
    ("compare: a directory that is not a run", {"x": DIR, "x/notes.txt": "hi"}, ["compare", "{d}/x"],
     ["not a run directory"]),
]


def _table_case(files: dict, args: list[str], needles: list[str]) -> Callable[[Path], None]:
    def check(d: Path) -> None:
        for rel, content in files.items():
            path = d / rel
            if content is DIR:
                path.mkdir(parents=True, exist_ok=True)
            elif isinstance(content, bytes):
                path.write_bytes(content)
            else:
                path.write_text(content)
        expect_error(dynrag(*(a.replace("{d}", str(d)) for a in args)), *(n.replace("{d}", str(d)) for n in needles))
    return check


for _name, _files, _args, _needles in TABLE:
    CASES.append(Case(_name, _table_case(_files, _args, _needles)))


# ---- index: faults that need more than one command ------------------------------------------------

@case("index: duplicate passage ids")
def _(d):
    jsonl(d / "c.jsonl", {"id": "a", "text": "one"}, {"id": "a", "text": "two"})
    expect_error(dynrag("index", d / "c.jsonl", "--out", d / "i"), "c.jsonl", "duplicate passage id 'a'", "passages 1 and 2")
    need(not (d / "i").exists(), "an index was written")


@case("index: --out is an unrelated folder (not replaced)")
def _(d):
    (d / "photos").mkdir()
    (d / "photos" / "a.jpg").write_bytes(b"\xff\xd8")
    expect_error(dynrag("index", corpus(d), "--out", d / "photos"), "photos", "not a dynrag BM25 index")
    need((d / "photos" / "a.jpg").exists(), "the folder was touched")


@case("index: --out on a read-only disk")
def _(d):
    read_only(d, f'dynrag index {corpus(d)} --out "$M/idx"', "idx")


@case("index: disk full during a rebuild keeps the old index")
def _(d):
    mounts()
    small = corpus(d, 1)
    big = jsonl(d / "big.jsonl", *({"id": f"p{i}", "text": "the old bridge spans the river " * 20} for i in range(80)))
    r = in_mount(d / "m", f"""dynrag index {small} --out "$M/idx" >/dev/null 2>&1
dd if=/dev/zero of="$M/.fill" bs=4k 2>/dev/null
dynrag index {big} --out "$M/idx"
rc=$?
{sys.executable} -c "from dynrag.retrieval.bm25 import BM25Index; print('kept', len(BM25Index.load('$M/idx')))"
exit $rc
""", options="size=256k")
    expect_error(r, str(d / "m" / "idx"), "No space left on device")
    need("kept 1" in r.stdout, f"old index not intact: {r.stdout}")


@case("index: a corpus file whose read fails (EIO)")
def _(d):
    os.symlink("/proc/self/mem", d / "c.jsonl")
    expect_error(dynrag("index", d / "c.jsonl", "--out", d / "i"), str(d / "c.jsonl"), "Input/output error")


@case("index: a path holding an emoji code :100:")
def _(d):
    r = dynrag("index", d / "a:100:.jsonl", "--out", d / "i")
    expect_error(r, "a:100:.jsonl")
    need("💯" not in r.stderr, "printed an emoji")


@case("index: a 5 MB passage warns and suggests --chunk")
def _(d):
    jsonl(d / "c.jsonl", {"id": "big", "text": "the bridge of the town " * 220_000}, {"id": "s", "text": "short"})
    r = dynrag("index", d / "c.jsonl", "--out", d / "i")
    expect_ok(r)
    said = " ".join(r.stderr.split())
    need("warning:" in said and "'big'" in said and "--chunk tokens:100:20" in said, f"no warning: {said[-300:]}")


@case("index: kill -9 while --dense embeds keeps the old index whole; the next build removes the leftovers")
def _(d):
    out = d / "idx"
    expect_ok(dynrag("index", corpus(d, 5, "ferry"), "--out", out, "--dense"))
    big = jsonl(d / "big.jsonl", *({"id": f"n{i}", "text": f"the bridge of town {i}"} for i in range(3000)))
    proc = subprocess.Popen([*DYNRAG, "index", str(big), "--out", str(out), "--dense"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not any(".build-" in str(p) for p in d.rglob("vectors.npy")):
        if proc.poll() is not None:
            raise Fail("the rebuild finished before it could be killed")
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    from dynrag.retrieval.bm25 import BM25Index
    from dynrag.retrieval.dense import DenseIndex

    need(len(BM25Index.load(out)) == 5 and len(DenseIndex.load(out)) == 5, "the old index is not whole")
    need(any(p.name.startswith(".idx.") for p in d.iterdir()), "the killed build left nothing to clean up")
    expect_ok(dynrag("index", corpus(d, 2), "--out", out))
    left = sorted(p.name for p in d.iterdir() if p.name.startswith("."))
    need(not left, f"the next build left the killed one's temporaries: {left}")


# ---- ask ----------------------------------------------------------------------------------------

@case("ask: a 100,000-character question")
def _(d):
    r = dynrag("ask", "why " * 25_000, "--method", "direct")
    expect_error(r, "characters long", "limit of 4,096")
    need("loading model" not in r.stderr, "loaded the model first")


@case("ask: corrupt manifest.json")
def _(d):
    idx = index(d)
    (idx / "manifest.json").write_text("{not json")
    expect_error(dynrag("ask", "Who?", "--index", idx), "manifest.json", "rebuild")


@case("ask: params.index.json of the wrong type")
def _(d):
    idx = index(d)
    (idx / "params.index.json").write_text("[]")
    expect_error(dynrag("ask", "Who?", "--index", idx, "--model", tiny_model()), "params.index.json", "rebuild")


@case("ask: k=0")
def _(d):
    expect_error(dynrag("ask", "Who?", "--option", "k=0", "--index", index(d)), "greater than or equal to 1")


@case("ask: negative k")
def _(d):
    expect_error(dynrag("ask", "Who?", "--option", "k=-1", "--index", index(d)), "greater than or equal to 1")


@case("ask: hf:/nonexistent says no such directory")
def _(d):
    line = expect_error(dynrag("ask", "Who?", "--method", "direct", "--model", "hf:/nonexistent"), "no such directory")
    need("Repo id" not in line, line)


@case("ask: unknown retriever")
def _(d):
    expect_error(dynrag("ask", "Who?", "--index", index(d), "--retriever", "sparse"), "sparse", "bm25")


@case("ask: --trace to a read-only disk fails before answering")
def _(d):
    r = read_only(d, f'dynrag ask "Who?" --method direct --model {tiny_model()} --trace "$M/t.json"', "t.json")
    need(r.stdout == "", "answered anyway")


@case("ask: --trace to a full disk still shows the answer")
def _(d):
    mounts()
    r = in_mount(d / "m", f'dynrag ask "Who?" --method direct --model {tiny_model()} --option max_new_tokens=2 '
                 '--json --trace "$M/t.json"', options="size=16k", fill=True)
    expect_error(r, "t.json", "No space left on device")
    need(json.loads(r.stdout)["question"] == "Who?", "the answer was lost")


@case("ask: a corpus changed after indexing is warned about")
def _(d):
    idx = index(d)
    time.sleep(0.01)
    corpus(d, 4)
    r = dynrag("ask", "Which town?", "--index", idx, "--model", tiny_model(), "--option", "max_new_tokens=2")
    expect_ok(r)
    need("has changed since" in " ".join(r.stderr.split()), f"no warning: {r.stderr[-300:]}")


@case("ask: a 5 MB passage is cut to fit, and the trace says so")
def _(d):
    jsonl(d / "c.jsonl", {"id": "big", "text": "the bridge of the town " * 220_000}, {"id": "s", "text": "a bridge"})
    expect_ok(dynrag("index", d / "c.jsonl", "--out", d / "i"))
    r = dynrag("ask", "the bridge of the town", "--index", d / "i", "--model", tiny_model(), "--option", "k=2",
               "--option", "max_new_tokens=4", "--json")
    expect_ok(r)
    cut = [n for n in json.loads(r.stdout)["truncations"] if n["part"] == "document"]
    need([n["id"] for n in cut] == ["big"], f"truncations: {cut}")


@case("ask: a hit title holding rich markup renders")
def _(d):
    jsonl(d / "c.jsonl", {"id": "x[1]", "title": "[/red] :100: [bold]", "text": "the bridge [/b]"})
    expect_ok(dynrag("index", d / "c.jsonl", "--out", d / "i"))
    r = dynrag("ask", "bridge", "--index", d / "i", "--model", tiny_model(), "--option", "max_new_tokens=2")
    expect_ok(r)
    need("[/red] :100: [bold]" in r.stdout and "x[1]" in r.stdout, r.stdout[-400:])


# ---- eval ---------------------------------------------------------------------------------------

@case("eval: --data missing")
def _(d):
    expect_error(evaluate(d / "nope.jsonl", d / "run"), "nope.jsonl", "no such file")


@case("eval: --data is a directory")
def _(d):
    expect_error(evaluate(d, d / "run"), str(d), "is a directory")


@case("eval: a malformed record names file and line")
def _(d):
    (d / "qa.jsonl").write_text('{"id": "a", "question": "q?"}\n')
    expect_error(evaluate(d / "qa.jsonl", d / "run"), f"{d / 'qa.jsonl'}:1", "answers")


@case("eval: --limit 0")
def _(d):
    expect_error(evaluate(qa(d), d / "run", "--limit", "0"), "--limit")


@case("eval: a model typo writes nothing")
def _(d):
    r = dynrag("eval", "--dataset", "jsonl", "--data", qa(d), "--method", "direct", "--model", "hf:/typo",
               "--out", d / "run")
    expect_error(r, "no such directory /typo")
    need(not (d / "run").exists(), "the run directory was written")


@case("eval: a missing --baseline is found before any question")
def _(d):
    expect_error(evaluate(qa(d), d / "run", "--baseline", d / "nope"), "--baseline", "not a run directory")
    need(not (d / "run").exists(), "the run directory was written")


@case("eval: --baseline that is an eval-retrieval run")
def _(d):
    expect_error(evaluate(qa(d), d / "run", "--baseline", retrieval_run(d)), "not a `dynrag eval` run")


@case("eval: --out an unrelated non-empty folder")
def _(d):
    (d / "photos").mkdir()
    (d / "photos" / "a.jpg").write_bytes(b"x")
    expect_error(evaluate(qa(d), d / "photos"), "not a dynrag run directory", "a.jpg")
    need(sorted(os.listdir(d / "photos")) == ["a.jpg"], "the folder was written")


@case("eval: --out holding an eval-retrieval run")
def _(d):
    expect_error(evaluate(hotpot(d), retrieval_run(d)), "holds a `dynrag eval-retrieval` run")


def start_eval(data: Path, out: Path, lines: int) -> subprocess.Popen:
    """An eval of ``data`` in its own process, returned once it has written ``lines`` answers."""
    proc = subprocess.Popen([*DYNRAG, "eval", "--dataset", "jsonl", "--data", str(data), "--method", "direct",
                             "--model", tiny_model(), "--option", "max_new_tokens=16", "--out", str(out),
                             "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 180
    path = out / "predictions.jsonl"
    while not (path.exists() and path.read_text().count("\n") >= lines):
        if time.monotonic() > deadline or proc.poll() is not None:
            proc.kill()
            proc.wait()
            raise Fail("the run did not get going")
        time.sleep(0.01)
    return proc


@case("eval: a second eval on the same --out fails at once naming the pid; nothing doubled")
def _(d):
    data, out = qa(d, 12), d / "run"
    first = start_eval(data, out, 1)
    try:
        second = evaluate(data, out, "--option", "max_new_tokens=16")
        if first.poll() is not None:
            raise Skip("the first run finished before the second started (a very fast machine)")
        expect_error(second, f"pid {first.pid}", str(out))
    finally:
        first.kill()  # kill -9: the lock goes with it
        first.wait()
    expect_ok(evaluate(data, out, "--option", "max_new_tokens=16"))
    got = ids(out)
    need(len(got) == 12 and len(set(got)) == 12, f"{len(got)} records for {len(set(got))} questions")


@case("eval: a predictions.jsonl doubled by two writers is deduplicated, and says so")
def _(d):
    data, out = qa(d, 5), d / "run"
    expect_ok(evaluate(data, out))
    lines = (out / "predictions.jsonl").read_text()
    (out / "predictions.jsonl").write_text(lines + lines)
    r = evaluate(data, out)
    expect_ok(r)
    need("5 duplicate" in r.stderr and len(ids(out)) == 5, f"{len(ids(out))} records; {r.stderr[-200:]}")
    need(json.loads((out / "summary.json").read_text())["n"] == 5, "summary n != 5")


@case("eval: --out on a read-only disk")
def _(d):
    read_only(d, f'dynrag eval --dataset jsonl --data {qa(d)} --method direct --model {tiny_model()} --out "$M/run"',
              "run")


@case("eval: disk fills mid-run; every answer kept; resumes once there is room")
def _(d):
    mounts()
    data = qa(d, 30)
    cmd = (f'dynrag eval --dataset jsonl --data {data} --method direct --model {tiny_model()} '
           f'--option max_new_tokens=2 --out "$M/run" --no-progress')
    r = in_mount(d / "m", f"""{cmd}
rc=$?
mount -o remount,size=1m "$M"
{cmd} >/dev/null 2>&1 && echo resumed
{sys.executable} -c "import json; ids=[json.loads(l)['id'] for l in open('$M/run/predictions.jsonl')]; print('n', len(ids), len(set(ids)))"
exit $rc
""", options="size=16k")
    expect_error(r, "predictions.jsonl", "No space left on device")
    need("resumed" in r.stdout and "n 30 30" in r.stdout, r.stdout)


@case("eval: kill -9 mid-run, then each question answered exactly once")
def _(d):
    data, out = qa(d, 12), d / "run"
    proc = start_eval(data, out, 2)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    partial = ids(out)
    expect_ok(evaluate(data, out, "--option", "max_new_tokens=16"))
    got = ids(out)
    need(len(partial) < 12 and got[: len(partial)] == partial and len(got) == 12 == len(set(got)),
         f"{len(partial)} then {len(got)} ({len(set(got))} unique)")


@case("eval: a dataset question over the length limit")
def _(d):
    data = jsonl(d / "qa.jsonl", {"id": "long", "question": "why " * 2000, "answers": ["x"]})
    expect_error(evaluate(data, d / "run"), "question 'long'", "limit")
    need(not (d / "run").exists(), "the run directory was written")


@case("eval: a corrupt middle line of predictions.jsonl names the line")
def _(d):
    data, out = qa(d, 3), d / "run"
    expect_ok(evaluate(data, out, "--limit", "2"))
    text = (out / "predictions.jsonl").read_text().splitlines()
    (out / "predictions.jsonl").write_text(text[0] + "\n{broken\n" + text[1] + "\n")
    expect_error(evaluate(data, out, "--limit", "2"), f"{out / 'predictions.jsonl'}:2")


@case("eval: a different config in the same --out lists the differences")
def _(d):
    data, out = qa(d, 3), d / "run"
    expect_ok(evaluate(data, out, "--limit", "2"))
    expect_error(evaluate(data, out, "--limit", "3"), "different config", "limit: 2 -> 3")


# ---- eval-retrieval and compare -----------------------------------------------------------------

@case("eval-retrieval: --out holding an eval run is refused and left unchanged")
def _(d):
    data, out = qa(d, 2), d / "run"
    expect_ok(evaluate(data, out))
    before = (out / "summary.json").read_bytes()
    expect_error(dynrag("eval-retrieval", "--dataset", "jsonl", "--data", hotpot(d), "--out", out),
                 "holds a `dynrag eval` run")
    need((out / "summary.json").read_bytes() == before, "the eval summary changed")


@case("eval-retrieval: --k 0")
def _(d):
    expect_error(dynrag("eval-retrieval", "--dataset", "jsonl", "--data", hotpot(d), "--out", d / "r", "--k", "0"),
                 "--k")


@case("eval-retrieval: --out on a read-only disk")
def _(d):
    read_only(d, f'dynrag eval-retrieval --dataset jsonl --data {hotpot(d)} --out "$M/r" --option backend=numpy', "r")


@case("compare: an eval-retrieval run")
def _(d):
    expect_error(dynrag("compare", retrieval_run(d)), "compare reads `dynrag eval` runs")


# ---- the command line itself --------------------------------------------------------------------

@case("help: ask --help lists methods, docs, plain metavars")
def _(d):
    r = dynrag("ask", "--help")
    expect_ok(r)
    text = r.stdout
    need(all(f"  {m} " in text for m in ("direct", "single", "fixed_length", "fixed_sentence", "flare", "dragin")),
         "methods missing")
    need("docs/methods.md" in text and "--option KEY=VALUE" in text and "<bool>" not in text and "<list[str]>" not in text,
         "help text")


# ---- running ------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-k", dest="only", help="run only the cases whose name contains this")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or args.only in c.name]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    started = time.monotonic()
    root = Path(tempfile.mkdtemp(prefix="dynrag-battery-"))
    try:
        for n, c in enumerate(cases, 1):
            d = root / f"case{n:02d}"
            d.mkdir()
            t0 = time.monotonic()
            try:
                c.check(d)
                status, detail = "PASS", ""
            except Skip as exc:
                status, detail = "SKIP", str(exc)
            except Fail as exc:
                status, detail = "FAIL", str(exc)
            except Exception:  # a broken case is a failure, shown whole
                status, detail = "FAIL", traceback.format_exc(limit=3).strip().splitlines()[-1]
            counts[status] += 1
            print(f"{status}  {n:2d}  {c.name}  ({time.monotonic() - t0:.1f} s)" + (f"\n        {detail}" if detail else ""),
                  flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
        for model in _MODEL:
            shutil.rmtree(model.parent, ignore_errors=True)
    print(f"\n{len(cases)} cases: {counts['PASS']} PASS, {counts['FAIL']} FAIL, {counts['SKIP']} SKIP "
          f"({time.monotonic() - started:.0f} s)")
    return 1 if counts["FAIL"] else 0


if __name__ == "__main__":
    sys.exit(main())
