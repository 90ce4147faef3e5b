"""GPUs without a GPU: the memory estimate against what torch allocates on the CPU, the parse-time
plan's warnings, ``batch_size: auto``, the out-of-memory back-off, and one GPU per job (file locks
taken by real processes started as the workflow's evaluating scripts start, with CUDA_VISIBLE_DEVICES
naming GPUs this machine lacks; concurrent Snakemake jobs: tests/workflow/test_methods.py)."""

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from datetime import datetime
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM

from headloc.engine.backoff import RowBudget
from headloc.model import gpus
from headloc.model.memory import GIB, Pass, Shape, estimate, resolve_rows, rows_that_fit
from headloc.workflow.gpu_plan import generation_tokens, plan_warnings

REPO = Path(__file__).resolve().parents[2]
SMALL = dict(vocab_size=320, hidden_size=64, intermediate_size=96, num_hidden_layers=3, num_attention_heads=8,
             num_key_value_heads=2)
# Llama-3.1-8B's config.json, sizes only
LLAMA_8B = dict(model_type="llama", hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                num_attention_heads=32, num_key_value_heads=8, vocab_size=128256, tie_word_embeddings=False)


# --------------------------------------------------------------------------- the estimate


@pytest.mark.parametrize("config_class, model_class, tied", [
    (LlamaConfig, LlamaForCausalLM, False), (LlamaConfig, LlamaForCausalLM, True),
    (MistralConfig, MistralForCausalLM, False)])
def test_parameters_are_what_transformers_builds(config_class, model_class, tied):
    config = config_class(**SMALL, tie_word_embeddings=tied)
    built = sum(p.numel() for p in model_class(config).parameters())
    assert Shape.of(config.to_dict()).parameters == built


def test_the_kv_cache_estimate_is_the_cache_transformers_keeps():
    config = LlamaConfig(**SMALL)
    model = LlamaForCausalLM(config).eval()
    rows, context, generation = 3, 11, 5
    with torch.no_grad():
        cache = model(torch.randint(0, 320, (rows, context + generation)), use_cache=True).past_key_values
    kept = sum(layer.keys.numel() + layer.values.numel() for layer in cache.layers) * 4
    assert estimate(Shape.of(config.to_dict()), "float32", Pass(rows, context, generation)).kv_cache == kept


def test_parts_and_rows_that_fit():
    shape = Shape.of(LLAMA_8B)
    plain = estimate(shape, "bfloat16", Pass(64, 1024))
    assert plain.weights == shape.parameters * 2 == 16_060_522_496
    assert plain.logits == 2 * 64 * 1024 * 128256 * 2  # every position's logits and their log-softmax
    assert plain.kv_cache == 0  # log-likelihood passes keep no cache
    grouped = estimate(shape, "bfloat16", Pass(64, 1024, kept=8))
    assert grouped.logits == plain.logits // 128
    memory = 80 * GIB
    fits = rows_that_fit(shape, "bfloat16", Pass(1, 1024), memory)
    assert estimate(shape, "bfloat16", Pass(fits, 1024)).total <= memory < estimate(shape, "bfloat16", Pass(fits + 1, 1024)).total
    assert rows_that_fit(shape, "float32", Pass(1, 1024), 16 * GIB) == 0  # 32 GB of float32 weights


def test_batch_size_auto():
    assert resolve_rows("auto", "cuda") == resolve_rows("auto", "cuda:1") == 512
    assert resolve_rows("auto", "cpu") == 16 and resolve_rows(7, "cuda") == 7
    for bad in (0, "big", True, 2.5):
        with pytest.raises(ValueError, match=re.escape(f"batch_size must be a positive integer or 'auto', got {bad!r}")):
            resolve_rows(bad, "cuda")


# --------------------------------------------------------------------------- the plan at parse time


def model_folder(tmp_path, sizes):
    folder = tmp_path / "model"
    folder.mkdir(exist_ok=True)
    (folder / "config.json").write_text(json.dumps(sizes))
    (folder / "model.safetensors").write_bytes(b"")
    return str(folder)


def config_of(source, **spec):
    return {"models": {"big": {"source": source, "dtype": "bfloat16", "device": "cuda", "masks_per_pass": 8, **spec}}}


def test_a_model_larger_than_the_gpu_is_named_with_what_would_work(tmp_path):
    source = model_folder(tmp_path, LLAMA_8B)
    (warning,) = plan_warnings(config_of(source, batch_size=64), {}, memory=12 * GIB)
    assert warning.startswith("models.big: on a GPU of 12 GiB, assuming 2048-token contexts: the model does not "
                              "fit (15.") and "set device_map: auto" in warning
    assert plan_warnings(config_of(source, batch_size=64, device_map="auto"), {}, memory=12 * GIB) == []


