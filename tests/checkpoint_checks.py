"""Independent checks of a planted checkpoint, shared by the planted-family tests.

Nothing here uses headloc's own scoring: a head is removed by zeroing the output projection's
columns that read it (not headloc's gate hooks), documents are tokenised by splitting on spaces
from the saved vocabulary, and the answer is read from the last position's logits.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import torch


def load(folder):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def read_docs(folder, task, n=None) -> list[dict]:
    lines = (Path(folder) / "tasks" / f"{task}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines][:n]


def documents(folder, task, n=None):
    """(contexts, choices, labels) of the task's first ``n`` documents (all by default)."""
    vocab = json.loads((Path(folder) / "tokenizer.json").read_text())["model"]["vocab"]
    docs = read_docs(folder, task, n)
    contexts = torch.tensor([[vocab[w] for w in d["text"].split(" ")] for d in docs])
    choices = torch.tensor([[vocab[c] for c in d["choices"]] for d in docs])
    return contexts, choices, torch.tensor([d["label"] for d in docs])


def parse(name):
    layer, head = name[1:].split("H")
    return int(layer), int(head)


def without(model, heads):
    """A copy of ``model`` whose output projections ignore ``heads`` ((layer, head) pairs or names)."""
    removed = copy.deepcopy(model)
    d = removed.config.head_dim
    with torch.no_grad():
        for head in heads:
            layer, index = parse(head) if isinstance(head, str) else head
            removed.model.layers[layer].self_attn.o_proj.weight[:, index * d:(index + 1) * d] = 0
    return removed


def accuracy(model, contexts, choices, labels) -> float:
    with torch.no_grad():
        last = model(contexts).logits[:, -1]
    return float((last.gather(1, choices).argmax(1) == labels).double().mean())


def gold_logprobs(model, contexts, choices, labels) -> torch.Tensor:
    """Each document's log-probability of the gold answer among the choices."""
    with torch.no_grad():
        last = model(contexts).logits[:, -1].double()
    return torch.log_softmax(last.gather(1, choices), dim=-1).gather(1, labels[:, None])[:, 0]


def gold_logprob(model, contexts, choices, labels) -> float:
    """Mean log-probability of the gold answer among the choices (a continuous score: a task whose
    baseline accuracy is 1.0 with wide margins can lose much of its margin without flipping a choice)."""
    return float(gold_logprobs(model, contexts, choices, labels).mean())
