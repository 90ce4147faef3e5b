"""Causal Head Gating (Nam et al. 2025; :mod:`headloc.search.chg`): one sigmoid gate per head
fitted by gradient descent, heads ranked by facilitation. Its hyperparameters are the config's
``chg`` section (seed rows x, lambda l, updates per fit t, all in its search's name)."""

from dataclasses import dataclass

from headloc.methods.contract import Method
from headloc.methods.rules import integer, number_in
from headloc.methods.settings import MethodOptions, setting


@dataclass(frozen=True)
class ChgOptions(MethodOptions, section="chg"):
    """Causal Head Gating (search method chg): the hyperparameters that change its ranking; the
    rest are the paper's defaults (see config/README.md and headloc.search.chg)."""

    seeds: int = setting(4, integer(1), doc="""Gate rows fitted at once, seeded 0..seeds-1 (the paper runs 10);
                         the ranking is their mean.""")
    lam: float = setting(0.1, number_in(0), doc="""Strength |lambda| of the regulariser in the G+ and G- fits
                         (paper 0.1).""")
    steps: int = setting(500, integer(1), doc="""Gradient updates of each of the three fits, at most (early
                         stopping may end sooner; paper 500).""")


def fit(model, examples, options: ChgOptions, seed, batch_size):
    from headloc.search.chg import chg

    return chg(model, examples, seeds=tuple(range(options.seeds)), lam=options.lam, init_steps=options.steps,
               fit_steps=options.steps, split_seed=seed, rows_per_pass=batch_size)


def search_id(parts) -> str:
    o = parts.options
    return f"chg_x{o.seeds}_l{o.lam:g}_t{o.steps}_{parts.tail}"


# how to read its heatmap (the caption in Snakemake's report)
READING = """Causal Head Gating: two panels of gates in [0, 1], means over seeds. G- (facilitation): near 1, the
task needs the head even under pressure to close gates. G+: near 0, the head interferes with the
task. Heads are ranked by G-; the seed spread is in ``recovery.json`` (``g_minus_std``,
``g_plus_std``, ``seed_spearman``)."""


METHODS = (
    Method(name="chg", kind="gradient", algorithm=fit, options=ChgOptions, search_id=search_id, marker="X",
           about="Causal Head Gating: gates fitted by gradient descent", label="-G- (facilitation, negated)",
           reading=READING),
)
