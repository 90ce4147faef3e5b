"""A job's start, cold and forked from a warm interpreter (headloc.benchmarks.warm_jobs):

    .venv/bin/python benchmarks/warm_jobs.py                  # the demo's model, 10 launches each way
    .venv/bin/python benchmarks/warm_jobs.py --model DIR      # a checkpoint folder of your own
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a checkpoint folder (default: the demo's model, converted once)")
    parser.add_argument("--launches", type=int, default=10, help="timed launches each way (default 10)")
    args = parser.parse_args(argv)
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"} | dict(os.environ))
    from headloc.benchmarks.vs_greedy import demo_checkpoint
    from headloc.benchmarks.warm_jobs import compare

    model = args.model or str(demo_checkpoint(REPO))
    found = compare(model, args.launches, Path(tempfile.mkdtemp()))
    print(json.dumps({"model": model, "launches": args.launches, **found}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
