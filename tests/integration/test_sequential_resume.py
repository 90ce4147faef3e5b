"""A sequential search killed mid-way (SIGTERM, SIGKILL) resumes from its record and ends with the
same record and result as an uninterrupted one, scoring no recorded mask again.

The step (headloc.methods.kinds.sequential.sequential, the step rule search_job's script makes for a sequential search) runs
in a real subprocess on the planted tiny model (tests/planted.py), its scorer slowed so the kill
lands between rounds or inside one; every mask it starts scoring is appended to a journal first.
The same step, called again in this process as the rerun of the killed job would call it, goes on
from the record. The reference is the same step uninterrupted.

The same step killed in-process between rounds on the simulated world (headloc.search.simulate):
a lower-is-better score resumes to the uninterrupted result, and a record left by another model,
other documents or another task (its key, headloc.methods.record.record_key, as
headloc.workflow.jobs.one_job builds it) is not resumed.
"""

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from planted import N_HEADS, N_LAYERS, planted_dir, planted_examples, weakened

from headloc.heads import HeadGeometry
from headloc.methods.kinds import sequential
from headloc.methods.record import record_key
from headloc.search.simulate import make_world

TESTS = Path(__file__).resolve().parents[1]
PARAMS = sequential.SequentialParams("thompson", 24, 0, 2, 0.25, {"reward": "damage", "score_range": [-5, 0]})
KILL_AFTER = 4  # masks recorded before the kill (of 24: most are still to score)
LOG = logging.getLogger("test_sequential_resume")

# the subprocess: the step with a journal of the masks it starts to score, and a pause per round
SCRIPT = textwrap.dedent("""
    import logging, sys, time
    from pathlib import Path
    from transformers import LlamaForCausalLM
    sys.path.insert(0, sys.argv[4])
    import test_sequential_resume as here
    from headloc.methods.kinds import sequential

    folder, pause = Path(sys.argv[1]), float(sys.argv[3])
    model = here.weakened(LlamaForCausalLM.from_pretrained(sys.argv[2]).eval(), 0.2)
    score = here.journaled(model, here.planted_examples(12), folder / "journal.txt", pause)
    sequential.sequential(here.PARAMS, here.GEOMETRY, score, folder / "record.npz", folder / "sequential.json",
                     logging.getLogger())
""")
GEOMETRY = HeadGeometry(N_LAYERS, N_HEADS)


def journaled(model, examples, journal: Path, pause: float = 0.0):
    """``score(masks)``: each mask's mean gold log-likelihood, each mask appended to ``journal``
    before it is scored (so the journal holds every mask a run started on), ``pause`` s per round."""
    from headloc.model.ablation import ablate_heads, masks_to_gate

    tokens = torch.tensor([list(e.context) + list(e.target) for e in examples])

    def score(masks):
        with open(journal, "a") as handle:
            handle.writelines("".join(map(str, row)) + "\n" for row in masks)
        time.sleep(pause)
        found = []
        for row in masks:
            ablation = ablate_heads(model, masks_to_gate(row, GEOMETRY)) if row.any() else contextlib.nullcontext()
            with torch.no_grad(), ablation:
                logits = model(tokens[:, :-1]).logits[:, -1].double()
            found.append(float(torch.log_softmax(logits, -1).gather(1, tokens[:, -1:]).mean()))
        return np.array(found)

    return score


def journal(folder: Path) -> list[str]:
    path = folder / "journal.txt"
    return path.read_text().splitlines() if path.exists() else []