def test_a_batch_too_large_names_the_rows_that_fit(tmp_path):
    source = model_folder(tmp_path, LLAMA_8B)
    yamls = {"gsm8k": {"output_type": "generate_until", "generation_kwargs": {"max_gen_toks": 256}}}
    fits = rows_that_fit(Shape.of(LLAMA_8B), "bfloat16", Pass(1, 2048, 256, 64), 80 * GIB)
    (warning,) = plan_warnings(config_of(source, batch_size=512), yamls, memory=80 * GIB)
    assert f"batch_size 512 needs about" in warning and f"about {fits} rows fit" in warning
    assert f"batch_size {fits} or auto avoids that" in warning
    assert plan_warnings(config_of(source, batch_size=fits), yamls, memory=80 * GIB) == []
    assert plan_warnings(config_of(source, batch_size="auto"), yamls, memory=80 * GIB) == []


def test_cpu_models_ask_for_no_gpu(tmp_path, monkeypatch):
    def no_call():
        raise AssertionError("GPU memory asked for a CPU-only config")

    monkeypatch.setattr("headloc.workflow.gpu_plan.gpu_memory_bytes", no_call)
    source = model_folder(tmp_path, LLAMA_8B)
    assert plan_warnings(config_of(source, device="cpu", batch_size=512), {}) == []
    assert generation_tokens({"a": {"output_type": "multiple_choice"}, "b": {"output_type": "generate_until"}}) == 256


def test_a_gpu_model_without_readable_sizes_gets_a_line_saying_no_plan_was_made(tmp_path):
    uncached = "nobody-here/not-a-model-7B"  # a hub id no cache holds
    (hub,) = plan_warnings(config_of(uncached, batch_size=512), {}, memory=80 * GIB)
    assert hub == ("models.big: no memory plan made: its config.json is not in the local Hugging Face cache "
                   f"(hub id {uncached}); its jobs still halve their rows per pass when they run out of GPU memory")
    (gguf,) = plan_warnings(config_of("smollm2-135m-instruct", batch_size=512), {}, memory=80 * GIB)
    assert gguf.startswith("models.big: no memory plan made: a GGUF file's sizes are read only when")
    source = model_folder(tmp_path, {"model_type": "llama"})
    (sizeless,) = plan_warnings(config_of(source, batch_size=512), {}, memory=80 * GIB)
    assert sizeless.startswith(f"models.big: no memory plan made: {source}/config.json does not give its sizes")
    assert plan_warnings(config_of(uncached, device="cpu"), {}, memory=80 * GIB) == []  # no GPU, no plan to make


# --------------------------------------------------------------------------- out-of-memory back-off


def failing_above(rows_that_fit, error):
    """A step that raises ``error`` on passes of more than ``rows_that_fit`` rows; records every try."""
    tried = []

    def step(rows):
        tried.append(rows)
        if rows > rows_that_fit:
            raise error
        return f"done at {rows}"

    return step, tried


@pytest.mark.parametrize("error", [
    torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"),
    RuntimeError("CUDA error: out of memory"),  # a kernel's allocation failure
    RuntimeError("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"),
])
def test_out_of_memory_errors_halve_the_rows(error, caplog):
    step, tried = failing_above(5, error)
    budget = RowBudget(16)
    with caplog.at_level("WARNING", logger="headloc"):
        assert budget.run(step) == "done at 4"
    assert tried == [16, 8, 4] and budget.rows == 4 and budget.halvings == 2
    assert "out of memory at 8 rows per pass" in caplog.text and "retrying the same work with 4 rows" in caplog.text


def test_other_errors_are_raised_as_they_are():
    step, tried = failing_above(5, RuntimeError("CUDA error: device-side assert triggered"))
    with pytest.raises(RuntimeError, match="^CUDA error: device-side assert triggered$"):
        RowBudget(16).run(step)
    assert tried == [16]


def test_out_of_memory_at_one_row_names_the_remedies():
    original = RuntimeError("CUDA error: out of memory\nCUDA kernel errors might be reported asynchronously")
    step, tried = failing_above(0, original)
    budget = RowBudget(4)
    with pytest.raises(torch.OutOfMemoryError) as raised:
        budget.run(step)
    assert tried == [4, 2, 1] and raised.value.__cause__ is original
    assert str(raised.value) == (
        "out of memory at 1 row per pass, the fewest allowed (CUDA error: out of memory): the model and one "
        "pass do not fit on this device. Spread the model over several GPUs and the CPU (device_map: auto), "
        "load it in a smaller dtype (bfloat16 instead of float32), or score fewer masks per pass (masks_per_pass)")


# --------------------------------------------------------------------------- one GPU per job

