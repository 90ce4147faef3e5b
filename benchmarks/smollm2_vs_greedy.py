"""Search methods against greedy on SmolLM2-135M-Instruct's demo tasks, or another config's
(held-out tasks: --config config/held-out.yaml), with headloc.benchmarks.vs_greedy.

    .venv/bin/python benchmarks/smollm2_vs_greedy.py --out results/benchmarks/vs-greedy --seeds 0 1 2 3 4
    .venv/bin/python benchmarks/smollm2_vs_greedy.py --table results/benchmarks/vs-greedy
"""

import argparse
import json
from pathlib import Path

from headloc.benchmarks import vs_greedy
from headloc.report.comparison import vs_greedy_table

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=vs_greedy.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="checkpoint folder (default: the demo's converted SmolLM2)")
    parser.add_argument("--gguf", help="convert this GGUF into --model first (a folder that exists is used as is)")
    parser.add_argument("--config", type=Path, default=REPO / "config" / "demo.yaml", help="tasks and search (default: the demo's)")
    parser.add_argument("--tasks", nargs="+", help="tasks of --config (default: all)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2, 3, 4])
    parser.add_argument("--methods", nargs="+", default=list(vs_greedy.METHODS))
    parser.add_argument("--budget", type=int, default=100, help="masks of a budgeted method (default 100)")
    parser.add_argument("--top-k", type=int, default=vs_greedy.Comparison.top_k)
    parser.add_argument("--universal", nargs="*", default=[],
                        help="heads left out of a second, filtered top k (as universal.filter with universal.heads)")
    parser.add_argument("--options", type=json.loads, default=None,
                        help="a sequential method's options, JSON (e.g. '{\"extra_heads\": 0}')")
    parser.add_argument("--label-suffix", default="", help="appended to the method's name in the records")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=128, help="rows per forward pass")
    parser.add_argument("--masks-per-pass", type=int, default=8)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="folder of the records (one .jsonl per task and seed)")
    parser.add_argument("--table", type=Path, nargs="+", help="print the table of these folders' records")
    args = parser.parse_args(argv)
    if args.table:
        return print(vs_greedy_table(vs_greedy.read_records(args.table)))
    if args.out is None or (args.gguf and not args.model):
        parser.error("--out is required to run searches, and --gguf needs --model (the folder to convert into)")
    import torch

    from headloc.model.loading import convert_gguf, load_model
    torch.set_num_threads(args.threads)
    if args.gguf and not (Path(args.model) / "config.json").is_file():
        convert_gguf(args.gguf, args.model)
    model, tokenizer = load_model(str(args.model or vs_greedy.demo_checkpoint(REPO)), device=args.device)
    settings = vs_greedy.Comparison(tuple(args.methods), args.budget, args.top_k, tuple(args.universal), args.options,
                                    args.label_suffix, args.batch_size, args.masks_per_pass)
    vs_greedy.compare(model, tokenizer, vs_greedy.read_config(args.config, REPO), args.out, settings, tasks=args.tasks, seeds=args.seeds)


if __name__ == "__main__":
    main()
