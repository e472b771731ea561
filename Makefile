# Two commands do all the set-up: `make demo` (a real code apply on the demo models) and `make test`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TORCH  ?= torch==2.13.0
# llama-cpp-python compiles from source; the multimodal library is not needed. ggml's AMX
# kernels (compiled in by -march=native on Intel CPUs that have AMX) crash in llama_decode on
# VMs of this kind, so the build leaves them out; AVX-512 and the rest of -march=native stay.
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF "-DCMAKE_C_FLAGS=$(NO_AMX)" "-DCMAKE_CXX_FLAGS=$(NO_AMX)"
LLAMA_CPP := llama-cpp-python==0.3.36
# True when the installed llama.cpp was built with AMX kernels (a wheel pip cached from a build
# without NO_AMX): that wheel leaves the cache and is rebuilt (and cached) without them.
HAS_AMX := import ctypes, pathlib, sys, llama_cpp; \
  lib = ctypes.CDLL(str(pathlib.Path(llama_cpp.__file__).parent / "lib" / "libggml-cpu.so")); \
  sys.exit(0 if lib.ggml_cpu_has_amx_int8() else 1)
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: install demo test test-fast lint clean

install: $(STAMP)

$(STAMP): pyproject.toml Makefile
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# torch pinned to the CPU build this machine kind keeps on disk (a bare range pulls CUDA, GBs).
	$(BIN)/python -m pip install --progress-bar off -e '.[llamacpp,dev,torch,onnx,export,cluster]' $(TORCH)
	! $(BIN)/python -c '$(HAS_AMX)' || { $(BIN)/python -m pip cache remove 'llama_cpp_python*'; \
	  $(BIN)/python -m pip install --progress-bar off --force-reinstall --no-deps '$(LLAMA_CPP)'; }
	! $(BIN)/python -c '$(HAS_AMX)'
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

# ruff (lint and format), then the architecture: import-linter's layer contract, mypy on the core, no hidden imports
# (tests/test_architecture.py; the test command runs it too).
lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/test_architecture.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
