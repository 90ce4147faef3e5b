"""Greedy's question measured whole on SmolLM2 (headloc.benchmarks.landscape): every head's drop
beside a background, and whether random groups' drops point at the best head.

    .venv/bin/python benchmarks/conditional_landscape.py --background L23H3 L20H0 --seeds 0 1 2 3 4 --out DIR
    .venv/bin/python benchmarks/conditional_landscape.py --table DIR
"""

import argparse
from pathlib import Path

import yaml

from headloc.benchmarks import landscape, vs_greedy

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=landscape.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="checkpoint folder (default: the demo's converted SmolLM2)")
    parser.add_argument("--task", default="ioi", help="a task of config/demo.yaml (default: ioi)")
    parser.add_argument("--background", nargs="*", default=[], help="heads ablated under every set (e.g. L23H3 L20H0)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0])
    parser.add_argument("--group-sizes", nargs="+", type=int, default=list(landscape.GROUP_SIZES))
    parser.add_argument("--partitions", type=int, default=2, help="random partitions per group size")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", type=Path, help="folder of the records (<task>-s<seed>.json)")
    parser.add_argument("--table", type=Path, nargs="+", help="print the table of these folders' records")
    args = parser.parse_args(argv)
    if args.table:
        return print(landscape.landscape_table(landscape.read_records(args.table)))
    if args.out is None:
        return parser.error("--out is required to measure")
    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    if args.task not in config["tasks"]:
        parser.error(f"--task {args.task!r} is not a task of config/demo.yaml; expected one of {sorted(config['tasks'])}")
    import torch

    from headloc.heads import HeadGeometry, head_index
    from headloc.model.loading import load_model

    torch.set_num_threads(args.threads)
    model, tokenizer = load_model(str(args.model or vs_greedy.demo_checkpoint(REPO)), device=args.device)
    geometry = HeadGeometry.of(model.config)
    background = [head_index(h, geometry.n_layers, geometry.n_heads) for h in args.background]
    for seed in args.seeds:
        path = args.out / f"{args.task}-s{seed}.json"
        try:
            record = landscape.measure_seed(path, model, tokenizer, config, args.task, seed, background,
                                            group_sizes=args.group_sizes, partitions=args.partitions,
                                            batch_size=args.batch_size)
        except ValueError as error:
            parser.error(f"{path}: {error}")
        if record is not None:
            print(landscape.landscape_table([{"task": args.task, **record}]))

if __name__ == "__main__":
    main()