# an evaluating job's start, as the workflow's scripts make it: the claim is not kept by the caller
HOLD = textwrap.dedent("""
    import os, sys, time, torch
    from headloc.workflow.jobs import start_evaluating_job
    start_evaluating_job(sys.argv[1], 3, spread=sys.argv[3] == "spread")
    print(os.environ.get("CUDA_VISIBLE_DEVICES"), torch.get_num_threads(), flush=True)
    time.sleep(float(sys.argv[2]))
""")


def holder(env, seconds, log, placement="one GPU"):
    return subprocess.Popen([sys.executable, "-c", HOLD, str(log), str(seconds), placement], env=env,
                            stdout=subprocess.PIPE, text=True)


def logged(log: Path, text: str, timeout: float = 120) -> bool:
    """Whether ``text`` appears in ``log`` within ``timeout`` seconds (a job's start-up takes seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if log.is_file() and text in log.read_text():
            return True
        time.sleep(0.2)
    return False


def seen(process) -> str:
    """The CUDA_VISIBLE_DEVICES a started job printed, after checking its CPU threads."""
    gpu, threads = process.stdout.readline().split()
    assert threads == "3"
    return gpu


@pytest.fixture
def fake_gpus(tmp_path):
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "3,GPU-uuid-7", "HEADLOC_GPU_LOCKS": str(tmp_path / "locks")}


def test_each_job_gets_its_own_gpu_and_a_killed_one_frees_it(fake_gpus, tmp_path):
    first, second = holder(fake_gpus, 60, tmp_path / "1.log"), holder(fake_gpus, 60, tmp_path / "2.log")
    try:
        claimed = {seen(first), seen(second)}
        assert claimed == {"3", "GPU-uuid-7"}  # each job sees only its own GPU
        for log in ("1.log", "2.log"):
            assert re.search(r"INFO headloc: GPU: claimed (3|GPU-uuid-7) of 3,GPU-uuid-7 \(pid",
                             (tmp_path / log).read_text())
        third = holder(fake_gpus, 0, tmp_path / "3.log")  # waits: both GPUs are held
        assert logged(tmp_path / "3.log", "GPU: all of 3,GPU-uuid-7 are held by other jobs; waiting")
        time.sleep(1)
        assert third.poll() is None
        first.send_signal(signal.SIGKILL)  # no clean-up runs: the kernel drops the lock
        assert seen(third) in claimed
        assert third.wait(timeout=30) == 0
    finally:
        for process in (first, second):
            process.kill()
            process.wait()


def test_a_claim_narrows_cuda_visible_devices_and_is_held_once(tmp_path):
    environ = {"CUDA_VISIBLE_DEVICES": "5,6", "HEADLOC_GPU_LOCKS": str(tmp_path)}
    assert gpus.claim_gpu(environ=environ).gpu == "5" and environ["CUDA_VISIBLE_DEVICES"] == "5"
    again = gpus.claim_gpu(environ={"CUDA_VISIBLE_DEVICES": "5,6", "HEADLOC_GPU_LOCKS": str(tmp_path)})
    assert again.gpu == "5"  # the same process asks again: the GPU it holds, not a second one
    other = holder({**os.environ, "CUDA_VISIBLE_DEVICES": "5,6", "HEADLOC_GPU_LOCKS": str(tmp_path)}, 0,
                   tmp_path / "other.log")
    assert seen(other) == "6" and other.wait(timeout=30) == 0  # 5 is still held by this process


@pytest.mark.parametrize("listed, claimable", [("-1", []), ("-1,0", []), ("1,-1,0", ["1"]), (" 2 , 3", ["2", "3"]), ("", [])])
def test_a_negative_index_hides_itself_and_every_gpu_after_it(listed, claimable, tmp_path):
    """CUDA_VISIBLE_DEVICES=-1 hides every GPU: a job claims none and stays on the CPU; CUDA stops
    reading at an invalid index, so a job never claims a GPU CUDA would not show it."""
    environ = {"CUDA_VISIBLE_DEVICES": listed, "HEADLOC_GPU_LOCKS": str(tmp_path)}
    assert gpus.visible_gpus(environ) == claimable
    claim = gpus.claim_gpu(environ=environ)
    assert (claim.gpu if claim else None) == (claimable[0] if claimable else None)
    assert environ["CUDA_VISIBLE_DEVICES"] == (claimable[0] if claimable else listed)


def test_machines_without_gpus_and_jobs_spread_by_device_map_claim_nothing(tmp_path):
    assert gpus.claim_gpu(environ={"CUDA_VISIBLE_DEVICES": "", "HEADLOC_GPU_LOCKS": str(tmp_path)}) is None
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "5,6", "HEADLOC_GPU_LOCKS": str(tmp_path / "locks")}
    job = holder(env, 0, tmp_path / "job.log", "spread")
    assert seen(job) == "5,6" and job.wait(timeout=30) == 0  # device_map: every visible GPU
    assert "GPU: device_map spreads the model over every visible GPU (CUDA_VISIBLE_DEVICES=5,6); none claimed" \
        in (tmp_path / "job.log").read_text()
    assert not (tmp_path / "locks").exists()


def test_a_gpu_slurm_chose_is_kept_unlocked(tmp_path, monkeypatch):
    """One visible GPU is Slurm's choice (with cgroups every job may see its GPU as 0: locking "0"
    would make jobs on different GPUs wait); no CUDA_VISIBLE_DEVICES is no GPU, not the machine's."""
    monkeypatch.setattr(gpus, "machine_gpu_count", lambda: 4)
    for visible in ({"CUDA_VISIBLE_DEVICES": "0"}, {}):
        environ = {"SLURM_JOB_ID": "42", "HEADLOC_GPU_LOCKS": str(tmp_path), **visible}
        assert gpus.claim_gpu(environ=environ) is None
        assert environ.get("CUDA_VISIBLE_DEVICES") == visible.get("CUDA_VISIBLE_DEVICES")
    assert not any(tmp_path.iterdir())


