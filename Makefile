# The two commands of the README: `make demo` and `make test`. Both build .venv first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench models

$(BIN)/.torch:
	$(PYTHON) -m venv $(VENV)
	# PyTorch pinned: on this project's machines pip resolves 2.13.0 to the CPU build (torch-2.13.0+cpu, from the
	# local wheel folder pip is set up with); an unpinned torch, or pip on plain PyPI, pulls a multi-GB CUDA build.
	$(BIN)/pip install --quiet torch==2.13.0
	touch $@

# The package with one extra (pyproject.toml): .installed-demo is the core and matplotlib, .installed-dev
# every extra but ray and the test tools.
$(BIN)/.installed-%: pyproject.toml Makefile | $(BIN)/.torch
	$(BIN)/pip install --quiet -e '.[$*]'
	touch $@

demo: $(BIN)/.installed-demo
	$(BIN)/elmo demo --out demo.png

test: $(BIN)/.installed-dev
	# The service's page is tested in a real headless browser: Debian's chromium (CI runs as root).
	command -v chromium >/dev/null || (echo "installing Debian's chromium system-wide (apt-get) for the browser test" \
		&& apt-get update -qq && apt-get install -y -qq chromium >/dev/null) \
		|| echo "could not install chromium: the browser test will be skipped"
	$(BIN)/ruff check src tests benchmarks scripts
	$(BIN)/mypy
	$(BIN)/python -m pytest

# Slow tests and the benchmarks (minutes to an hour; not part of `make test`).
bench: $(BIN)/.installed-dev
	$(BIN)/python -m pytest -m slow
	$(BIN)/python benchmarks/inference_speed.py
	$(BIN)/python benchmarks/long_inputs.py
	$(BIN)/python benchmarks/train_throughput.py
	$(BIN)/python benchmarks/serve_load.py

# The shipped models: corpora from registry packages, vocabularies, training, shipping into src/elmo/models
# (softmax included, each directory at most 40 MB, model card). 40,000 steps of 64 x 20 tokens each, both at once,
# one thread each: 8-9 hours on 2 idle CPU cores at the ~1,700 tokens/s each measured, 15-20 beside other work
# (docs/data.md).
models: $(BIN)/.installed-dev
	# wudao-dict-plus ships its Youdao examples zstd-compressed (or Debian's zstd program does it)
	$(BIN)/pip install --quiet 'zstandard>=0.22'
	OMP_NUM_THREADS=1 $(BIN)/python scripts/make_models.py --models en & en=$$!; \
	OMP_NUM_THREADS=1 $(BIN)/python scripts/make_models.py --models zh; zh=$$?; \
	wait $$en && exit $$zh
