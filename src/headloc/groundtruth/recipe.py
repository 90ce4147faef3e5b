"""A planted model's recipe: the shared design, one size's geometry and training, and the placement.

The recipe is plain data read from ``config/ground_truth.yaml`` (key ``ground_truth``). Everything a
built model depends on is in :meth:`Recipe.as_dict`, and :meth:`Recipe.digest` hashes it: the
workflow keys its cache on that digest, so a changed seed, size or design re-builds the model.

Roles and placement
-------------------
A *role* is one source position ``x_i`` of the task documents that one head (two for a redundant
role or an interaction) copies to the answer position. The *universal* role moves the task marker.
Roles are placed on heads with a seeded draw (:func:`place_roles`): the universal head in the lower
half of the network, every other role in a layer above it (where the marker can steer it), no head
used twice; an interaction's two heads in two layers, its first step below its second.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from headloc.heads import format_head, parse_head

UNIVERSAL = "universal"
# How an interaction's two heads act together (docs/ground-truth.md, "Interactions"); the first head
# sits below the second, which reads what the first wrote:
# - backup: the primary copies the answer and shuts the backup's gate; the backup copies it at
#   ``strength`` (< 1) once the primary is gone;
# - redundant: the same at full strength, so either head alone changes nothing;
# - synergy: the first head opens the second's gate, the second copies: each alone breaks the task.
INTERACTIONS = ("backup", "redundant", "synergy")


@dataclass(frozen=True)
class Interaction:
    kind: str
    strength: float = 1.0  # the second head's copy strength (backup: below 1; the others copy at 1)

    @classmethod
    def from_dict(cls, role: str, data: dict) -> "Interaction":
        if not isinstance(data, dict):
            raise ValueError(f"interaction of role {role}: {data!r} is not a mapping such as {{kind: synergy}}")
        extra = set(data) - {"kind", "strength"}
        if extra:
            raise ValueError(f"interaction of role {role}: unknown keys {sorted(extra)}; known: kind, strength")
        kind = data.get("kind")
        if kind not in INTERACTIONS:
            raise ValueError(f"interaction of role {role}: kind {kind!r} is not one of {', '.join(INTERACTIONS)}")
        if kind == "backup":
            if "strength" not in data or not 0 < float(data["strength"]) < 1:
                raise ValueError(f"interaction of role {role}: a backup needs a strength between 0 and 1 (the share "
                                 f"of the answer it copies once the primary is gone), not {data.get('strength')!r}")
            return cls(kind, float(data["strength"]))
        if "strength" in data:
            raise ValueError(f"interaction of role {role}: a {kind} pair copies at full strength; strength is for "
                             "backup only")
        return cls(kind)

    def as_dict(self) -> dict:
        return {"kind": self.kind, **({"strength": self.strength} if self.kind == "backup" else {})}


@dataclass(frozen=True)
class Kind:
    role: str
    query: int
    weight: float


@dataclass(frozen=True)
class Design:
    words: int
    content: int
    gap: int
    choices: int
    docs_per_task: int
    seed: int
    threshold: float
    text: dict
    tasks: dict  # task -> tuple[Kind, ...]
    redundant: tuple[str, ...]
    distractors: str = "pool"  # pool | gap: the wrong choices beyond the confusers (tasks.DocumentMaker)
    bos: bool = False  # every document and text row starts with "<s>" (a place for heads to rest)
    stratify: int = 0  # the first `stratify` documents of a task hold its kinds in their shares
    interactions: dict = field(default_factory=dict)  # role -> Interaction: a role carried by two heads together

    @classmethod
    def from_dict(cls, data: dict) -> "Design":
        tasks = {name: tuple(Kind(str(k["role"]), int(k["query"]), float(k["weight"])) for k in kinds)
                 for name, kinds in data["tasks"].items()}
        design = cls(words=int(data["words"]), content=int(data["content"]), gap=int(data["gap"]),
                     choices=int(data["choices"]), docs_per_task=int(data["docs_per_task"]),
                     seed=int(data["seed"]), threshold=float(data["threshold"]), text=dict(data["text"]),
                     tasks=tasks, redundant=tuple(data.get("redundant", ())),
                     distractors=str(data.get("distractors", "pool")), bos=bool(data.get("bos", False)),
                     stratify=int(data.get("stratify", 0)),
                     interactions={str(role): Interaction.from_dict(str(role), spec)
                                   for role, spec in (data.get("interactions") or {}).items()})
        design.check()
        return design

    def as_dict(self) -> dict:
        return {"words": self.words, "content": self.content, "gap": self.gap, "choices": self.choices,
                "docs_per_task": self.docs_per_task, "seed": self.seed, "threshold": self.threshold,
                "text": dict(self.text), "redundant": list(self.redundant), "distractors": self.distractors,
                "tasks": {t: [{"role": k.role, "query": k.query, "weight": k.weight} for k in kinds]
                          for t, kinds in self.tasks.items()},
                # keys added later, written only when set: the digests of models built before stay
                **({"bos": True} if self.bos else {}), **({"stratify": self.stratify} if self.stratify else {}),
                **({"interactions": {r: i.as_dict() for r, i in self.interactions.items()}} if self.interactions else {})}

    @property
    def roles(self) -> list[str]:
        """Source roles in first-use order (the universal role is not among them)."""
        seen: list[str] = []
        for kinds in self.tasks.values():
            for kind in kinds:
                if kind.role not in seen:
                    seen.append(kind.role)
        return seen

    @property
    def queries(self) -> list[int]:
        return sorted({k.query for kinds in self.tasks.values() for k in kinds})

    def heads_per_role(self, role: str) -> int:
        return 2 if role in self.redundant or role in self.interactions else 1

    def check(self) -> None:
        roles = self.roles
        if UNIVERSAL in roles:
            raise ValueError(f"role name {UNIVERSAL!r} is reserved for the head that moves the task marker")
        if len(roles) > self.content:
            raise ValueError(f"{len(roles)} roles need {len(roles)} source positions; content is {self.content}")
        if self.choices > self.content:
            raise ValueError(f"choices ({self.choices}) cannot exceed the content positions ({self.content})")
        for task, kinds in self.tasks.items():
            if abs(sum(k.weight for k in kinds) - 1.0) > 1e-6:
                raise ValueError(f"task {task}: kind weights sum to {sum(k.weight for k in kinds)}, not 1")
            queries = [k.query for k in kinds]
            if len(set(queries)) != len(queries):
                raise ValueError(f"task {task}: two kinds share a query token")
        if self.distractors not in ("pool", "gap"):
            raise ValueError(f"distractors must be pool or gap, not {self.distractors!r}")
        if self.distractors == "gap" and (self.gap < self.choices - 1 or self.words // self.content <= self.gap):
            raise ValueError(f"distractors gap: gap {self.gap} needs gap >= choices - 1 ({self.choices - 1}) and more "
                             f"than gap + 1 words per position ({self.words // self.content})")
        if not 0 <= self.stratify <= self.docs_per_task:
            raise ValueError(f"stratify {self.stratify} must be between 0 and docs_per_task ({self.docs_per_task})")
        unknown = set(self.redundant) - set(roles)
        if unknown:
            raise ValueError(f"redundant roles {sorted(unknown)} are not roles of any task")
        unknown = set(self.interactions) - set(roles)
        if unknown:
            raise ValueError(f"interaction roles {sorted(unknown)} are not roles of any task; roles: {roles}")
        both = set(self.interactions) & set(self.redundant)
        if both:
            raise ValueError(f"roles {sorted(both)} are both redundant (two identical heads) and an interaction")


@dataclass(frozen=True)
class Size:
    layers: int
    heads: int
    head_dim: int
    hidden: int
    mlp: int
    seed: int
    steps: int
    lr: float
    text_batch: int
    task_batch: int = 0

    @classmethod
    def from_dict(cls, data: dict) -> "Size":
        known = set(cls.__dataclass_fields__)
        extra = set(data) - known
        if extra:
            raise ValueError(f"unknown model keys {sorted(extra)}; known: {sorted(known)}")
        missing = known - set(data) - {"task_batch"}  # the constructed scheme trains no task rows
        if missing:
            raise ValueError(f"model keys {sorted(missing)} missing")
        return cls(**{k: float(data[k]) if k == "lr" else int(data[k]) for k in known if k in data})

    @property
    def n_heads(self) -> int:
        return self.layers * self.heads


@dataclass(frozen=True)
class Recipe:
    name: str
    design: Design
    size: Size
    training: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return {"name": self.name, "design": self.design.as_dict(), "size": dict(vars(self.size)),
                "training": dict(self.training), "placement": self.placement()}

    @classmethod
    def from_dict(cls, data: dict) -> "Recipe":
        """The recipe :meth:`as_dict` wrote (its placement is drawn again, and must agree)."""
        recipe = cls(name=data["name"], design=Design.from_dict(data["design"]), size=Size.from_dict(data["size"]),
                     training=dict(data["training"]))
        if "placement" in data and recipe.placement() != data["placement"]:
            raise ValueError(f"recipe {recipe.name}: its placement draws differently here than where it was written")
        return recipe

    def digest(self) -> str:
        """12 hex digits identifying everything the built model depends on."""
        text = json.dumps(self.as_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def placement(self) -> dict[str, list[str]]:
        return place_roles(self.design, self.size)

    def planted(self) -> list[tuple[int, int]]:
        """Every planted head as (layer, head), in placement order."""
        return [parse_head(head) for heads in self.placement().values() for head in heads]


def place_roles(design: Design, size: Size) -> dict[str, list[str]]:
    """Role -> head names (``L<layer>H<head>``), drawn with the size's seed; deterministic."""
    rng = random.Random(f"placement-{design.seed}-{size.seed}-{size.layers}x{size.heads}")
    needed = 1 + sum(design.heads_per_role(r) for r in design.roles)
    if needed > size.n_heads:
        raise ValueError(f"the design plants {needed} heads; the model has {size.n_heads}")
    if size.layers < 2:
        raise ValueError("a planted model needs at least 2 layers")
    universal_layer = rng.randrange(0, max(1, size.layers // 2))
    universal = (universal_layer, rng.randrange(size.heads))
    placement = {UNIVERSAL: [format_head(*universal)]}
    # Role heads sit above the universal head, so that the task marker it moves can steer them.
    free = [(layer, head) for layer in range(universal_layer + 1, size.layers) for head in range(size.heads)]
    if needed - 1 > len(free):
        raise ValueError(f"{needed - 1} role heads do not fit above the universal head's layer {universal_layer}")
    rng.shuffle(free)
    for role in design.roles:
        if role in design.interactions:
            placement[role] = [format_head(*head) for head in _two_layers(free, role)]
        else:
            placement[role] = [format_head(*free.pop()) for _ in range(design.heads_per_role(role))]
    return placement


def _two_layers(free: list[tuple[int, int]], role: str) -> list[tuple[int, int]]:
    """Two heads off the end of the shuffled ``free`` in two different layers, the lower first: an
    interaction's second head reads what its first wrote."""
    first = free.pop()
    other = [i for i, (layer, _) in enumerate(free) if layer != first[0]]
    if not other:
        raise ValueError(f"interaction {role}: its two heads need two layers above the universal head's")
    return sorted([first, free.pop(other[-1])])


def load_config(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    return data["ground_truth"] if "ground_truth" in data else data


MODEL_KEYS = ("design", "training", "seeds")  # a model entry's keys beside its Size


def model_entries(config: dict) -> dict[str, dict]:
    """Model name -> its entry. An entry with ``seeds: [s, ...]`` is one model per seed (a placement
    each: the seed draws the placement and the initial weights), named ``<name>-s<seed>``."""
    out = {}
    for name, entry in config["models"].items():
        if "seeds" in entry:
            for seed in entry["seeds"]:
                out[f"{name}-s{seed}"] = {**{k: v for k, v in entry.items() if k != "seeds"}, "seed": int(seed)}
        else:
            out[name] = dict(entry)
    return out


def _named(config: dict, section: str, entry: dict, name: str) -> dict:
    """The model's design or training: ``config[section + "s"][entry[section]]``, or the config's
    single ``section`` when the model names none."""
    if section not in entry:
        return config[section]
    choices = config.get(f"{section}s", {})
    if entry[section] not in choices:
        raise ValueError(f"model {name}: {section} {entry[section]!r} is not one of {sorted(choices)}")
    return choices[entry[section]]


def recipe_from_config(config: dict, name: str) -> Recipe:
    """The recipe of model ``name`` from the ``ground_truth`` mapping of the config."""
    entries = model_entries(config)
    if name not in entries:
        raise ValueError(f"no planted model {name!r}; the config has {sorted(entries)}")
    entry = entries[name]
    size = {k: v for k, v in entry.items() if k not in MODEL_KEYS}
    return Recipe(name=name, design=Design.from_dict(_named(config, "design", entry, name)),
                  size=Size.from_dict(size), training=dict(_named(config, "training", entry, name)))


def load_recipe(path, name: str) -> Recipe:
    return recipe_from_config(load_config(Path(path)), name)
