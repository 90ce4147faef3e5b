"""``python -m headloc locate``: :func:`headloc.locate` from a shell, no config file.

    python -m headloc locate --model NAME_DIR_OR_HUB_ID --task NAME_OR_YAML [--method M] [--budget N]

loads the model (a GGUF, the embedded one's included, converted once into headloc-results/models/),
runs the search (one progress bar; ``--quiet``: none), prints the top k and writes the result
folder (:meth:`headloc.api.Located.save`: recovery.json, heatmap.png, the search's masks and
scores, heads.csv and the MIB files). ``HEADLOC_LOCATE_ARGS`` is appended to the command line.
Only ``locate`` imports torch and lm-eval, so ``--help`` is quick.
"""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from pathlib import Path

from headloc import methods
from headloc.api.checks import SETTINGS  # the defaults of headloc.locate
from headloc.api.locator import BATCH_SIZE, MASKS_PER_PASS, METHOD
from headloc.model.loading import EMBEDDED
from headloc.search.evidence import head_evidence

RESULTS_DIR = Path("headloc-results")
MODELS_DIR = RESULTS_DIR / "models"  # converted GGUF models, as the workflow's results/models/<model>


def _alpha(text: str):
    if text == "cv":
        return "cv"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid alpha {text!r}: expected 'cv' or a number >= 0") from None


def _documents(text: str):
    return int(text) if text.isdigit() else text


def _batch_size(text: str):
    if text == "auto":
        return "auto"
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"invalid batch size {text!r}: expected a positive number of rows or 'auto'")
    return int(text)


def _option(text: str) -> tuple[str, object]:
    """``KEY=VALUE``, the value read as YAML (``3``, ``auto``, ``[0, 100]``) as in a config file."""
    import yaml

    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"invalid option {text!r}: expected KEY=VALUE, e.g. extra_heads=3")
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError:
        raise argparse.ArgumentTypeError(f"invalid option {text!r}: its value is not a YAML value") from None


def method_options(pairs) -> dict:
    """The ``--option`` pairs as a dict; a key given twice is refused."""
    options = {}
    for key, value in pairs:
        if key in options:
            raise ValueError(f"--option {key} given twice ({options[key]!r} and {value!r})")
        options[key] = value
    return options


def _options_help() -> str:
    """Each method's options and their defaults, from the registry."""
    return "; ".join(f"{name}'s {', '.join(f'{key} (default {value})' for key, value in method.options.defaults().items())}"
                     for name, method in methods.registry().items() if method.options)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m headloc", description="headloc: find the attention heads that "
                                  "carry a capability in an LLM by ablating heads (docs/library.md).")
    commands = top.add_subparsers(dest="command", required=True)
    p = commands.add_parser("locate", help="search one model for the heads of one task",
                            description="Search one model for the heads that carry one task (headloc.locate) "
                                        "and write the result folder.")
    p.add_argument("--model", required=True, metavar="NAME_DIR_OR_HUB_ID",
                   help=f"a transformers checkpoint folder, a Hugging Face hub id, a .gguf file or the embedded "
                        f"model ({', '.join(EMBEDDED)}); a GGUF is converted once into --models-dir and reused")
    p.add_argument("--models-dir", type=Path, default=MODELS_DIR, metavar="DIR",
                   help=f"where a GGUF model's converted checkpoint folder is kept (default {MODELS_DIR})")
    p.add_argument("--task", required=True, metavar="NAME_OR_YAML",
                   help="an lm-eval task name (headloc's tasks, --include-path, lm-eval's registry) or a task YAML file")
    p.add_argument("--method", default=METHOD, choices=methods.names(),
                   help=f"the search method (default: {METHOD})")
    budgeted = methods.names(budgeted=True)
    p.add_argument("--budget", type=int, metavar="M",
                   help=f"masked evaluations a budgeted method spends ({', '.join(budgeted)}; default "
                        f"{SETTINGS.n_masks}; a "
                        "sequential search's most, its unablated row included); the other methods take none")
    p.add_argument("--option", type=_option, action="append", default=[], metavar="KEY=VALUE",
                   help="a hyperparameter of the method, its value read as YAML (repeatable; e.g. --option "
                        f"extra_heads=3): {_options_help()}")
    p.add_argument("--top-k", type=int, default=SETTINGS.top_k, metavar="K",
                   help=f"heads to print (and greedy's rounds; default {SETTINGS.top_k})")
    p.add_argument("--seed", type=int, default=SETTINGS.seed, help=f"seed of the mask design or draw (default {SETTINGS.seed})")
    p.add_argument("--sparsity", type=float, default=SETTINGS.sparsity,
                   help=f"share of heads a mask ablates (default {SETTINGS.sparsity})")
    p.add_argument("--alpha", type=_alpha, default=SETTINGS.alpha,
                   help=f"Lasso penalty, or 'cv' to cross-validate it (default {SETTINGS.alpha})")
    p.add_argument("--documents", type=_documents, metavar="N_OR_FILE",
                   help="score the task's first N documents, or those of a .jsonl / doc_ids .json file "
                        "(default: all of them)")
    p.add_argument("--metric", help="the lm-eval metric to score (default: the task's first)")
    p.add_argument("--chat", action="store_true", help="apply the tokenizer's chat template to prompts")
    p.add_argument("--lower-is-better", action="store_true",
                   help="the metric is better when lower; only for a metric whose task and lm-eval declare no "
                        "direction (a declared one is read, and this may not contradict it)")
    p.add_argument("--include-path", action="append", default=[], metavar="DIR",
                   help="a folder of lm-eval task YAMLs (repeatable)")
    p.add_argument("--dtype", default="float32", help="torch dtype to load the model in (default float32)")
    p.add_argument("--device", default="cpu", help="device to load the model on, e.g. cuda (default cpu)")
    p.add_argument("--batch-size", type=_batch_size, default=BATCH_SIZE, metavar="ROWS_OR_AUTO",
                   help="rows per forward pass, or 'auto': start large on a GPU, 16 on a CPU, and halve the rows "
                        f"of a pass that runs out of memory (default {BATCH_SIZE})")
    p.add_argument("--masks-per-pass", type=int, default=MASKS_PER_PASS,
                   help=f"masks sharing one forward pass (default {MASKS_PER_PASS})")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="the result folder (default: headloc-results/<task>/<search id>)")
    p.add_argument("--quiet", action="store_true",
                   help="print only the result: no progress bars (headloc's, lm-eval's, the model loader's) and no "
                        "messages of lm-eval's")
    return top