def test_jobs_inside_a_slurm_allocation_share_out_its_gpus(tmp_path):
    """A local run inside an allocation of two GPUs: its jobs claim them one each, the next waits;
    a job of another allocation on the node (its GPUs also numbered 0,1) does not wait for them."""
    def allocation(job):
        return {**os.environ, "SLURM_JOB_ID": job, "CUDA_VISIBLE_DEVICES": "0,1", "HEADLOC_GPU_LOCKS": str(tmp_path)}

    first, second = holder(allocation("41"), 60, tmp_path / "1.log"), holder(allocation("41"), 60, tmp_path / "2.log")
    try:
        assert {seen(first), seen(second)} == {"0", "1"}
        other = holder(allocation("99"), 0, tmp_path / "other.log")
        assert seen(other) == "0" and other.wait(timeout=30) == 0
        third = holder(allocation("41"), 0, tmp_path / "3.log")
        assert logged(tmp_path / "3.log", "GPU: all of 0,1 are held by other jobs; waiting")
        time.sleep(1)
        assert third.poll() is None  # both of allocation 41's GPUs are held
        first.kill()
        assert seen(third) in {"0", "1"} and third.wait(timeout=30) == 0
        assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["slurm-job-41", "slurm-job-99"]
    finally:
        for process in (first, second):
            process.kill()
            process.wait()


# --------------------------------------------------------------------------- device_map


def test_gates_follow_layers_whose_weights_accelerate_offloaded(tmp_path):
    """A layer offloaded to disk holds its weights on "meta" until its forward pass (as the CPU
    layers of a model split over a GPU and the CPU do, seen on an H100): its gate must still act."""
    from accelerate import dispatch_model

    from headloc.model.ablation import ablate_heads

    config = LlamaConfig(**SMALL)
    torch.manual_seed(0)
    whole = LlamaForCausalLM(config).eval()
    split = LlamaForCausalLM(config)
    split.load_state_dict(whole.state_dict())
    placement = {"model.embed_tokens": "cpu", "model.rotary_emb": "cpu", "model.layers.0": "cpu",
                 "model.layers.1": "disk", "model.layers.2": "disk", "model.norm": "cpu", "lm_head": "cpu"}
    split = dispatch_model(split.eval(), device_map=placement, main_device="cpu", offload_dir=str(tmp_path))
    assert split.model.layers[1].self_attn.o_proj.weight.device.type == "meta"
    gate = torch.ones(3, 8)
    gate[1, [2, 5]] = gate[2, 0] = 0
    tokens = torch.randint(0, 320, (2, 9))
    with torch.no_grad():
        with ablate_heads(whole, gate):
            expected = whole(tokens).logits
        with ablate_heads(split, gate):
            got = split(tokens).logits
        assert not torch.allclose(split(tokens).logits, got, atol=1e-3), "the gate changes the output"
    torch.testing.assert_close(got, expected, rtol=0, atol=1e-6)


def test_load_model_with_device_map_auto(tiny_model_dir):
    """accelerate places the model (here, with no GPU, all of it on the CPU), in eval mode."""
    from headloc.model.loading import load_model

    placed, _ = load_model(str(tiny_model_dir), device_map="auto")
    plain, _ = load_model(str(tiny_model_dir))
    assert not placed.training and {p.device.type for p in placed.parameters()} == {"cpu"}
    tokens = torch.randint(0, 100, (2, 6))
    with torch.no_grad():
        torch.testing.assert_close(placed(tokens).logits, plain(tokens).logits, rtol=0, atol=0)
