"""Masked-evaluation throughput: the paper's released procedure against headloc's engine
(headloc.engine.throughput). A benchmark that prints figures; exits 1 if the variants' results differ.

    .venv/bin/python benchmarks/throughput.py --threads 1 --json results/benchmarks/throughput.json
    .venv/bin/python benchmarks/throughput.py --masks 4 --docs 8 --skip-released   # a quick look
"""

import argparse
import functools
import json
import os
import sys
from pathlib import Path

from headloc.engine import throughput

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=throughput.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model-dir", type=Path, help="checkpoint folder (default: the converted SmolLM2)")
    parser.add_argument("--masks", type=int, default=16, help="masks per task (default 16)")
    parser.add_argument("--docs", type=int, default=32, help="documents per task (default 32)")
    parser.add_argument("--masks-per-pass", type=int, default=8, help="masks sharing a pass in (c) (default 8)")
    parser.add_argument("--batch-size", type=int, default=16, help="documents per forward pass in (b) (default 16)")
    parser.add_argument("--rows-per-pass", type=int, default=128, help="rows (document x mask) per pass in (c) (default 128)")
    parser.add_argument("--tasks", nargs="+", default=["ioi", "capitals"], choices=sorted(throughput.TASKS))
    parser.add_argument("--sparsity", type=float, default=0.05, help="cs_stratified sparsity (default 0.05)")
    parser.add_argument("--seed", type=int, default=0, help="seed of masks and documents (default 0)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--skip-released", action="store_true", help="leave out (a), the slow one")
    parser.add_argument("--json", type=Path, help="also write the figures to this JSON file")
    args = parser.parse_args(argv)
    try:
        settings = throughput.Settings(args.masks, args.docs, args.masks_per_pass, args.batch_size, args.rows_per_pass,
                                       tuple(args.tasks), args.sparsity, args.seed, not args.skip_released)
    except ValueError as error:
        parser.error(str(error))
    # offline, and no progress bars of lm-eval's to bury the table
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                       "TQDM_DISABLE": "1"} | dict(os.environ))
    import torch
    from headloc.methods import make_masks
    from headloc.benchmarks.vs_greedy import demo_checkpoint
    from headloc.model import geometry, loading
    torch.set_num_threads(args.threads or torch.get_num_threads())
    location = args.model_dir or demo_checkpoint(REPO)
    loading.check_checkpoint_dir(location)  # a folder named by --model-dir must hold a checkpoint
    masks = make_masks(geometry.head_geometry(str(location)).total, args.masks, method="cs_stratified",
                       sparsity=args.sparsity, random_state=args.seed)
    report, all_same = throughput.run(location, masks, settings, log=functools.partial(print, flush=True))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=2))
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
