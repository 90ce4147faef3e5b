"""The contract of ``MaskEvaluator.evaluate_masks``, on both of its paths: one mask at a time
(``masks_per_pass=1``, the plain seam) and masks sharing forward passes (``headloc.engine.grouped``).

Every mask's result equals an independent reference: a copy of the model whose ablated heads'
output-projection columns are zeroed, scored by lm-eval without any gate. Real lm-eval, real models.
"""

import contextlib
import tomllib
from pathlib import Path

import numpy as np
import pytest
import torch
from lm_eval.api.instance import Instance
from transformers import AutoModelForCausalLM

from conftest import zeroed_copy
from headloc.engine import grouped as engine
from headloc.model.ablation import HeadGeometry, masks_to_gate
from headloc.data.datasets import build_docs, write_jsonl
from headloc.engine.evaluation import MaskEvaluator, load_evaluator
from headloc.engine.lm_eval_tasks import TaskSpec
from headloc.engine.lm import AblatedLM

PLAIN = pytest.param(1, id="plain")


@pytest.fixture(scope="module")
def model(tiny_model_dir):
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    folder = tmp_path_factory.mktemp("data")
    files = {}
    for name, n_docs in (("ioi", 7), ("induction", 5), ("capitals", None)):
        docs = build_docs(name, n_docs=n_docs, seed=1)
        files[name] = folder / f"{name}.jsonl"
        write_jsonl(docs if n_docs else docs[:8], files[name])
    return files


def spec(name, data):
    return TaskSpec(f"headloc_{name}").with_data_file(data[name])


def tiny_masks(model):
    """5 masks over the tiny model's 8 heads: the unablated one third, all distinct."""
    total = HeadGeometry.of(model.config).total
    masks = np.zeros((5, total), dtype=np.int8)
    masks[0, [0, 5]] = 1
    masks[1, [1, 2, 7]] = 1
    masks[3, [4]] = 1
    masks[4, [3, 6]] = 1
    return masks


@pytest.fixture(scope="module")
def reference(model, tokenizer, data):
    """task -> one result per tiny mask, each from its zeroed copy scored with no gate at all."""
    return {
        name: [MaskEvaluator(zeroed_copy(model, mask), tokenizer, spec(name, data), batch_size=1).evaluate()
               for mask in tiny_masks(model)]
        for name in ("ioi", "induction")
    }


def loglikelihoods(result):
    return np.array([[choice[0] for choice in s["response"]] for s in result.samples])


def greedy_flags(result):
    return [[choice[1] for choice in s["response"]] for s in result.samples]


def assert_same(got, expected, atol):
    assert len(got) == len(expected)
    for g, s in zip(got, expected):
        assert g.score == s.score
        assert [x["doc_id"] for x in g.samples] == [x["doc_id"] for x in s.samples]
        if isinstance(s.samples[0]["response"], list):  # log-likelihood: (logprob, is_greedy) per choice
            np.testing.assert_allclose(loglikelihoods(g), loglikelihoods(s), rtol=0, atol=atol)
            assert greedy_flags(g) == greedy_flags(s)
        else:  # generation: the same strings
            assert [x["response"] for x in g.samples] == [x["response"] for x in s.samples]
        assert [x["acc"] for x in g.samples] == [x["acc"] for x in s.samples]


def count_rows(model, module=None):
    """Rows of every forward pass (prefill and decoding steps) through ``module`` (the embedding
    layer by default)."""
    rows = []
    module = module or model.get_input_embeddings()
    handle = module.register_forward_pre_hook(lambda m, args: rows.append(args[0].shape[0]))
    return rows, handle


def score(evaluator, masks):
    """``evaluate_masks`` and the rows of each forward pass it made."""
    rows, handle = count_rows(evaluator.lm.model)
    try:
        return evaluator.evaluate_masks(masks, progress=False), rows
    finally:
        handle.remove()


# --------------------------------------------------------------------------- the contract, both paths


