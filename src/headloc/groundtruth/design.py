"""A planted family's design: its words, its documents' layout, its tasks and the roles that answer them.

Plain data read from ``config/ground_truth.yaml`` (``designs``), shared by every size of a family, so
that the sizes share their tasks (:mod:`headloc.groundtruth.tasks`). A task is a mix of kinds
(:class:`Kind`: a query token, the role it names and its share of the documents); a role is a source
position that one head copies to the answer, two for a redundant role or an interaction
(:class:`Interaction`). Reading a design checks it (:meth:`Design.check`): one its documents could not
hold is refused before anything is built.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
