"""A planted model's recipe: the shared design, one size's geometry and training, and the placement.

The recipe is plain data read from ``config/ground_truth.yaml`` (key ``ground_truth``); its design,
shared by every size of a family, is :mod:`headloc.groundtruth.design`'s. Everything a built model
depends on is in :meth:`Recipe.as_dict`, and :meth:`Recipe.digest` hashes it: the workflow keys its
cache on that digest, so a changed seed, size or design re-builds the model.

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

from headloc.groundtruth.design import UNIVERSAL, Design
from headloc.heads import format_head, parse_head


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