@pytest.mark.parametrize("masks_per_pass", [PLAIN, 2, 3, 5])
def test_loglikelihood_results_equal_zeroed_heads(model, tokenizer, data, reference, masks_per_pass):
    masks = tiny_masks(model)
    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=6, masks_per_pass=masks_per_pass)
    assert isinstance(evaluator.lm, engine.GroupedLM) == (masks_per_pass > 1)
    head_rows, handle = count_rows(model, model.get_output_embeddings())
    try:
        results, rows = score(evaluator, masks)
    finally:
        handle.remove()
    assert_same(results, reference["ioi"], atol=1e-5)
    # the masks really act, each on its own rows: every ablated mask differs from the unablated one
    for index in (0, 1, 3, 4):
        assert not np.allclose(loglikelihoods(results[index]), loglikelihoods(results[2]), atol=1e-4)
    # memory bound: never more than batch_size rows, always whole groups of mask copies
    group_sizes = [len(masks[i:i + masks_per_pass]) for i in range(0, len(masks), masks_per_pass)]
    assert max(rows) <= 6
    assert all(any(r % g == 0 for g in group_sizes) for r in rows)
    # through the output layer, one pass per document group of each mask group (IOI's two one-token
    # answers share a pass), and the check of the first group that shared a layer
    checked = getattr(evaluator.lm, "shared", None) is not None and evaluator.lm.shared.checked
    assert len(head_rows) == sum(-(-7 // (6 // g)) for g in group_sizes) + checked
    # masks 2 and 3 (unablated; L1H0 alone) agree on layer 0 and share a group of 2, 3 or 5 masks
    assert checked == (masks_per_pass > 1)
    assert evaluator.lm.gate is None and getattr(evaluator.lm, "group", None) is None


def test_masks_that_agree_longest_share_a_group(model, tokenizer, data):
    """evaluate_masks groups masks that agree on the most leading layers: the two that ablate a
    head of layer 1 alone share layer 0, although the caller put a layer-0 mask between them; the
    results come back in the caller's order."""
    masks = np.zeros((4, HeadGeometry.of(model.config).total), dtype=np.int8)
    masks[[0, 1, 2, 3], [0, 4, 1, 5]] = 1  # layer 0, layer 1, layer 0, layer 1 (4 heads a layer)
    expected = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4).evaluate_masks(masks, progress=False)
    grouped = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=2)
    assert_same(grouped.evaluate_masks(masks, progress=False), expected, atol=1e-5)
    assert grouped.lm.shared.checked and grouped.lm.shared.layers is not None


@pytest.mark.parametrize("masks_per_pass", [PLAIN, 2, 4])
def test_generated_texts_equal_zeroed_heads(model, tokenizer, data, reference, masks_per_pass):
    masks = tiny_masks(model)
    evaluator = MaskEvaluator(model, tokenizer, spec("induction", data), batch_size=4, masks_per_pass=masks_per_pass)
    results, rows = score(evaluator, masks)
    assert_same(results, reference["induction"], atol=0)
    responses = {tuple(x["response"] for x in r.samples) for r in results}
    assert len(responses) > 1, "different masks generate different text"
    assert max(rows) <= 4


@pytest.mark.parametrize("masks_per_pass", [PLAIN, 4])
def test_a_lone_unablated_mask_equals_the_plain_model(model, tokenizer, data, reference, masks_per_pass):
    """A last group of one mask (here the only one), and the all-zero mask, on both paths."""
    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=masks_per_pass)
    (result,) = evaluator.evaluate_masks(tiny_masks(model)[[2]], progress=False)
    assert_same([result], [reference["ioi"][2]], atol=1e-5)
    assert_same([evaluator.evaluate()], [reference["ioi"][2]], atol=1e-5)


@pytest.mark.parametrize("batch_size, masks_per_pass, message", [
    (4, 0, "masks_per_pass must be a positive integer, got 0"),
    (4, 2.0, "masks_per_pass must be a positive integer, got 2.0"),
    (3, 4, "batch_size 3 cannot hold one group of masks_per_pass=4 masks"),
    ("auto", 32, "batch_size 16 cannot hold one group of masks_per_pass=32 masks"),  # auto is 16 on a CPU
])
def test_bad_grouping_is_refused_before_loading(model, tokenizer, data, batch_size, masks_per_pass, message):
    with pytest.raises(ValueError, match=message):
        MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=batch_size, masks_per_pass=masks_per_pass)
    with pytest.raises(ValueError, match=message):
        load_evaluator("/nonexistent/model", spec("ioi", data), batch_size=batch_size, masks_per_pass=masks_per_pass)


# --------------------------------------------------------------------------- out-of-memory back-off


@contextlib.contextmanager
def memory_limit(model, rows: int):
    """CUDA's out-of-memory error for every forward pass of more than ``rows`` rows (no GPU here):
    raised in the embedding layer, as a real one would be somewhere in the pass. Yields the refused
    passes' row counts."""
    refused = []

    def hook(module, args):
        if args[0].shape[0] > rows:
            refused.append(args[0].shape[0])
            raise torch.OutOfMemoryError(f"CUDA out of memory. Tried to allocate {args[0].shape[0]} rows (injected)")

    handle = model.get_input_embeddings().register_forward_pre_hook(hook)
    try:
        yield refused
    finally:
        handle.remove()


