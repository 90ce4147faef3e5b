"""Gradient-guided greedy (headloc.search.guided) on SmolLM2's demo tasks, recorded as the
SmolLM2-vs-greedy comparison records its searches, so that its table sets it beside greedy.

    .venv/bin/python benchmarks/guided_greedy.py --tasks ioi --seeds 0 1 2 3 4 --out results/benchmarks/guided
    .venv/bin/python benchmarks/smollm2_vs_greedy.py --table results/benchmarks/guided results/benchmarks/vs-greedy

Each seed as the comparison runs it (headloc.api.vs_greedy): the task's full data generated with
the seed, the identification subset drawn with it, the search scored on the task's continuous
score (``id_task``: ioi's margin), its gradient taken on the gold continuation's log-likelihood of
the same documents (attribution beside the background), its k heads validated on the full data.
"""

import argparse
import time
from pathlib import Path
from types import SimpleNamespace

import yaml

from headloc.api import landscape, vs_greedy
from headloc.methods.guided_greedy import GuidedGreedyOptions

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="checkpoint folder (default: the demo's converted SmolLM2)")
    parser.add_argument("--tasks", nargs="+", help="tasks of config/demo.yaml (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--top-k", type=int, default=5)
    defaults = GuidedGreedyOptions.defaults()  # the method's
    parser.add_argument("--m", type=int, default=defaults["m"], help="heads of largest estimated drop on each short list")
    parser.add_argument("--m-abs", type=int, default=defaults["m_abs"], help="heads of largest estimate of either sign")
    parser.add_argument("--carry", type=int, default=defaults["carry"], help="runners-up of the step before")
    parser.add_argument("--label", default="guided_greedy", help="the method's name in the records")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, required=True, help="folder of the records (<task>-s<seed>.jsonl)")
    args = parser.parse_args(argv)
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    unknown = sorted(set(args.tasks or ()) - set(config["tasks"]))
    if unknown:
        parser.error(f"tasks {unknown} are not in config/demo.yaml; expected some of {sorted(config['tasks'])}")
    import torch

    from headloc.model.loading import load_model
    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(str(args.model or vs_greedy.demo_checkpoint(REPO)), device=args.device)
    args.out.mkdir(parents=True, exist_ok=True)
    for name in args.tasks or list(config["tasks"]):
        for seed in args.seeds:
            record = args.out / f"{name}-s{seed}.jsonl"
            kept = vs_greedy.finished(record).get(args.label)
            if kept:
                asked = {**options(args), "top_k": args.top_k}
                if {**kept["options"], "top_k": len(kept["top"])} != asked:
                    parser.error(f"{record}: its {args.label} record ran with {kept['options']} and top k "
                                 f"{len(kept['top'])}, not {asked}; give another --label or --out")
                continue
            row = run_seed(model, tokenizer, config, name, seed, args)
            vs_greedy.append_record(record, row)
            print(vs_greedy.summary_line(row))


def run_seed(model, tokenizer, config: dict, name: str, seed: int, args) -> dict:
    """One search and its validation record (headloc.api.vs_greedy's format)."""
    from headloc.engine.supervision import task_examples
    from headloc.heads import HeadGeometry, head_name
    from headloc.search.attribution import attribution
    from headloc.search.guided import guided_greedy

    task, geometry = config["tasks"][name], HeadGeometry.of(model.config)
    ids, data, n_full = vs_greedy.identification_documents(task, config["search"], seed)
    gold = landscape.identification_task(task, ids, data, gold=True)
    examples = task_examples(tokenizer, gold.spec, include_path=gold.task_folders)
    score_sets = landscape.task_scorer(model, tokenizer, landscape.identification_task(task, ids, data),
                                       batch_size=args.batch_size)

    def estimate(background):
        return -attribution(model, examples, batch_size=args.batch_size, background=background).effects

    started = time.perf_counter()
    found = guided_greedy(estimate, score_sets, geometry.total, args.top_k, m=args.m, m_abs=args.m_abs,
                          carry=args.carry)
    heads = [head_name(h, geometry.n_heads) for h in found.heads]
    located = SimpleNamespace(ranking=heads, top_heads=heads, n_evals=found.evaluations, record={})
    settings = vs_greedy.Comparison(top_k=args.top_k, batch_size=args.batch_size)
    validate = vs_greedy.validators(model, tokenizer, task, data, settings)
    row = vs_greedy.validation_record(located, validate, geometry, task=name, seed=seed, label=args.label,
                                      n_docs=n_full, seconds=time.perf_counter() - started, settings=settings,
                                      id_metric=task.get("id_metric"))
    return {**row, "gradient_passes": found.gradient_passes, "drops": found.drops,
            "lists": [[head_name(h, geometry.n_heads) for h in short] for short in found.lists],
            "options": options(args)}


def options(args) -> dict:
    return {"m": args.m, "m_abs": args.m_abs, "carry": args.carry}


if __name__ == "__main__":
    main()