def record(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    with np.load(folder / "record.npz") as found:
        return found["masks"], found["scores"]


@pytest.fixture(scope="module")
def model():
    from transformers import LlamaForCausalLM

    return weakened(LlamaForCausalLM.from_pretrained(planted_dir()).eval(), 0.2)


def run_step(model, folder: Path) -> dict:
    score = journaled(model, planted_examples(12), folder / "journal.txt")
    return sequential.sequential(PARAMS, GEOMETRY, score, folder / "record.npz", folder / "sequential.json", LOG)


@pytest.fixture(scope="module")
def reference(model, tmp_path_factory):
    folder = tmp_path_factory.mktemp("uninterrupted")
    return folder, run_step(model, folder)


def kill_mid_run(folder: Path, sig) -> int:
    """Start the step in a subprocess, send ``sig`` once KILL_AFTER masks are recorded; its exit code."""
    script = folder / "run.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent / "src")])}
    process = subprocess.Popen([sys.executable, str(script), str(folder), str(planted_dir()), "0.2",
                                str(Path(__file__).parent)], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 300
    while not ((folder / "record.npz").exists() and len(record(folder)[0]) >= KILL_AFTER):
        if process.poll() is not None:
            pytest.fail(f"the search ended before the kill:\n{process.stdout.read()[-3000:]}")
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("no round was recorded in time")
        time.sleep(0.02)
    process.send_signal(sig)
    return process.wait(timeout=60)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_a_killed_sequential_search_resumes_to_the_same_result(sig, model, reference, tmp_path):
    reference_folder, expected = reference
    assert kill_mid_run(tmp_path, sig) != 0
    assert not (tmp_path / "sequential.json").exists(), "killed before the end"
    kept, _ = record(tmp_path)  # whole: the old or the new record, never half of one
    started = journal(tmp_path)
    assert KILL_AFTER <= len(kept) < PARAMS.n_masks
    assert len(started) - len(kept) in (0, 1), "one mask at most was being scored"

    found = run_step(model, tmp_path)  # the rerun of the killed job
    resumed = journal(tmp_path)[len(started):]
    recorded = {"".join(map(str, row)) for row in kept}
    assert not recorded & set(resumed), "a recorded mask was scored again"
    masks, scores = record(tmp_path)
    assert len(resumed) == len(masks) - len(kept) == expected["n_evals"] - len(kept)
    reference_masks, reference_scores = record(reference_folder)
    assert np.array_equal(masks, reference_masks) and scores == pytest.approx(reference_scores, abs=1e-12)
    assert found == expected
    assert json.loads((tmp_path / "sequential.json").read_text()) == json.loads(
        (reference_folder / "sequential.json").read_text())
    assert not list(tmp_path.glob(".record.npz.*.tmp")), "the killed writer's temporary file is cleared"


# ---------------------------------------------------------------- killed in-process, on the simulated world

WORLD = make_world(seed=4, n_heads=128, tau=0.02)
WORLD_GEOMETRY = HeadGeometry(8, 16)


class Killed(Exception):
    """The job's end, between two rounds (what SIGKILL does after a round was recorded)."""


def loss(masks) -> np.ndarray:
    """A lower-is-better score (the world's negative log-likelihood, as a perplexity is read)."""
    return -WORLD.score(masks)


def scorer(score, *, rounds: int | None = None, spent: list | None = None):
    """``score``, killed once ``rounds`` rounds were scored; every scored mask counted in ``spent``."""
    calls = []

    def counted(masks):
        if rounds is not None and len(calls) == rounds:
            raise Killed
        calls.append(len(masks))
        if spent is not None:
            spent.extend(masks)
        return score(masks)

    return counted


def gt_params(higher_is_better: bool) -> sequential.SequentialParams:
    from headloc.methods import get

    return sequential.SequentialParams("group_testing", 40, 4, 5, 0.05, {},
                                  higher_is_better)


def run_killed(params, folder: Path, score, rounds: int, key: str = "") -> None:
    with pytest.raises(Killed):
        sequential.sequential(params, WORLD_GEOMETRY, scorer(score, rounds=rounds), folder / "record.npz",
                         folder / "sequential.json", LOG, key=key)


def test_a_killed_lower_is_better_search_resumes_to_the_uninterrupted_result(tmp_path):
    """The record keeps raw scores (a loss here: lower is better); replayed, they must be oriented
    as the live search read them, or the replay proposes other masks than the record holds."""
    params = gt_params(higher_is_better=False)
    expected = sequential.sequential(params, WORLD_GEOMETRY, loss, tmp_path / "ref.npz", tmp_path / "ref.json", LOG)
    oriented = sequential.sequential(gt_params(True), WORLD_GEOMETRY, WORLD.score, tmp_path / "hib.npz",
                                tmp_path / "hib.json", LOG)
    assert expected["ranking"][:5] == oriented["ranking"][:5]  # the same heads, whichever way the score runs
    for rounds in (2, 5, 9):
        folder = tmp_path / f"killed{rounds}"
        folder.mkdir()
        run_killed(params, folder, loss, rounds)
        kept = len(record(folder)[0])
        spent = []
        found = sequential.sequential(params, WORLD_GEOMETRY, scorer(loss, spent=spent), folder / "record.npz",
                                 folder / "sequential.json", LOG)
        assert found == expected
        assert 0 < kept and len(spent) == expected["n_evals"] - kept, "only the masks the killed job had not scored"


def test_a_killed_conditional_search_resumes_to_the_uninterrupted_result(tmp_path):
    """Conditional group testing through the rule's step, its pair screen on: killed after 2, 6 and
    12 rounds (in its background stage and its screen), rerun, it scores only what the killed job had
    not and ends with the uninterrupted ranking, labels and evaluations."""
    params = sequential.SequentialParams("conditional_group_testing", 90, 2, 4, 0.05, {"pair_screen": True})
    expected = sequential.sequential(params, WORLD_GEOMETRY, WORLD.score, tmp_path / "ref.npz", tmp_path / "ref.json",
                                     LOG)
    for rounds in (2, 6, 12):
        folder = tmp_path / f"killed{rounds}"
        folder.mkdir()
        run_killed(params, folder, WORLD.score, rounds)
        kept, spent = len(record(folder)[0]), []
        found = sequential.sequential(params, WORLD_GEOMETRY, scorer(WORLD.score, spent=spent), folder / "record.npz",
                                      folder / "sequential.json", LOG)
        assert found == expected
        assert 0 < kept and len(spent) == expected["n_evals"] - kept


def record_files(folder: Path) -> tuple[Path, Path]:
    """A model's file and a task's documents, as the rule's inputs."""
    model, docs = folder / "model.gguf", folder / "docs.jsonl"
    model.write_bytes(b"GGUF")
    docs.write_text('{"text": "a"}\n')
    return model, docs


def key_of(model_file: Path, docs: Path, **changed) -> str:
    """The record's key as headloc.workflow.jobs.one_job builds it."""
    fields = {"task_digest": "d0", "location": str(model_file), "model": {"dtype": "float32"},
              "task": {"scoring": {"lm_eval_task": "headloc_ioi", "metric": "acc"}}, "inputs": [model_file, docs], **changed}
    return record_key(**fields)


def touched(path: Path) -> Path:
    """``path`` rewritten later (new documents, a new model file): its modification time moves on."""
    stamp = path.stat().st_mtime_ns + 10**9
    os.utime(path, ns=(stamp, stamp))
    return path


OTHER_INPUTS = {
    "the same inputs": lambda model, docs: {},
    "another model location": lambda model, docs: {"location": str(model.parent / "other.gguf")},
    "other model settings": lambda model, docs: {"model": {"dtype": "bfloat16"}},
    "another task digest": lambda model, docs: {"task_digest": "d1"},
    "another task": lambda model, docs: {"task": {"scoring": {"lm_eval_task": "headloc_ioi", "metric": "acc_norm"}}},
    "new documents": lambda model, docs: {"inputs": [model, touched(docs)]},
    "a new model file": lambda model, docs: {"inputs": [touched(model), docs]},
}


@pytest.mark.parametrize("other", OTHER_INPUTS)
def test_a_record_left_by_another_model_documents_or_task_is_not_resumed(other, tmp_path):
    params = gt_params(higher_is_better=True)
    model, docs = record_files(tmp_path)
    run_killed(params, tmp_path, WORLD.score, rounds=4, key=key_of(model, docs))
    kept = len(record(tmp_path)[0])
    spent = []
    found = sequential.sequential(params, WORLD_GEOMETRY, scorer(WORLD.score, spent=spent), tmp_path / "record.npz",
                             tmp_path / "sequential.json", LOG, key=key_of(model, docs, **OTHER_INPUTS[other](model, docs)))
    if other == "the same inputs":
        assert len(spent) == found["n_evals"] - kept > 0, "resumed: only what is left"
    else:
        assert len(spent) == found["n_evals"], "started afresh: every mask scored again"