@pytest.mark.parametrize("task, masks_per_pass, limit, working, per_pass", [
    ("ioi", 1, 5, 4, 1),           # 16 -> 8 -> 4 rows, one mask at a time (the plain path)
    ("ioi", 4, 5, 4, 4),           # 16 -> 8 -> 4 rows, still 4 masks per pass
    ("ioi", 4, 3, 2, 2),           # 16 -> ... -> 2 rows: the groups split into 2 masks per pass
    ("induction", 4, 3, 2, 2),     # generation: the grouped greedy loop and its prompt pass
])
def test_out_of_memory_halves_the_rows_and_keeps_the_scores(model, tokenizer, data, reference, caplog, task,
                                                            masks_per_pass, limit, working, per_pass):
    masks = tiny_masks(model)
    evaluator = MaskEvaluator(model, tokenizer, spec(task, data), batch_size=16, masks_per_pass=masks_per_pass)
    with caplog.at_level("WARNING", logger="headloc"), memory_limit(model, limit) as refused:
        results, rows = score(evaluator, masks)
    assert refused and evaluator.budget.rows == working and max(rows) <= limit
    assert "out of memory at 16 rows per pass" in caplog.text and f"with {working} rows per pass" in caplog.text
    # the same answers as an evaluator that never ran out: at the working size, exactly ...
    uninterrupted = MaskEvaluator(model, tokenizer, spec(task, data), batch_size=working, masks_per_pass=per_pass)
    assert_same(results, score(uninterrupted, masks)[0], atol=0)
    # ... and as the zeroed-copy reference
    assert_same(results, reference[task], atol=1e-5)


def test_out_of_memory_at_one_row_and_other_errors_are_raised(model, tokenizer, data):
    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=2)
    with memory_limit(model, 0), pytest.raises(torch.OutOfMemoryError, match="injected"):
        evaluator.evaluate_masks(tiny_masks(model)[:2], progress=False)
    assert evaluator.budget.rows == 1

    def broken(module, args):
        raise RuntimeError("a bug, not memory")

    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=2)
    handle = model.get_input_embeddings().register_forward_pre_hook(broken)
    try:
        with pytest.raises(RuntimeError, match="a bug, not memory"):
            evaluator.evaluate_masks(tiny_masks(model)[:2], progress=False)
    finally:
        handle.remove()
    assert evaluator.budget.rows == 4, "only out-of-memory errors shrink the passes"


# --------------------------------------------------------------------------- the engine's fallback


def test_other_library_versions_fall_back_to_one_mask_at_a_time(model, tokenizer, data, reference, monkeypatch):
    monkeypatch.setitem(engine.CHECKED_VERSIONS, "lm-eval", "0.4.12")
    with pytest.warns(UserWarning, match=r"grouped evaluation was checked with lm-eval 0\.4\.12, transformers "
                      r"5\.23\.0, but lm-eval 0\.4\.13 is installed; scoring one mask at a time instead of "
                      r"masks_per_pass=3"):
        evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=6, masks_per_pass=3)
    assert type(evaluator.lm) is AblatedLM and evaluator.masks_per_pass == 1
    results, rows = score(evaluator, tiny_masks(model))
    assert_same(results, reference["ioi"], atol=1e-5)
    assert len(rows) == 5 * 2, "one mask per pass: two passes of 6 and 1 documents per mask"


def test_checked_versions_are_the_pinned_ones():
    """The engine's checked versions are pyproject.toml's pins, and this environment has them."""
    pyproject = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    pins = dict(dep.split("==") for dep in pyproject["project"]["dependencies"])
    assert engine.CHECKED_VERSIONS == {name: pins[name] for name in ("lm-eval", "transformers")}
    assert engine.version_problem() is None


# --------------------------------------------------------------------------- the engine's parts


PROMPTS = [
    "The quick brown fox jumps over the lazy dog and keeps on running",
    "Paris is the capital of",
    "One, two, three, four, five, six, seven, eight, nine, ten, eleven, twelve, thirteen",
    "Hello",
    "A long time ago in a galaxy far, far away",
]


def generation_requests(prompts, until, max_gen_toks):
    kwargs = {"until": list(until), "max_gen_toks": max_gen_toks, "do_sample": False}
    return [Instance("generate_until", {}, (prompt, dict(kwargs)), i) for i, prompt in enumerate(prompts)]


