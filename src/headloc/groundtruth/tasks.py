"""The planted family's vocabulary, task documents and lm-eval task folder.

Every task document has one layout::

    <task marker> x1 x2 ... x10 . . . ?q      ->  answer: x_s

``x_i`` is a word of position i's own part of the words (:func:`pools`), ``?q`` a query token, and
the answer is the item at the source position ``s`` of the role that the (task, query) pair names
(the design: a task is a mix of kinds, a kind = a query token and a role). Scoring is lm-eval
``multiple_choice``, one token per choice: the gold item against the items of the roles the same
query names in other tasks (told apart only by the task marker) and other words of the gold's part
(told apart only by reading the document).

Documents depend only on the design (not on the size), so every size shares its tasks; the general
text the heads are trained on is :mod:`headloc.groundtruth.general_text`'s.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from headloc.groundtruth.design import Design

SPECIALS = ["<pad>", "<unk>", "<s>", "</s>"]
FILLER = "."
TASK_PREFIX = "planted_"
DOCS_KEY = "planted_docs"  # the task YAML's dataset_kwargs key naming its JSONL file


def words(design: Design) -> list[str]:
    return [f"w{i:02d}" for i in range(design.words)]


def query_token(q: int) -> str:
    return f"?{q}"


def vocabulary(design: Design) -> list[str]:
    """Token strings in id order."""
    return [*SPECIALS, FILLER, *words(design), *design.tasks, *(query_token(q) for q in design.queries)]


def token_ids(design: Design) -> dict[str, int]:
    return {token: i for i, token in enumerate(vocabulary(design))}


def lm_eval_name(task: str) -> str:
    return f"{TASK_PREFIX}{task}"


def source_positions(design: Design) -> dict[str, int]:
    """Role -> its source position (1-based index into x1..x_content), seeded by the design."""
    rng = random.Random(f"sources-{design.seed}")
    positions = rng.sample(range(1, design.content + 1), len(design.roles))
    return dict(zip(design.roles, positions))


def pools(design: Design) -> list[list[str]]:
    """The words each content position draws from: a seeded partition of the words, one part per position.

    A position's item is recognisable by its word (a head finds it by content, not by counting
    positions); the wrong choices of a document come from the same part, so knowing which
    position is asked (from the marker and the query) leaves the answer unknown.
    """
    shuffled = words(design)
    random.Random(f"pools-{design.seed}").shuffle(shuffled)
    return [sorted(shuffled[i::design.content]) for i in range(design.content)]


def confusers(design: Design) -> dict[tuple[str, int], list[str]]:
    """(task, query) -> the roles that the same query names in other tasks: without the marker a
    document of this kind cannot be told from theirs. Their items are among its wrong choices."""
    out = {}
    for task, kinds in design.tasks.items():
        for kind in kinds:
            others = [k.role for t, ks in design.tasks.items() if t != task for k in ks
                      if k.query == kind.query and k.role != kind.role]
            out[(task, kind.query)] = sorted(set(others), key=design.roles.index)
    return out


def allocate(n: int, weights: list[float]) -> list[int]:
    """``n`` documents split by ``weights`` (largest remainder; deterministic)."""
    raw = [n * w for w in weights]
    counts = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: (-(raw[i] - counts[i]), i))
    for i in order[: n - sum(counts)]:
        counts[i] += 1
    return counts


class DocumentMaker:
    """Documents of any (task, kind), drawn with a ``random.Random``; shared by training and lm-eval."""

    def __init__(self, design: Design):
        self.design = design
        self.sources = source_positions(design)
        self.pools = pools(design)
        self.confusers = confusers(design)

    def __call__(self, task: str, kind, rng: random.Random) -> dict:
        design = self.design
        items = [rng.choice(pool) for pool in self.pools]
        source = self.sources[kind.role]
        gold = items[source - 1]
        wrong = [items[self.sources[role] - 1] for role in self.confusers[(task, kind.query)]]
        wrong = wrong[: design.choices - 1]
        same_pool = [w for w in self.pools[source - 1] if w != gold]
        gap = [FILLER] * design.gap
        if design.distractors == "gap":  # other words of the gold's part, placed in the gap: present too
            gap = rng.sample(same_pool, design.gap)
            wrong += gap[: design.choices - 1 - len(wrong)]
        else:  # other words of the gold's part, absent from the document
            wrong += rng.sample(same_pool, design.choices - 1 - len(wrong))
        choices = [gold, *wrong]
        rng.shuffle(choices)
        text = " ".join([*(["<s>"] if design.bos else []), task, *items, *gap, query_token(kind.query)])
        return {"text": text, "choices": choices, "label": choices.index(gold), "role": kind.role,
                "query": kind.query, "source": source}


def task_documents(design: Design, task: str) -> list[dict]:
    """The lm-eval documents of ``task``: ``docs_per_task`` of them, kinds in their weights' shares."""
    kinds = design.tasks[task]
    rng = random.Random(f"docs-{design.seed}-{task}")
    make = DocumentMaker(design)
    weights = [k.weight for k in kinds]
    if design.stratify:  # the first `stratify` documents (the searches' subset) hold the kinds in their shares
        blocks = [allocate(design.stratify, weights), allocate(design.docs_per_task - design.stratify, weights)]
    else:
        blocks = [allocate(design.docs_per_task, weights)]
    docs = []
    for counts in blocks:
        block = [make(task, kind, rng) for kind, count in zip(kinds, counts) for _ in range(count)]
        rng.shuffle(block)
        docs += block
    return docs


