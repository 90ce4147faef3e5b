"""Layers a mask group agrees on, shared or not (headloc.benchmarks.shared_layers), on SmolLM2:

    .venv/bin/python benchmarks/shared_layers.py --threads 2                       # a greedy round
    .venv/bin/python benchmarks/shared_layers.py --threads 2 --task capitals \\
        --sets results/smollm2-135m/single_heads.json                             # single_head_damage's sets
    .venv/bin/python benchmarks/shared_layers.py --threads 2 --task induction --generate --sets ...  # its generation
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    demo = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())["tasks"]
    parser.add_argument("--task", default="ioi", choices=sorted(demo), help="a demo task, scored as its id_task")
    parser.add_argument("--docs", type=int, default=32, help="documents (default 32)")
    parser.add_argument("--sets", type=Path, help="a JSON file with the head sets to score (its 'sets')")
    parser.add_argument("--step", type=int, default=4, help="a greedy round's every step-th head (default 4)")
    parser.add_argument("--generate", action="store_true", help="score the task itself, not its id_task")
    parser.add_argument("--turns", type=int, default=2, help="timed turns of each way (default 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = parser.parse_args(argv)
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TQDM_DISABLE": "1"} | dict(os.environ))
    import torch

    from headloc.benchmarks import shared_layers
    from headloc.benchmarks.vs_greedy import demo_checkpoint
    from headloc.engine.evaluation import load_evaluator
    from headloc.engine.lm_eval_tasks import TaskSpec
    from headloc.engine.throughput import write_docs

    torch.set_num_threads(args.threads)
    docs = write_docs(args.task, args.docs, 0, Path(tempfile.mkdtemp()))
    scoring = TaskSpec(demo[args.task]["lm_eval_task"]) if args.generate else \
        TaskSpec(demo[args.task]["id_task"], demo[args.task]["id_metric"])
    evaluator = load_evaluator(str(demo_checkpoint(REPO)), scoring.with_data_file(docs),
                               batch_size=128, masks_per_pass=8)
    geometry = evaluator.geometry
    masks = (shared_layers.head_sets(json.loads(args.sets.read_text())["sets"], geometry.n_layers, geometry.n_heads)
             if args.sets else shared_layers.greedy_round(geometry.n_layers, geometry.n_heads, 20, args.step))
    found = shared_layers.measure(evaluator, masks, args.turns)
    print(json.dumps({"task": args.task, "generate": args.generate, "docs": args.docs, "threads": args.threads, **found}))
    return 0 if found["same"] else 1


if __name__ == "__main__":
    sys.exit(main())