def spanning_stop(tokenizer, tokens, k):
    """A stop string made of the end of generated token k-1 and the start of token k."""
    before, after = tokenizer.decode(tokens[:k]), tokenizer.decode(tokens[:k + 1])
    return before[-2:] + after[len(before):][:2]


@pytest.mark.parametrize("eos_from_text", [False, True])
def test_grouped_greedy_loop_equals_lm_eval_generate(model, tokenizer, eos_from_text):
    """Rows that stop at different steps, on stop strings spanning tokens, on max_gen_toks, on a
    truncated prompt, on EOS (a generated token made the model's EOS): the group's loop (rows
    dropped as they finish) gives lm-eval's texts."""
    # max_length 24: prompts longer than 24 - max_gen_toks tokens are left-truncated
    lm = engine.GroupedLM(pretrained=model, tokenizer=tokenizer, batch_size=6, device="cpu", max_length=24)
    masks = tiny_masks(model)[[0, 2, 4]]
    gate = masks_to_gate(masks, HeadGeometry.of(model.config))
    # the unablated continuations (lm-eval's own generate) choose stop strings spanning tokens
    # that two prompts reach at different steps; the rest run to max_gen_toks
    free = lm.generate_until(generation_requests(PROMPTS, [], 10), disable_tqdm=True)
    tokens = [tokenizer.encode(text, add_special_tokens=False) for text in free]
    until = [spanning_stop(tokenizer, tokens[0], 2), spanning_stop(tokenizer, tokens[2], 6)]
    requests = generation_requests(PROMPTS, until, 10)
    assert len(tokenizer(PROMPTS[2])["input_ids"]) > 24 - 10, "a prompt is truncated"
    saved_eos = model.generation_config.eos_token_id
    if eos_from_text:  # generate stops a row on it and pads; decoding keeps its (non-special) text
        model.generation_config.eos_token_id = [saved_eos, tokens[4][3]]
    try:
        single, grouped, shapes, batch1_shapes = generate_both_ways(lm, requests, gate)
    finally:
        model.generation_config.eos_token_id = saved_eos
    assert grouped == single
    if eos_from_text:
        assert single[1][4] == tokenizer.decode(tokens[4][:4])
    cut = [text for text, full in zip(single[1], free) if text != full]
    assert len(cut) >= 2 and len({len(text) for text in single[1]}) > 2, "stops at different steps"
    assert any(text == full for text, full in zip(single[1], free)), "some rows reach max_gen_toks"
    assert len({tuple(texts) for texts in grouped}) > 1, "the masks generate different text"
    # no compute on padding or finished rows: the group pushes exactly the token positions that
    # lm-eval pushes one request at a time (batch 1: prompt, then one position per new token)
    assert sum(r * n for r, n in shapes) == sum(r * n for r, n in batch1_shapes)
    assert max(r for r, _ in shapes) <= 6


def generate_both_ways(lm, requests, gate):
    """lm-eval's generate_until one gate at a time (its batch size, then batch 1), and for the
    gates as one mask group; the token positions (rows x length) each way pushed through the model."""

    def run(group, batch_size=None):
        shapes, saved = [], lm.batch_size_per_gpu
        handle = lm.model.get_input_embeddings().register_forward_pre_hook(
            lambda module, args: shapes.append(tuple(args[0].shape)))
        lm.batch_size_per_gpu = batch_size or saved
        try:
            with lm.mask_group(gate) if group else contextlib.nullcontext() as opened:
                texts = []
                for m in range(len(gate)):
                    if group:
                        opened.index = m
                    else:
                        lm.gate = gate[m]
                    texts.append(lm.generate_until(requests, disable_tqdm=True))
        finally:
            handle.remove()
            lm.gate, lm.batch_size_per_gpu = None, saved
        return texts, shapes

    single, _ = run(group=False)
    single_batch1, batch1_shapes = run(group=False, batch_size=1)
    grouped, shapes = run(group=True)
    assert single_batch1 == single
    return single, grouped, shapes, batch1_shapes


def test_rows_that_do_not_hold_whole_mask_groups_are_refused(model, tokenizer, data):
    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=2)
    gate = torch.ones(2, 2, 4)
    with evaluator.lm.mask_group(gate):
        with pytest.raises(RuntimeError, match="does not hold each request's 2 mask copies in adjacent rows"):
            evaluator.lm.ablation(torch.tensor([[1, 2], [3, 4]]))
        with pytest.raises(RuntimeError, match="does not hold"):
            evaluator.lm.ablation(torch.tensor([[1, 2], [1, 2], [3, 4]]))
        with evaluator.lm.ablation(torch.tensor([[1, 2], [1, 2], [3, 4], [3, 4]])):
            pass


