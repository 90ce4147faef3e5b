"""Start-up time of a workflow job, per script (rule kind), and of the Snakefile's parse.

    .venv/bin/python benchmarks/job_startup.py                      # every script, median of 5 runs
    .venv/bin/python benchmarks/job_startup.py --runs 3 make_masks recover_heads
    .venv/bin/python benchmarks/job_startup.py --profile            # + the heaviest imports of each
    .venv/bin/python benchmarks/job_startup.py --help

A ``script:`` job runs in a fresh Python process: Snakemake (9.x,
``snakemake.script.PythonScript``) writes the script with a preamble into
``.snakemake/scripts/`` and runs ``<python> <that file>``. The preamble extends ``sys.path``,
unpickles the job's ``snakemake`` object (``snakemake.iocontainers.Snakemake``) and imports
``snakemake.logging.logger``. This benchmark builds that preamble with Snakemake's own
``PythonScript.generate_preamble`` (a made-up job: a few input/output/log paths, the demo config,
a small ``params``; the pickle's size barely matters, the modules it imports do), appends the
script's top-level imports (the ``import`` statements at module level, found with ``ast``, plus
top-level ``if``/``try`` blocks holding only imports) and its module-level reads of the model's
config (assignments calling ``load_config``, ``head_geometry`` or ``geometry_record``, and the
``p = snakemake.params`` aliases they use: they import transformers when they use AutoConfig; ``location`` is a folder
holding SmolLM2-135M's config.json), writes that to a temporary file and times
``<python> <file>`` from outside: interpreter start, ``site``, the preamble and the imports, i.e.
everything a job pays before its script does work. A second figure adds the script's imports
inside functions and branches (``recover_heads`` imports sklearn only for the methods that fit
the Lasso or read greedy's rounds): the job kind's worst case. Not included: the ``bash -c``
Snakemake wraps the command in (a few ms), the script's own work, and the imports the library
makes lazily while working (``headloc.io.read_scores`` imports pandas, ``convert_gguf``
transformers, the evaluator torch and lm-eval, ...).

It also times ``<python> -c 'import snakemake'`` and the Snakefile's parse,
``snakemake -n --configfile config/demo.yaml -s <repo>/Snakefile`` in an empty temporary
directory (parse plus a dry-run DAG of the whole demo: what every ``snakemake`` call pays before
its first job), and the imports of ``rules/*.smk`` alone.

Each figure is the median wall time of ``--runs`` runs (default 5), with the median CPU time
(user + system) of the same runs beside it. The machine's load average (``os.getloadavg``) is
printed before and after: on a shared machine the wall times grow with it, the CPU times much
less (they approximate the wall time on an idle machine). ``--tree DIR`` times another copy of
``scripts/`` and ``src/`` (and its Snakefile, if it has one) to compare code before and after a
change under the same load.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
# The scripts that load a model and evaluate it: torch, transformers and lm-eval are their work.
EVALUATES = {"score_masks", "score_top_heads", "validate_headset", "gradient_search", "count_documents"}
GOAL_S = 2.0


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("scripts", nargs="*", help="script names (default: every scripts/*.py)")
    parser.add_argument("--runs", type=int, default=5, help="runs per figure; the median is printed (default 5)")
    parser.add_argument("--profile", action="store_true",
                        help="also run each job once under -X importtime and name its heaviest imports")
    parser.add_argument("--no-snakefile", action="store_true", help="skip the Snakefile parse")
    parser.add_argument("--tree", type=Path, default=None,
                        help="time another copy's scripts/ and src/ (e.g. `git archive HEAD src scripts | tar -x "
                             "-C DIR`): its src/ goes first on PYTHONPATH; rules are still read from this repo; "
                             "the Snakefile is timed only if DIR has one")
    return parser.parse_args(argv)


# ------------------------------------------------------------------ what a job executes


def script_rules(rules_dir: Path = REPO / "rules") -> dict[str, list[str]]:
    """script name -> the rules running it (``rule``/``checkpoint`` with ``script:``, plus their
    ``use rule X as Y`` copies), read from rules/*.smk."""
    by_rule, aliases = {}, []
    for smk in sorted(rules_dir.glob("*.smk")):
        rule, expect_script = None, False
        for line in smk.read_text().splitlines():
            if m := re.match(r"(?:rule|checkpoint)\s+(\w+)\s*:", line):
                rule, expect_script = m.group(1), False
            elif m := re.match(r"use rule (\w+) as (\w+)", line):
                aliases.append((m.group(1), m.group(2)))
                rule = None
            elif rule and re.match(r"\s+script:\s*$", line):
                expect_script = True
            elif rule and (m := re.match(r"\s+(?:script:\s*)?\"[./]*scripts/(\w+)\.py\"", line)):
                if expect_script or "script:" in line:
                    by_rule[rule] = m.group(1)
                expect_script = False
    for source, alias in aliases:
        if source in by_rule:
            by_rule[alias] = by_rule[source]
    rules: dict[str, list[str]] = {}
    for rule, script in by_rule.items():
        rules.setdefault(script, []).append(rule)
    return rules


def top_level_imports(source: str) -> str:
    """The script's module-level import statements (and top-level if/try blocks of imports only)."""
    def imports_only(node) -> bool:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        if isinstance(node, (ast.If, ast.Try)):
            bodies = [node.body, node.orelse] + [h.body for h in getattr(node, "handlers", [])]
            return all(imports_only(n) or isinstance(n, ast.Pass) for body in bodies for n in body)
        return False

    return "\n".join(ast.unparse(node) for node in ast.parse(source).body if imports_only(node))


def nested_imports(source: str) -> str:
    """The script's other imports: those inside functions or branches (a job of some kinds runs
    them, e.g. recover_heads imports sklearn only for the Lasso and greedy methods)."""
    top = {ast.dump(node) for node in ast.parse(top_level_imports(source)).body}
    seen = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.dump(node) not in top:
            text = ast.unparse(node)
            if text not in seen:
                seen.append(text)
    return "\n".join(seen)


# headloc.model.loading: a model's config, no weights
CONFIG_READERS = {"load_config", "head_geometry", "geometry_record"}


def config_reads(source: str) -> str:
    """The script's module-level assignments that read the model's config before any work
    (``geometry = HeadGeometry.of(load_config(snakemake.params.location))``), with the aliases of
    ``snakemake`` attributes they may use (``p = snakemake.params``)."""
    def calls_reader(node) -> bool:
        return any(isinstance(n, ast.Call) and getattr(n.func, "id", None) in CONFIG_READERS for n in ast.walk(node))

    def snakemake_alias(node) -> bool:
        return isinstance(node.value, ast.Attribute) and getattr(node.value.value, "id", None) == "snakemake"

    kept = [node for node in ast.parse(source).body
            if isinstance(node, ast.Assign) and (snakemake_alias(node) or calls_reader(node.value))]
    return "\n".join(ast.unparse(node) for node in kept) if any(calls_reader(n) for n in kept) else ""


def tiny_checkpoint(folder: Path) -> Path:
    """A folder holding the config.json of SmolLM2-135M (the demo's model), no weights: what the
    config readers open as ``snakemake.params.location``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 576,
        "intermediate_size": 1536, "num_attention_heads": 9, "num_hidden_layers": 30,
        "num_key_value_heads": 3, "head_dim": 64, "vocab_size": 49152, "max_position_embeddings": 8192,
        "rms_norm_eps": 1e-05, "tie_word_embeddings": True, "bos_token_id": 1, "eos_token_id": 2,
    }, indent=2))
    return folder


def preamble(script: Path, location: Path | None = None) -> str:
    """The preamble Snakemake 9 writes above a script, built by Snakemake itself for a made-up job."""
    import yaml
    from snakemake.iocontainers import InputFiles, Log, OutputFiles, Params, ResourceList, Wildcards
    from snakemake.script import PythonScript
    from snakemake.sourcecache import LocalSourceFile

    config = yaml.safe_load((REPO / "config" / "demo.yaml").read_text())
    path = LocalSourceFile(str(script))
    text = PythonScript.generate_preamble(
        path, None, script.read_text(), str(REPO),
        InputFiles(["results/smollm2-135m/ioi/masks.npy", "results/smollm2-135m/ioi/scores.tsv"]),
        OutputFiles(["results/smollm2-135m/ioi/recovery.json"]),
        Params(fromdict={"location": str(location or "results/models/smollm2-135m"), "seed": 0,
                         "spec": {"method": "cs_stratified", "n_masks": 100, "sparsity": 0.05}}),
        Wildcards(fromdict={"model": "smollm2-135m", "task": "ioi", "search": "cs_stratified"}),
        1, ResourceList(fromdict={"_cores": 1, "_nodes": 1, "mem_mb": 1000}),
        Log(["logs/job.log"]), config, script.stem, conda_env=None, container_img=None,
        singularity_args=None, env_modules=None, bench_record=None, jobid=0, bench_iteration=None,
        cleanup_scripts=True, shadow_dir=None, is_local=True,
        preamble_addendum=f"__real_file__ = __file__; __file__ = {str(script)!r};",
    )
    return text


def job_source(script: Path, location: Path, nested: bool = False) -> str:
    """Preamble, the script's imports (``nested``: also those in functions and branches) and its
    reads of the model's config."""
    source = script.read_text()
    imports = top_level_imports(source) + ("\n" + nested_imports(source) if nested else "")
    return preamble(script, location) + imports + "\n" + config_reads(source) + "\n"


def timed(cmd, runs: int, cwd=None, env=None) -> tuple[float, float]:
    """Median wall seconds and median CPU seconds (user + system) of ``cmd`` over ``runs`` runs
    (exits on a failing run). On a loaded machine the wall time grows, the CPU time much less: it
    is close to what the wall time would be on an idle one (imports are single-threaded)."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
        walls.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
        if done.returncode != 0:
            sys.exit(f"{' '.join(map(str, cmd))} failed:\n{done.stderr[-3000:]}")
    return statistics.median(walls), statistics.median(cpus)


def fmt(timing: tuple[float, float]) -> str:
    return f"{timing[0]:.2f} s (CPU {timing[1]:.2f} s)"


def heaviest_imports(cmd, n: int = 5, env=None) -> str:
    """The ``n`` top-level packages with the largest cumulative import time (one -X importtime run)."""
    done = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], env=env, capture_output=True, text=True)
    per_package: dict[str, int] = {}
    for line in done.stderr.splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)", line)
        if m and not m.group(2).startswith(" "):  # imported by the job itself, not by another module
            root = m.group(2).strip().split(".")[0]
            per_package[root] = per_package.get(root, 0) + int(m.group(1))
    top = sorted(per_package.items(), key=lambda kv: -kv[1])[:n]
    return ", ".join(f"{name} {us / 1e6:.2f}" for name, us in top)


def smk_imports(rules_dir: Path = REPO / "rules") -> str:
    """The module-level import statements of rules/*.smk (column 0, parenthesised ones joined)."""
    statements = []
    for smk in sorted(rules_dir.glob("*.smk")):
        lines, i = smk.read_text().splitlines(), 0
        while i < len(lines):
            if re.match(r"(import|from)\s", lines[i]):
                statement = lines[i]
                while statement.count("(") > statement.count(")"):
                    i += 1
                    statement += " " + lines[i].strip()
                statements.append(statement)
            i += 1
    return "\n".join(statements)


# ------------------------------------------------------------------ main


def main(argv=None) -> int:
    args = parse_args(argv)
    rules = script_rules()
    tree = (args.tree or REPO).resolve()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(tree / "src"), os.environ.get("PYTHONPATH")])))
    scripts = sorted(tree.glob("scripts/*.py"))
    if args.scripts:
        scripts = [s for s in scripts if s.stem in args.scripts]
    load_before = os.getloadavg()
    print(f"python: {PYTHON}; {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in load_before)} "
          f"before; median of {args.runs} runs; {time.strftime('%Y-%m-%d %H:%M')}; code: {tree}")

    rows = []
    with tempfile.TemporaryDirectory(prefix="job_startup.") as tmp:
        location = tiny_checkpoint(Path(tmp) / "model")
        bare = fmt(timed([PYTHON, "-c", "pass"], args.runs))
        first = scripts[0] if scripts else REPO / "scripts" / "run_config.py"
        only_preamble = Path(tmp) / "preamble.script.py"
        only_preamble.write_text(preamble(first))
        base = fmt(timed([PYTHON, str(only_preamble)], args.runs, env=env))
        print(f"python -c pass: {bare}; Snakemake's preamble alone (python + unpickling the job): {base}")
        for script in scripts:
            job = Path(tmp) / f"{script.stem}.script.py"  # Snakemake: .snakemake/scripts/tmpXXXX.<name>.py
            job.write_text(job_source(script, location))
            seconds = timed([PYTHON, str(job)], args.runs, env=env)
            evaluates = script.stem in EVALUATES
            heavy = heaviest_imports([PYTHON, str(job)], env=env) if args.profile else ""
            print(f"  {script.stem}: {fmt(seconds)}" + (f"  ({heavy})" if heavy else ""), flush=True)
            nested = None
            if nested_imports(script.read_text()):
                job.write_text(job_source(script, location, nested=True))
                nested = timed([PYTHON, str(job)], args.runs, env=env)
                heavy = heaviest_imports([PYTHON, str(job)], env=env) if args.profile else ""
                print(f"  {script.stem} with its imports in functions/branches: {fmt(nested)}"
                      + (f"  ({heavy})" if heavy else ""), flush=True)
            rows.append((", ".join(rules.get(script.stem, ["-"])), script.stem, evaluates, seconds, nested))

        print()
        width = max([len(r[0]) for r in rows] + [8])
        print("median seconds, wall (CPU); 'all imports': with the script's imports in functions and branches "
              "too ('=': it has none); the goal is judged on the larger wall time")
        print(f"{'rule(s)':<{width}}  {'script':<22} {'evaluates':<9} {'top-level':>13} {'all imports':>13}"
              f"  goal <= {GOAL_S:g} s")
        print("-" * (width + 76))
        for rule, script, evaluates, seconds, nested in rows:
            worst = max(seconds[0], nested[0] if nested else 0)
            goal = "-" if evaluates else ("met" if worst <= GOAL_S else "NOT met")
            nested_text = f"{nested[0]:.2f} ({nested[1]:.2f})" if nested else "="
            print(f"{rule:<{width}}  {script:<22} {'yes' if evaluates else 'no':<9} "
                  f"{f'{seconds[0]:.2f} ({seconds[1]:.2f})':>13} {nested_text:>13}  {goal}")

        if not args.no_snakefile and (tree / "Snakefile").is_file():
            print()
            snakemake_bin = str(Path(PYTHON).parent / "snakemake")
            imports = Path(tmp) / "smk_imports.py"
            imports.write_text(smk_imports(tree / "rules"))
            workdir = Path(tmp) / "empty"
            workdir.mkdir()
            print(f"python -c 'import snakemake': {fmt(timed([PYTHON, '-c', 'import snakemake'], args.runs))}")
            print(f"the imports of rules/*.smk alone: {fmt(timed([PYTHON, str(imports)], args.runs, env=env))}")
            parse = timed([snakemake_bin, "-n", "--configfile", str(tree / "config" / "demo.yaml"),
                           "-s", str(tree / "Snakefile")], args.runs, cwd=workdir, env=env)
            print(f"snakemake -n --configfile config/demo.yaml -s Snakefile (empty directory): {fmt(parse)}")
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} after")
    return 0


if __name__ == "__main__":
    sys.exit(main())
