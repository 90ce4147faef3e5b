"""A planted checkpoint read back and scored with heads ablated, many masks to a forward pass.

The scores are lm-eval's ``multiple_choice`` accuracy and the gold's mean log-probability among the
choices, taken from the last position's logits (every choice is one token), and the general text's
loss; :func:`lm_eval_scores` takes the accuracy through lm-eval itself, for the truth to check the
direct scoring against. The truth (:mod:`headloc.groundtruth.truth`) and the benchmark
(:mod:`headloc.groundtruth.benchmark`) both score with them.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch

from headloc.model.ablation import ablate_heads

MAX_ROWS = 2048  # rows (document x mask) per forward pass


def load_planted(folder):
    """(model, tokenizer, planted.json) of a built planted model folder, loaded as any checkpoint."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = Path(folder)
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    planted = json.loads((folder / "planted.json").read_text(encoding="utf-8"))
    return model, tokenizer, planted


def read_documents(folder, task: str) -> list[dict]:
    with open(Path(folder) / "tasks" / f"{task}.jsonl", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def encode(tokenizer, docs: list[dict]):
    """Documents as (contexts [n, T], choice ids [n, C], labels [n]) through the saved tokenizer."""
    contexts = [tokenizer(d["text"], add_special_tokens=False)["input_ids"] for d in docs]
    if len({len(c) for c in contexts}) != 1:
        raise ValueError("planted documents must all have the same number of tokens")
    choices = []
    for d in docs:
        ids = [tokenizer(c, add_special_tokens=False)["input_ids"] for c in d["choices"]]
        if any(len(i) != 1 for i in ids):
            raise ValueError(f"every choice must be one token: {d['choices']}")
        choices.append([i[0] for i in ids])
    return torch.tensor(contexts), torch.tensor(choices), torch.tensor([d["label"] for d in docs])


def score_masks(model, contexts, choices, labels, masks) -> tuple[np.ndarray, np.ndarray]:
    """Accuracy and mean gold log-probability among the choices, for each mask (1 = ablated).

    ``masks`` is [M, layers * heads]; several masks share one forward pass (a batched gate), on
    the model's device.
    """
    masks = np.atleast_2d(np.asarray(masks))
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    device = model.device
    contexts, choices, labels = contexts.to(device), choices.to(device), labels.to(device)
    n = len(labels)
    per_pass = max(1, MAX_ROWS // n)
    accs, logps = [], []
    with torch.no_grad():
        for start in range(0, len(masks), per_pass):
            group = torch.as_tensor(masks[start:start + per_pass], dtype=torch.float32)
            gate = (1.0 - group).reshape(-1, n_layers, n_heads).repeat_interleave(n, dim=0)
            with ablate_heads(model, gate):
                logits = model(contexts.repeat(len(group), 1)).logits[:, -1]
            chosen = logits.gather(1, choices.repeat(len(group), 1)).double()
            logp = torch.log_softmax(chosen, dim=-1).reshape(len(group), n, -1)
            correct = (logp.argmax(-1) == labels[None]).double()
            accs.append(correct.mean(1).cpu().numpy())
            logps.append(logp.gather(2, labels[None, :, None].expand(len(group), n, 1))[..., 0].mean(1).cpu().numpy())
    return np.concatenate(accs), np.concatenate(logps)


def text_losses(model, rows: torch.Tensor, masks) -> np.ndarray:
    """Mean next-token loss (nats) of the general text for each mask (1 = ablated), on the model's device."""
    masks = np.atleast_2d(np.asarray(masks))
    n_layers, n_heads = model.config.num_hidden_layers, model.config.num_attention_heads
    per_pass = max(1, MAX_ROWS // (4 * len(rows)))
    rows = rows.to(model.device)
    out = []
    with torch.no_grad():
        for start in range(0, len(masks), per_pass):
            group = torch.as_tensor(masks[start:start + per_pass], dtype=torch.float32)
            gate = (1.0 - group).reshape(-1, n_layers, n_heads).repeat_interleave(len(rows), dim=0)
            batch = rows.repeat(len(group), 1)
            with ablate_heads(model, gate):
                logits = model(batch[:, :-1]).logits
            loss = torch.nn.functional.cross_entropy(logits.transpose(1, 2), batch[:, 1:], reduction="none")
            out.append(loss.mean(1).reshape(len(group), len(rows)).mean(1).cpu().numpy())
    return np.concatenate(out)


def lm_eval_scores(model, tokenizer, folder, lm_eval_task: str, masks: dict[str, np.ndarray]) -> dict[str, float]:
    """The same masks scored through lm-eval (headloc's MaskEvaluator) on the model's task folder."""
    from headloc.engine.evaluation import MaskEvaluator
    from headloc.engine.lm_eval_tasks import TaskSpec

    evaluator = MaskEvaluator(model, tokenizer, TaskSpec(lm_eval_task, metric="acc"), batch_size=64,
                              include_path=[str(Path(folder) / "tasks")])
    return {name: evaluator.evaluate_mask(mask).score for name, mask in masks.items()}