def test_replay_refuses_different_requests(model, tokenizer, data):
    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=2)
    with evaluator.lm.mask_group(torch.ones(2, 2, 4)) as group:
        assert evaluator.lm._answers("loglikelihood", ["a", "b"], lambda: [(1, 2), (3, 4)]) == [1, 3]
        group.index = 1
        assert evaluator.lm._answers("loglikelihood", ["a", "b"], lambda: pytest.fail("recomputed")) == [2, 4]
        with pytest.raises(RuntimeError, match="different loglikelihood requests while replaying mask 1"):
            evaluator.lm._answers("loglikelihood", ["a", "c"], lambda: None)


@pytest.fixture(scope="module")
def smollm2(smollm2_dir):
    from headloc.model.loading import load_model

    return load_model(str(smollm2_dir))


@pytest.mark.slow
@pytest.mark.parametrize("task", ["ioi", "capitals"])
def test_smollm2_groups_equal_one_mask_at_a_time(smollm2, data, task):
    from headloc.methods import make_masks

    single = MaskEvaluator(*smollm2, spec(task, data), batch_size=8)
    grouped = MaskEvaluator(*smollm2, spec(task, data), batch_size=8, masks_per_pass=3)
    masks = make_masks(single.geometry.total, 4, method="cs_stratified", sparsity=0.05, random_state=0)
    masks[1] = 0
    docs = 7 if task == "ioi" else 8
    expected = single.evaluate_masks(masks, progress=False)
    got = grouped.evaluate_masks(masks, progress=False)
    assert all(len(r.samples) == docs for r in got)
    assert_same(got, expected, atol=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("task", ["ioi", "capitals"])  # log-likelihoods; generation's prompt pass
def test_smollm2_masks_that_share_layers_equal_one_mask_at_a_time(smollm2, data, task):
    """Greedy's kind of group on the real model: a head chosen before (L20H0) and a candidate of a
    later layer beside it in each mask, so that a group branches at layer 22 or later."""
    single = MaskEvaluator(*smollm2, spec(task, data), batch_size=8)
    grouped = MaskEvaluator(*smollm2, spec(task, data), batch_size=8, masks_per_pass=3)
    n_heads = single.geometry.n_heads
    masks = np.zeros((4, single.geometry.total), dtype=np.int8)
    masks[:, 20 * n_heads] = 1
    for row, layer in enumerate((27, 22, 25, 29)):
        masks[row, layer * n_heads + 1] = 1
    expected = single.evaluate_masks(masks, progress=False)
    layers = grouped.model.model.layers
    first, handle = count_rows(grouped.model, layers[0].self_attn.o_proj)
    last, last_handle = count_rows(grouped.model, layers[-1].self_attn.o_proj)
    try:
        got = grouped.evaluate_masks(masks, progress=False)
    finally:
        handle.remove()
        last_handle.remove()
    assert grouped.lm.shared.checked and grouped.lm.shared.layers is not None
    assert_same(got, expected, atol=1e-4)
    # layer 0 computed fewer rows than the last layer: once per document in the shared passes (the
    # check's full pass and capitals' decoding steps run both on every row)
    assert sum(first) < sum(last)


def test_the_shared_layers_benchmark_times_both_ways_on_the_same_scores(model, tokenizer, data, monkeypatch):
    from headloc.benchmarks import shared_layers

    class Clock:
        """A shared turn of 0.02 s and a full turn of 0.04 s: both round to 0.0 s, as the tiny
        model's turns did on a fast machine, and the ratio must still be theirs."""

        ticks = iter([0.0, 0.02, 1.0, 1.04])

        def perf_counter(self):
            return next(self.ticks)

    monkeypatch.setattr(shared_layers, "time", Clock())
    evaluator = MaskEvaluator(model, tokenizer, spec("ioi", data), batch_size=4, masks_per_pass=2)
    found = shared_layers.measure(evaluator, shared_layers.greedy_round(2, 4, 0, 1), turns=1)
    assert found["masks"] == 7 and found["shares"] and found["same"]
    assert found["seconds"] == {"shared": [0.0], "full": [0.0]} and found["ratio"] == 0.5
    assert evaluator.lm.shared.layers is not None  # sharing is back on after the full turns
