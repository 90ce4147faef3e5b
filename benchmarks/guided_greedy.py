"""Gradient-guided greedy with chosen options on SmolLM2's demo tasks (headloc.benchmarks.guided),
recorded as the SmolLM2-vs-greedy comparison records its searches, its table beside greedy's.

    .venv/bin/python benchmarks/guided_greedy.py --tasks ioi --seeds 0 1 2 3 4 --out results/benchmarks/guided
    .venv/bin/python benchmarks/smollm2_vs_greedy.py --table results/benchmarks/guided results/benchmarks/vs-greedy
"""

import argparse
from pathlib import Path

import yaml

from headloc.benchmarks import guided, vs_greedy
from headloc.methods.guided_greedy import GuidedGreedyOptions

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=guided.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="checkpoint folder (default: the demo's converted SmolLM2)")
    parser.add_argument("--tasks", nargs="+", help="tasks of config/demo.yaml (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--top-k", type=int, default=vs_greedy.Comparison.top_k)
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
    options = {"m": args.m, "m_abs": args.m_abs, "carry": args.carry}
    for name in args.tasks or list(config["tasks"]):
        for seed in args.seeds:
            record = args.out / f"{name}-s{seed}.jsonl"
            if guided.kept_options(record, args.label, options, args.top_k, refuse=parser.error):
                continue
            row = guided.run_seed(model, tokenizer, config["tasks"][name], config["search"], name, seed,
                                  options=options, label=args.label,
                                  settings=vs_greedy.Comparison(top_k=args.top_k, batch_size=args.batch_size))
            vs_greedy.append_record(record, row)
            print(vs_greedy.summary_line(row))


if __name__ == "__main__":
    main()
