"""CHG and attribution on SmolLM2-135M-Instruct's ioi task, against single-head ablations.

    .venv/bin/python benchmarks/methods_smollm2.py --json results/benchmarks/methods_smollm2.json
    .venv/bin/python benchmarks/methods_smollm2.py --help

On the identification subset the workflow draws (``--docs`` documents, seed ``--seed``), it runs
``attribution`` and ``chg`` (hyperparameters from the flags; the paper's defaults are far beyond
one CPU core: see the module docstring of headloc.search.chg), then the single-head ablations that judge
them: (1) each head's true effect on the same differentiable score (mean gold log-likelihood),
one forward pass per head over the documents, several heads per pass; (2) one-shot greedy as the
workflow runs it (271 masked evaluations of lm-eval's ``acc`` through MaskEvaluator). It prints
wall time, passes and masked-evaluation equivalents, top-10 heads, the CHG seed spread, and the
Spearman correlation and top-5 overlap of each ranking with the single-head effects. Offline; one
thread by default (``--threads``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch
from scipy.stats import spearmanr

from headloc.search.attribution import attribution, rank_by_effect
from headloc.search.chg import chg
from headloc.data.datasets import build_docs, identification_subset, write_jsonl
from headloc.engine.evaluation import MaskEvaluator, TaskSpec
from headloc.heads import HeadGeometry, head_name
from headloc.search.masks import single_head_masks
from headloc.model.loading import load_model
from headloc.search.recovery import SingleHeadRecovery
from headloc.engine.supervision import continuation_logprobs, make_batch, recovery_fields, task_examples

REPO = Path(__file__).resolve().parents[1]
MODEL_DIRS = [REPO / "results" / "models" / "smollm2-135m", REPO / "results" / "test-cache" / "smollm2-135m-instruct"]


def model_dir() -> Path:
    for path in MODEL_DIRS:
        if (path / "config.json").is_file():
            return path
    from headloc.model.loading import convert_gguf, resolve_source

    convert_gguf(resolve_source("smollm2-135m-instruct").location, str(MODEL_DIRS[-1]))
    return MODEL_DIRS[-1]


def single_head_loglik(model, examples, geometry, heads_per_pass: int) -> tuple[np.ndarray, float, float]:
    """True effect of removing each head alone on the mean gold log-likelihood; base score; seconds."""
    batch = make_batch(examples)
    started = time.perf_counter()
    with torch.no_grad():
        base = float(continuation_logprobs(model, batch).sum() / len(examples))
        effects = []
        for start in range(0, geometry.total, heads_per_pass):
            heads = list(range(start, min(start + heads_per_pass, geometry.total)))
            gates = torch.ones(len(heads), geometry.total)
            gates[torch.arange(len(heads)), heads] = 0.0
            gates = gates.view(len(heads), geometry.n_layers, geometry.n_heads)
            scores = continuation_logprobs(model, batch, gates).sum(dim=(0, 2)) / len(examples)
            effects.extend((scores - base).tolist())
    return np.array(effects), base, time.perf_counter() - started


def compare(name: str, ranking: list[int], effects: np.ndarray, reference: np.ndarray, k: int = 5) -> dict:
    """Spearman of the per-head numbers, and the overlap of the top ``k`` (reference ranked by
    its most negative effects, ties to the lower index)."""
    rho = spearmanr(effects, reference).statistic
    top_ref = set(rank_by_effect(reference)[:k])
    return {"vs": name, "spearman": None if np.isnan(rho) else float(rho),
            f"top{k}_overlap": len(set(ranking[:k]) & top_ref)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=20, help="identification documents (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="identification subset seed (default 0)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--chg-seeds", type=int, default=2, help="CHG seeds, one gate row each (default 2)")
    parser.add_argument("--init-steps", type=int, default=40, help="CHG lambda=0 updates (paper: 500)")
    parser.add_argument("--fit-steps", type=int, default=40, help="CHG G+/G- updates (paper: 500)")
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--patience", type=int, default=2)
    parser.add_argument("--heads-per-pass", type=int, default=9, help="gates per pass for single-head effects")
    parser.add_argument("--skip-greedy1s", action="store_true", help="skip the 271 lm-eval masked evaluations")
    parser.add_argument("--reference", type=Path,
                        help="reuse the single-head effects (and greedy1s) of an earlier --json output")
    parser.add_argument("--json", type=Path, help="write every number here")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    location = model_dir()
    model, tokenizer = load_model(str(location), dtype="float32", device="cpu")
    geometry = HeadGeometry.of(model.config)
    names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
    docs = identification_subset(build_docs("ioi"), args.docs, args.seed)
    data_file = REPO / "results" / "benchmarks" / f"ioi-id{args.docs}-seed{args.seed}.jsonl"
    data_file.parent.mkdir(parents=True, exist_ok=True)
    write_jsonl(docs, data_file)
    spec = TaskSpec("headloc_ioi").with_data_file(data_file)
    examples = task_examples(tokenizer, spec)
    out: dict = {"model": str(location), "task": "headloc_ioi", "docs": len(examples), "threads": args.threads,
                 "tokens_per_masked_eval": sum(e.n_tokens for e in examples)}

    started = time.perf_counter()
    attr = attribution(model, examples)
    out["attribution"] = {"wall_s": time.perf_counter() - started, **recovery_fields(attr)}
    print(f"attribution: {out['attribution']['wall_s']:.1f} s, {attr.cost.fwd_bwd_passes} fwd+bwd passes, "
          f"~{attr.cost.eval_equivalent:.1f} masked evaluations; top 10 {[names[i] for i in attr.ranking[:10]]}")

    started = time.perf_counter()
    fit = chg(model, examples, seeds=tuple(range(args.chg_seeds)), init_steps=args.init_steps,
              fit_steps=args.fit_steps, eval_every=args.eval_every, patience=args.patience)
    fields = recovery_fields(fit)
    out["chg"] = {"wall_s": time.perf_counter() - started, **fields}
    g_minus_std = np.array(list(fields["g_minus_std"].values()))
    print(f"chg: {out['chg']['wall_s']:.1f} s, {fit.cost.fwd_bwd_passes} fwd+bwd passes "
          f"({fit.cost.fwd_bwd_rows} rows), {fit.cost.forward_passes} held-out passes, "
          f"~{fit.cost.eval_equivalent:.0f} masked evaluations; top 10 {[names[i] for i in fit.ranking[:10]]}")
    print(f"chg seed spread: mean per-head std of G- {g_minus_std.mean():.3f} (max {g_minus_std.max():.3f}), "
          f"mean pairwise Spearman G- {fields['seed_spearman']['g_minus']}, G+ {fields['seed_spearman']['g_plus']}; "
          f"stages {json.dumps({k: v['steps_run'] for k, v in fields['stages'].items()})}; "
          f"saturated {fields['saturated']}")
    chg_effects = fit.effects

    reference = json.loads(args.reference.read_text()) if args.reference else {}
    if "single_head_loglik" in reference:
        out["single_head_loglik"] = reference["single_head_loglik"]
        truth = np.array([out["single_head_loglik"]["coef"][name] for name in names])
        print(f"single-head log-likelihood effects from {args.reference}")
    else:
        truth, base, seconds = single_head_loglik(model, examples, geometry, args.heads_per_pass)
        out["single_head_loglik"] = {"wall_s": seconds, "base": base, "forward_rows": geometry.total * len(examples),
                                     "ranking": [names[i] for i in rank_by_effect(truth)],
                                     "coef": dict(zip(names, truth.tolist()))}
        print(f"single-head log-likelihood effects: {seconds:.1f} s; base {base:.3f}; top 10 "
              f"{[names[i] for i in rank_by_effect(truth)[:10]]}")
    comparisons = [
        {"method": "attribution", **compare("single_head_loglik", attr.ranking, attr.effects, truth)},
        {"method": "chg", **compare("single_head_loglik", fit.ranking, chg_effects, truth)},
        {"method": "attribution", **compare("chg", attr.ranking, attr.effects, chg_effects)},
    ]

    if "greedy1s" in reference:
        out["greedy1s"] = reference["greedy1s"]
        print(f"greedy1s from {args.reference}")
    elif not args.skip_greedy1s:
        started = time.perf_counter()
        evaluator = MaskEvaluator(model, tokenizer, spec, batch_size=160, masks_per_pass=8)
        masks = single_head_masks(geometry.total)
        scores = np.array([r.score for r in evaluator.evaluate_masks(masks, progress=False)])
        one_shot = SingleHeadRecovery().fit(masks, scores)
        out["greedy1s"] = {"wall_s": time.perf_counter() - started, "n_evals": len(masks),
                           "unablated": float(scores[0]), "ranking": [names[i] for i in one_shot.ranking_],
                           "coef": dict(zip(names, one_shot.coef_.tolist()))}
        print(f"greedy1s (acc, lm-eval): {out['greedy1s']['wall_s']:.1f} s for {len(masks)} evaluations; "
              f"unablated acc {scores[0]:.2f}; top 10 {out['greedy1s']['ranking'][:10]}")
    if "greedy1s" in out:
        one_shot_coef = np.array([out["greedy1s"]["coef"][name] for name in names])
        comparisons += [
            {"method": "attribution", **compare("greedy1s_acc", attr.ranking, attr.effects, one_shot_coef)},
            {"method": "chg", **compare("greedy1s_acc", fit.ranking, chg_effects, one_shot_coef)},
            {"method": "single_head_loglik", **compare("greedy1s_acc", rank_by_effect(truth), truth, one_shot_coef)},
        ]
    out["comparisons"] = comparisons
    for row in comparisons:
        print(f"{row['method']:>20} vs {row['vs']:<20} Spearman {row['spearman']}, top-5 overlap {row['top5_overlap']}/5")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=1))
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
