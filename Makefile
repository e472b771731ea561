# Two commands do all the set-up: `make demo` (a real code apply on the demo models) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH  ?= torch==2.13.0
# llama-cpp-python compiles from source; the multimodal library is not needed.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: install demo test test-fast lint clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch pinned to the CPU build this machine kind keeps on disk (a bare range pulls CUDA, GBs).
	$(BIN)/python -m pip install --progress-bar off -e '.[llamacpp,dev,torch,onnx,export,cluster]' $(TORCH)
	touch $(STAMP)

# The speculative model path (--engine model); its last stderr line says what `auto` (the default)
# would have done with this snippet.
demo: install
	$(BIN)/edge-spec run --engine model \
	  --original examples/apply/original.py --update examples/apply/update.py \
	  --instruction "$$(cat examples/apply/instruction.txt)"

test: install
	$(BIN)/python -m pytest

test-fast: install
	$(BIN)/python -m pytest -m "not slow"

# ruff, then the architecture: import-linter's layer contract, mypy on the core, no hidden imports
# (tests/test_architecture.py; the test command runs it too).
lint: install
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_architecture.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
