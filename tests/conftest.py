"""Shared fixtures: the embedded SmolLM2 model (converted once) and tiny random models.

Everything runs offline. SmolLM2's tokenizer and the converted SmolLM2 folder are cached under
results/test-cache/ (ignored by git), so only the first test session pays the GGUF conversions
(~6.5 s for the tokenizer, ~12 s for the whole model, each in a fresh process). Every Snakemake run of the
suite works in a temporary directory (:func:`snakemake` refuses the checkout), so what `make demo`
left in the checkout's results/ changes no test.

Scheduling (`make test` runs `pytest -n 2 --dist loadfile --no-loadscope-reorder`): the tests of a
module stay on one worker (module fixtures run once), and the modules with workflow runs start
first, longest first, so that neither worker is left with a long run at the end.
"""

from __future__ import annotations

import fcntl
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# torch's OpenMP threads spin-wait for each other by default: when the other test worker (or a
# Snakemake job) holds a core, every 2-thread op waits for a descheduled thread. With both cores
# busy the gsm8k identity test took 129 s, 9 s on the idle machine (21 s with passive threads, 23 s
# with one thread); with one core busy a SmolLM2 test 13.9 s (7.1 s passive). Passive threads sleep instead
# of spinning. Set before anything imports torch.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# The suite's Snakemake jobs are many and small: each forks from a warm interpreter
# (headloc.workflow.warm) instead of importing torch, transformers and lm-eval itself.
os.environ.setdefault("HEADLOC_WARM_JOBS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = (REPO / ".." / "shared" / "data").resolve()
CACHE = REPO / "results" / "test-cache"
SMOLLM2 = "smollm2-135m-instruct"  # the embedded model (headloc.model.loading.EMBEDDED)
PROFANITY_CSV = SHARED_DATA / "profanity" / "profanity_en.csv"
# Each Snakemake run of a test uses its worker's share of the cores: 2 xdist workers on 2 cores, 1 each.
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
CORES = str(max(1, (os.cpu_count() or 1) // WORKERS))

# Modules that run workflows, longest first (measured with --durations); the rest follow in
# collection order.
LONGEST_FIRST = (
    "tests/workflow/test_reliability.py", "tests/workflow/test_staleness.py", "tests/workflow/test_methods.py",
    "tests/workflow/test_workflow.py", "tests/workflow/test_own_task.py", "tests/workflow/test_portable.py",
    "tests/workflow/test_smollm2.py", "tests/workflow/test_lower_is_better.py",
)


def pytest_sessionstart(session):
    """CI sets HEADLOC_REQUIRE_DATA=1: a missing offline data mirror fails the run instead of
    turning the tests that read it into skips."""
    if os.environ.get("HEADLOC_REQUIRE_DATA") == "1" and not SHARED_DATA.is_dir():
        raise pytest.UsageError(f"HEADLOC_REQUIRE_DATA=1 but the offline data mirror {SHARED_DATA} is missing")


def accuracy_demo() -> dict:
    """config/demo.yaml with one stratified compressed-sensing search scored by each task's own
    metric (what the demo ran until cs_adaptive on continuous scores became its default). The unit
    tests of the plan and config checks start from it: they pin search ids and messages of that
    shape, which do not depend on the demo's choice; the demo itself goes through the workflow's checks in
    tests/unit/test_config_docs.py and test_task_checks.py."""
    config = yaml.safe_load((REPO / "config/demo.yaml").read_text())
    config["search"]["methods"] = ["cs_stratified"]
    config["search"]["n_masks"] = 100  # the schema's default, written out as it once was in the demo
    config["search"]["chunks"] = 2  # the demo's chunks while its method scored masks in chunks
    config["validation"].pop("method", None)
    for task in config["tasks"].values():
        task.pop("id_task", None)
        task.pop("id_metric", None)
    return config


def module_of(item) -> str:
    return item.nodeid.split("::")[0]


def pytest_collection_modifyitems(config, items):
    """The modules of LONGEST_FIRST first, in its order (xdist hands out modules in this order)."""
    rank = {module: i for i, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(module_of(item), len(rank)))  # stable: collection order otherwise


def cached(name: str, make) -> Path:
    """``CACHE/name``, made by ``make(folder)`` on first use: pytest-xdist workers take a lock, one
    makes it, the others wait and read it. ``done``, written last, marks it whole (a tokenizer's
    ``save_pretrained`` writes file by file; ``convert_gguf`` renames a finished folder into place)."""
    out = CACHE / name
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (out / "done").is_file():
            make(out)
            (out / "done").touch()
    return out


def smollm2_gguf() -> Path:
    from headloc.model.loading import resolve_source

    return Path(resolve_source(SMOLLM2).location)


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """The embedded SmolLM2-135M-Instruct as an ordinary checkpoint folder."""
    from headloc.model.loading import convert_gguf

    return cached(SMOLLM2, lambda out: convert_gguf(str(smollm2_gguf()), str(out)))


@pytest.fixture(scope="session")
def tokenizer():
    """SmolLM2's tokenizer (with its chat template), shared by the tiny test models. Read from the
    GGUF on its own (~6.5 s the first time, cached): the model's conversion (~12 s) waits for the
    tests that load SmolLM2, so that a clean clone's two workers do not both wait for it at the start."""
    from transformers import AutoTokenizer

    from headloc.model.loading import gguf_tokenizer

    folder = cached("smollm2-tokenizer", lambda out: gguf_tokenizer(smollm2_gguf()).save_pretrained(out))
    return AutoTokenizer.from_pretrained(folder)


def tiny_llama(vocab_size: int, seed: int = 0):
    """A 2-layer, 4-head random Llama (2 KV heads): fast, but a real transformers model."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
        bos_token_id=1, eos_token_id=2, pad_token_id=2,
    )
    return LlamaForCausalLM(config).eval()


def zeroed_copy(model, mask):
    """The reference for an ablation: a copy of a Llama ``model`` with the ablated heads' (``mask``,
    1 = ablated, flat over layers x heads) input columns of the output projection set to zero."""
    import copy

    import numpy as np

    reference = copy.deepcopy(model)
    n_heads = model.config.num_attention_heads
    for index in np.flatnonzero(mask):
        layer, head = divmod(int(index), n_heads)
        # the tiny models are Llamas: their output projection, named here, not found by output_projections
        weight = reference.get_submodule(f"model.layers.{layer}.self_attn.o_proj").weight.data
        width = weight.shape[1] // n_heads
        weight[:, head * width:(head + 1) * width] = 0
    return reference


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, tokenizer) -> Path:
    """A tiny random Llama saved with SmolLM2's tokenizer: loads like any checkpoint folder."""
    out = tmp_path_factory.mktemp("tiny-llama")
    tiny_llama(len(tokenizer)).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def snakemake(*args, cwd=REPO, check=True, timeout=1200):
    """Run the workflow's Snakefile in a subprocess (offline); raise with its output on failure.

    It never works in the checkout: give ``--directory`` or a ``cwd`` outside it, so that no test
    depends on what the checkout's results/ holds.
    """
    if Path(cwd).resolve() == REPO and "--directory" not in args and "-d" not in args:
        raise ValueError(f"snakemake {' '.join(args)}: tests run Snakemake in their own directory; "
                         "pass --directory or cwd")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    command = [sys.executable, "-m", "snakemake", "-s", str(REPO / "Snakefile"), *args]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-4000:]}"
        )
    return result


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table of a dry run: rule -> jobs, and its ``total``."""
    table = output[output.index("Job stats:"):].split("\n\n")[0]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.MULTILINE)}