def encode_documents(design: Design, docs: list[dict]):
    """(context ids [n, T], choice ids [n, C], gold index [n]) as numpy arrays."""
    ids = token_ids(design)
    contexts = np.array([[ids[t] for t in d["text"].split()] for d in docs], dtype=np.int64)
    choices = np.array([[ids[c] for c in d["choices"]] for d in docs], dtype=np.int64)
    labels = np.array([d["label"] for d in docs], dtype=np.int64)
    return contexts, choices, labels


# ------------------------------------------------------------------ the lm-eval task folder

LOADER = '''"""Loader of the planted tasks' documents (written by headloc.groundtruth.tasks).

lm-eval calls ``load_docs(**metadata, **dataset_kwargs)``: ``planted_docs`` (from the task YAML) names
the JSONL file beside this one; a ``data_file`` (headloc's way to hand a task chosen documents)
replaces it.
"""

import json
from pathlib import Path

import datasets


def load_docs(planted_docs=None, data_file=None, **kwargs):
    path = Path(data_file) if data_file else Path(__file__).parent / planted_docs
    with open(path, encoding="utf-8") as handle:
        docs = [json.loads(line) for line in handle if line.strip()]
    return datasets.DatasetDict({"test": datasets.Dataset.from_list(docs)})
'''


def task_yaml(task: str) -> str:
    return (
        f"# Planted task {task} (headloc.groundtruth): multiple choice, one token per choice.\n"
        f"task: {lm_eval_name(task)}\n"
        f"custom_dataset: !function planted_utils.load_docs\n"
        f"dataset_kwargs:\n  {DOCS_KEY}: {task}.jsonl\n"
        "test_split: test\n"
        "num_fewshot: 0\n"
        "output_type: multiple_choice\n"
        'doc_to_text: "{{text}}"\n'
        'doc_to_choice: "{{choices}}"\n'
        "doc_to_target: label\n"
        "metric_list:\n  - metric: acc\n    aggregation: mean\n    higher_is_better: true\n"
        "metadata:\n  version: 1.0\n"
    )


def write_task_folder(design: Design, folder) -> dict[str, str]:
    """Write every task's JSONL, YAML and the shared loader into ``folder``; task -> lm-eval name."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "planted_utils.py").write_text(LOADER, encoding="utf-8")
    names = {}
    for task in design.tasks:
        docs = task_documents(design, task)
        (folder / f"{task}.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
        (folder / f"{lm_eval_name(task)}.yaml").write_text(task_yaml(task), encoding="utf-8")
        names[task] = lm_eval_name(task)
    return names
