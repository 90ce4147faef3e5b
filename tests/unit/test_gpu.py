"""GPUs without a GPU: the memory estimate against what torch allocates on the CPU, the parse-time
plan's warnings, ``batch_size: auto``, and one GPU per job (file locks taken by real processes and
by real concurrent Snakemake jobs, with CUDA_VISIBLE_DEVICES naming GPUs this machine lacks)."""

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


# --------------------------------------------------------------------------- one GPU per job

HOLD = textwrap.dedent("""
    import sys, time
    from headloc.model.gpus import claim_gpu
    claim = claim_gpu()
    print(claim.gpu if claim else None, flush=True)
    time.sleep(float(sys.argv[1]))
""")


def holder(env, seconds):
    return subprocess.Popen([sys.executable, "-c", HOLD, str(seconds)], env=env, stdout=subprocess.PIPE, text=True)


@pytest.fixture
def fake_gpus(tmp_path):
    return {**os.environ, "CUDA_VISIBLE_DEVICES": "3,GPU-uuid-7", "HEADLOC_GPU_LOCKS": str(tmp_path / "locks")}


def test_each_process_gets_its_own_gpu_and_a_killed_one_frees_it(fake_gpus):
    first, second = holder(fake_gpus, 60), holder(fake_gpus, 60)
    try:
        claimed = {first.stdout.readline().strip(), second.stdout.readline().strip()}
        assert claimed == {"3", "GPU-uuid-7"}
        third = holder(fake_gpus, 0)  # waits: both GPUs are held
        time.sleep(3)
        assert third.poll() is None
        first.send_signal(signal.SIGKILL)  # no clean-up runs: the kernel drops the lock
        assert third.stdout.readline().strip() in claimed
        assert third.wait(timeout=30) == 0
    finally:
        for process in (first, second):
            process.kill()
            process.wait()


def test_slurm_and_machines_without_gpus_claim_nothing(tmp_path):
    environ = {"SLURM_JOB_ID": "42", "CUDA_VISIBLE_DEVICES": "1", "HEADLOC_GPU_LOCKS": str(tmp_path)}
    assert gpus.claim_gpu(environ=environ) is None and environ["CUDA_VISIBLE_DEVICES"] == "1"
    assert gpus.claim_gpu(environ={"CUDA_VISIBLE_DEVICES": "", "HEADLOC_GPU_LOCKS": str(tmp_path)}) is None
    environ = {"CUDA_VISIBLE_DEVICES": "5", "HEADLOC_GPU_LOCKS": str(tmp_path)}
    assert gpus.claim_gpu(spread=True, environ=environ) is None  # device_map: every visible GPU
    claim = gpus.claim_gpu(environ=environ)
    assert claim.gpu == "5" and environ["CUDA_VISIBLE_DEVICES"] == "5"
    claim.release()


SNAKEFILE = textwrap.dedent("""
    rule all:
        input: expand("done/{{job}}.txt", job=range(6))

    rule job:
        output: "done/{{job}}.txt"
        log: "logs/{{job}}.log"
        resources: gpu=1
        shell: "{python} {script} {{log}} {{output}}"
""")
JOB = textwrap.dedent("""
    import sys, time
    from headloc.io import log_to_file
    from headloc.model.gpus import claim_gpu
    log = log_to_file(sys.argv[1])
    claim = claim_gpu(log, wait=0.2)
    log.info("start")
    time.sleep(1.5)
    log.info("end")
    open(sys.argv[2], "w").write(claim.gpu)
""")


def test_concurrent_snakemake_jobs_never_share_a_gpu(tmp_path, fake_gpus):
    """Six jobs of gpu=1 on 4 cores with gpu=2: Snakemake runs two at a time; each holds its own."""
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "Snakefile").write_text(SNAKEFILE.format(python=sys.executable, script=tmp_path / "job.py"))
    subprocess.run([sys.executable, "-m", "snakemake", "--cores", "4", "--resources", "gpu=2", "--quiet"],
                   cwd=tmp_path, env=fake_gpus, check=True, capture_output=True, timeout=300)
    spans = []
    for log in sorted((tmp_path / "logs").glob("*.log")):
        text = log.read_text()
        gpu = re.search(r"GPU: claimed (\S+) of 3,GPU-uuid-7", text).group(1)
        start, end = (datetime.strptime(re.search(rf"^(\S+ \S+) INFO headloc: {word}$", text, re.M).group(1),
                                        "%Y-%m-%d %H:%M:%S,%f") for word in ("start", "end"))
        spans.append((start, end, gpu))
    assert len(spans) == 6 and {gpu for *_, gpu in spans} == {"3", "GPU-uuid-7"}
    overlapping = [(a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]]
    assert overlapping, "Snakemake ran the jobs concurrently"
    assert all(a[2] != b[2] for a, b in overlapping)


def test_every_evaluating_rule_claims_its_gpu_first():
    """Every rule that holds a gpu slot runs a script that claims a GPU right after opening its log."""
    rules = "\n".join(path.read_text() for path in (REPO / "rules").glob("*.smk"))
    scripts = set()
    for body in re.split(r"\nrule ", rules):
        if re.search(r"\bgpu=1\b", body):
            scripts.add(re.search(r'script:\s*"\.\./scripts/(\S+\.py)"', body).group(1))
    assert scripts == {"score_masks.py", "gradient_search.py", "sequential_search.py", "score_top_heads.py",
                       "validate_headset.py"}
    for script in scripts:
        lines = (REPO / "scripts" / script).read_text().splitlines()
        opened = next(i for i, line in enumerate(lines) if line.startswith("log = log_to_file("))
        assert lines[opened + 1].startswith("claim_gpu(log, spread="), script


def test_every_rule_holding_a_gpu_gets_the_gpu_partition_on_slurm():
    """profiles/slurm sends each gpu=1 rule to HEADLOC_GPU_PARTITION (sequential_search and
    score_stage2_masks once went to the default partition with a GPU request: the rules ask for the
    GPU, the profile names the partition, rule by rule, derived rules too)."""
    import yaml

    rules = "\n".join(path.read_text() for path in (REPO / "rules").glob("*.smk"))
    holding = {body.split(":", 1)[0].strip() for body in re.split(r"\nrule ", rules)[1:] if re.search(r"\bgpu=1\b", body)}
    holding |= {derived for base, derived in re.findall(r"use rule (\w+) as (\w+)", rules) if base in holding}
    profile = yaml.safe_load((REPO / "profiles/slurm/config.yaml").read_text())["set-resources"]
    partitioned = {rule for rule, values in profile.items() if "HEADLOC_GPU_PARTITION" in values.get("slurm_partition", "")}
    assert holding == partitioned


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