EXTRA = "HEADLOC_LOCATE_ARGS"  # arguments appended to every locate command line (docs/library.md)


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["locate"]:  # later arguments win: the tests run the documented commands on a small budget
        argv += shlex.split(os.environ.get(EXTRA, ""))
    args = parser().parse_args(argv)
    return locate_command(args)


def locate_command(args) -> int:
    if args.quiet:  # tqdm reads TQDM_* defaults from the environment: this silences lm-eval's bars too
        os.environ["TQDM_DISABLE"] = "1"
        # the search's log lines (its evidence, its warnings) are in the printed result as well
        logging.getLogger("headloc").setLevel(logging.ERROR)
    from headloc.api.checks import check_search
    from headloc.api.locator import locate
    from headloc.model.loading import load_model

    try:  # before the model loads
        options = method_options(args.option)
        check_search(args.method, args.budget, options, top_k=args.top_k, seed=args.seed, sparsity=args.sparsity,
                     alpha=args.alpha)
    except ValueError as error:
        print(f"headloc locate: {error}", file=sys.stderr)
        return 2
    try:
        location = model_location(args.model, args.models_dir, quiet=args.quiet)
        model, tokenizer = load_model(location, dtype=args.dtype, device=args.device)
    except (OSError, ValueError) as error:
        print(f"headloc locate: cannot load model {args.model!r} (a checkpoint folder or a hub id): {error}",
              file=sys.stderr)
        return 2
    try:
        found = locate(model, tokenizer, args.task, method=args.method, budget=args.budget, top_k=args.top_k,
                       seed=args.seed, sparsity=args.sparsity, alpha=args.alpha, options=options,
                       documents=args.documents, metric=args.metric, chat=args.chat, include_path=args.include_path,
                       batch_size=args.batch_size, masks_per_pass=args.masks_per_pass,
                       higher_is_better=False if args.lower_is_better else None,
                       model_name=Path(args.model).name, progress=not args.quiet)
    except ValueError as error:
        print(f"headloc locate: {error}", file=sys.stderr)
        return 2
    folder = found.save(args.out or RESULTS_DIR / found.record["task"] / found.search_id)
    print(summary(found, folder))
    return 0


def model_location(name: str, models_dir: Path, *, quiet: bool = False) -> str:
    """What ``load_model`` reads for ``--model``: a folder or hub id as given; a GGUF (the embedded
    model's, or a .gguf file) converted once into ``models_dir/<name>`` (the workflow's rule
    prepare_model) and reused from there. ValueError for a name that is none of these."""
    from headloc.model.loading import check_checkpoint_dir, convert_gguf, resolve_source

    source = resolve_source(name)
    if not source.needs_preparation:
        return source.location
    folder = Path(models_dir) / (name if name in EMBEDDED else Path(name).stem)
    try:
        check_checkpoint_dir(folder)
        return str(folder)  # converted before (the conversion renames a finished folder into place)
    except ValueError:
        pass
    if not quiet:
        print(f"converting {name} into {folder} (once)", file=sys.stderr)
    return str(convert_gguf(source.location, str(folder)))


def summary(found, folder) -> str:
    """The top k as a small table, with what the values mean and where the files went."""
    lines = [f"{found.search_id}: {found.record['method']} on {found.record['task']}, {found.n_evals} evaluations",
             found.evidence, f"value: {found.label}; its 95 % interval over resampled documents; P(in the top k)",
             f"{'rank':>4}  {'head':<8}{'value':>12}  {'interval':<22}{'P':>5}"]
    for rank, head in enumerate(found.top_heads, 1):
        value = found.values[head]
        value = "-" if value is None else f"{value + 0.0:12.4f}"  # the Lasso's -0.0 prints as 0.0
        _, interval, p = head_evidence(found.record, head, interval_digits=4)
        lines.append(f"{rank:>4}  {head:<8}{value:>12}  {interval or '-':<22}{p or '-':>5}")
    lines += [f"warning: {warning}" for warning in found.warnings]
    lines.append(f"wrote {folder}")
    return "\n".join(lines)
