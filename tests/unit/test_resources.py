"""headloc.workflow.resources: the evaluation jobs' memory and time, without Snakemake
(tests/workflow/test_reliability.py runs the same callables through rules/resources.smk)."""

import pytest

from headloc.workflow.resources import (
    EVAL_RUNTIME,
    UNKNOWN_MODEL_MEM_MB,
    EvalResources,
    grow,
    positive_int_env,
    weights_mem_mb,
)

CONFIG = {"models": {
    "demo": {"source": "smollm2-135m-instruct"},  # the embedded GGUF, float32 by default
    "llama": {"source": "no-such-org/Llama-3.1-8B-Instruct", "dtype": "bfloat16"},  # sized by its name
}}


def test_memory_is_sized_from_the_model():
    resources = EvalResources(CONFIG, environ={})
    assert resources.mem_mb("demo", 1) == 6000  # 4000 MB + 1.5 x 135M parameters x 4 bytes, rounded up
    assert resources.mem_mb("llama", 1) == 28000  # 4000 MB + 1.5 x 8B x 2 bytes
    assert resources.mem_mb(None, 1) == resources.mem_mb("unknown", 1) == UNKNOWN_MODEL_MEM_MB
    assert resources.runtime(1) == EVAL_RUNTIME


def test_retries_grow_linearly_up_to_the_caps():
    resources = EvalResources(CONFIG, environ={"HEADLOC_MAX_MEM_MB": "15000", "HEADLOC_MAX_RUNTIME": "300"})
    assert [resources.mem_mb("demo", attempt) for attempt in (1, 2, 3)] == [6000, 12000, 15000]
    assert [resources.runtime(attempt) for attempt in (1, 2, 3)] == [120, 240, 300]


def test_the_environment_replaces_the_estimate_and_is_read_on_every_call():
    environ = {"HEADLOC_EVAL_MEM_MB": "64000", "HEADLOC_EVAL_RUNTIME": "30"}
    resources = EvalResources(CONFIG, environ=environ)
    assert (resources.mem_mb("demo", 2), resources.runtime(2)) == (128000, 60)
    environ["HEADLOC_EVAL_MEM_MB"] = ""  # empty: unset
    assert resources.mem_mb("demo", 1) == 6000


@pytest.mark.parametrize("value", ["0", "-5", "lots", "1.5"])
def test_a_bad_environment_variable_is_refused(value):
    with pytest.raises(ValueError, match=f"environment variable HEADLOC_MAX_MEM_MB={value!r}: expected a positive"):
        EvalResources(CONFIG, environ={"HEADLOC_MAX_MEM_MB": value}).mem_mb("demo", 1)


def test_the_pieces():
    assert positive_int_env("X", {}) is None and positive_int_env("X", {"X": "7"}) == 7
    assert grow(100, 3, None) == 300 and grow(100, 3, 250) == 250
    assert weights_mem_mb(1_000_000_000, "float16") == 7000  # 4000 + 1.5 x 2000 MB
    assert weights_mem_mb(1_000_000_000, None) == weights_mem_mb(1_000_000_000, "float32") == 10000
