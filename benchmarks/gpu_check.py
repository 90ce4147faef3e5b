"""The GPU check: headloc's ablation engine on a real accelerator, in one short run (headloc.benchmarks.gpu_check).

    PYTHONPATH=src python benchmarks/gpu_check.py --json gpu_check.json     # on the GPU machine
    PYTHONPATH=src python benchmarks/gpu_check.py --quick --device cpu      # a smoke run of the same code here
    PYTHONPATH=src python benchmarks/gpu_check.py --skip planted throughput slot --tokenizer DIR   # the engine only

Needs torch, transformers, accelerate, numpy, scipy and scikit-learn (lm-eval only for the engine
section); ``PYTHONPATH=src`` where headloc is not installed. Prints one line per figure; exits 1 if
a check fails. A benchmark, not a test.
"""

import argparse
import json
import os
import sys
from pathlib import Path


def main(argv=None) -> int:
    for name, value in (("HF_HUB_OFFLINE", "1"), ("HF_DATASETS_OFFLINE", "1"), ("TQDM_DISABLE", "1")):
        os.environ.setdefault(name, value)  # offline; lm-eval's progress bars would bury the figures
    import torch

    from headloc.benchmarks import gpu_check

    parser = argparse.ArgumentParser(description=gpu_check.__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--quick", action="store_true", help="small shapes only: a smoke run of the code")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument("--skip", nargs="*", default=[], choices=gpu_check.SECTIONS)
    parser.add_argument("--tokenizer", type=Path, help="a tokenizer folder for the engine section (SmolLM2's)")
    parser.add_argument("--engine-dtype", default="bfloat16", choices=["bfloat16", "float32"],
                        help="the engine section's dtype on a GPU (default bfloat16)")
    args = parser.parse_args(argv)
    report = gpu_check.run_checks(args.device, quick=args.quick, skip=args.skip, tokenizer=args.tokenizer,
                                  engine_dtype=args.engine_dtype, log=lambda line: print(line, flush=True))
    if args.json:
        args.json.write_text(json.dumps({"figures": report.figures, "failed": report.failed}, indent=2, default=str))
    print("FAILED: " + "; ".join(report.failed) if report.failed else "every check passed")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
