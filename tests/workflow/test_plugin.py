"""A kind of search defined here, in a package of its own, runs through the workflow's own rules
with no file of headloc changed: the package names its module in the ``headloc.methods``
entry-point group (docs/extending.md, "A method or kind of your own"), its method's options section
is read from the config as the schema's own, and rule search_job loads the model, scores the kind's
masks on the search's scoring task, and recover_heads reads its result.

The package is written to a folder that the Snakemake run finds on PYTHONPATH, as an installed
package is found on the path: its module and a ``.dist-info`` with the entry point.
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import yaml

from conftest import REPO, snakemake

pytestmark = pytest.mark.slow

# Each head ablated alone beside the unablated model (one mask each, in one call of the job's
# scorer), ranked by the drop: a kind headloc does not ship.
PLUGIN = '''
"""Each head ablated alone: a search kind of its own, for headloc's plugin test."""

from dataclasses import dataclass

import numpy as np

from headloc.io import Scored, oriented, write_json
from headloc.methods.contract import SCALE, Method
from headloc.methods.one_job import OneJob
from headloc.methods.rules import choice
from headloc.methods.settings import MethodOptions, setting
from headloc.methods.steps import RecoverParams


@dataclass(frozen=True)
class EachOptions(MethodOptions, section="ablate_each"):
    """Each head ablated alone (search method ablate_each, a plugin's)."""

    rank_by: str = setting("change", choice("change", "size"), doc="The score's change, or its size, ranks the heads.")


@dataclass(frozen=True)
class EachParams:
    method: str
    rank_by: str
    higher_is_better: bool = True

    @classmethod
    def of(cls, search):
        return cls(search.method.name, search.options.rank_by, search.higher_is_better)


class EachAlone(OneJob):
    name = "each_alone"
    scored = True
    steps = {"each_alone": EachParams, "recover": RecoverParams}

    def run(self, params, job):
        n, names = job.geometry.total, job.geometry.names
        masks = np.vstack([np.zeros(n, dtype=np.int8), np.eye(n, dtype=np.int8)])
        scores = oriented(Scored.of(job.score(masks)).scores, params.higher_is_better)
        change = scores[1:] - scores[0]
        key = abs if params.rank_by == "size" else float
        order = sorted(range(n), key=lambda head: (key(change[head]), head))
        result = {"method": params.method, "n_evals": n + 1, "alpha": None, "r2": None,
                  "intercept": float(scores[0]), "ranking": [names[head] for head in order],
                  "coef": {name: float(value) for name, value in zip(names, change)}}
        write_json(job.files.result(self.name), result)
        return result


METHODS = (
    Method(name="ablate_each", kind="each_alone", marker="x", options=EachOptions,
           search_id=lambda parts: f"ablate_each_{parts.options.rank_by}_{parts.tail}",
           about="each head ablated alone", label="score change when ablated alone",
           reading="Each cell: the score change when the head alone is ablated.\\n\\n" + SCALE),
)
'''
ID_DOCS = 4
SEARCH = f"ablate_each_change_n{ID_DOCS}_s0_yheadloc_ioi_margin-margin"


@pytest.fixture(scope="module")
def plugin_run(tmp_path_factory, tiny_model_dir):
    """A run of the plugin's search of ioi, to its recovery.json."""
    work = tmp_path_factory.mktemp("plugin")
    site = work / "site"
    write_package(site, "headloc_each_alone", PLUGIN)
    config = {
        "models": {"tiny": {"source": str(tiny_model_dir), "batch_size": 8}},
        "tasks": {"ioi": {"lm_eval_task": "headloc_ioi", "n_docs": 6, "id_task": "headloc_ioi_margin",
                          "id_metric": "margin"}},
        "search": {"methods": ["ablate_each"], "id_docs": ID_DOCS},
        "ablate_each": {"rank_by": "change"},  # the plugin's options section: config/schema.yaml names none
    }
    (work / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.MonkeyPatch.context() as patch:  # the environment the Snakemake run inherits
        patch.setenv("PYTHONPATH", str(site))
        snakemake(f"results/tiny/ioi/{SEARCH}/recovery.json", "--cores", "1", "--directory", str(work),
                  "--configfile", str(work / "config.yaml"))
    return work


def test_a_kind_of_a_package_of_its_own_runs_through_the_workflows_rules(plugin_run, tiny_model_dir, tokenizer):
    from transformers import AutoModelForCausalLM

    from headloc.engine.evaluation import MaskEvaluator
    from headloc.engine.lm_eval_tasks import TaskSpec

    results = plugin_run / "results"
    recovery = json.loads((results / "tiny" / "ioi" / SEARCH / "recovery.json").read_text())
    assert recovery["method"] == "ablate_each" and recovery["search"] == SEARCH
    heads = [f"L{layer}H{head}" for layer in range(2) for head in range(4)]
    assert recovery["n_evals"] == len(heads) + 1 and sorted(recovery["ranking"]) == sorted(heads)
    # rule search_job ran it (its log is the kind's), on the identification subset's scoring task:
    # each head's value is the margin's change on those documents, recomputed here
    assert (results / "logs" / "each_alone_search" / "tiny" / "ioi" / f"{SEARCH}.log").exists()
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    docs = results / "data" / "ioi" / f"id_{ID_DOCS}_seed0.jsonl"
    margin = MaskEvaluator(model, tokenizer, TaskSpec("headloc_ioi_margin", metric="margin").with_documents(str(docs)),
                           batch_size=8)
    masks = np.vstack([np.zeros(len(heads), dtype=np.int8), np.eye(len(heads), dtype=np.int8)])
    scores = [margin.evaluate_mask(mask).score for mask in masks]
    assert recovery["coef"] == pytest.approx({h: scores[1 + i] - scores[0] for i, h in enumerate(heads)}, abs=1e-5)
    assert recovery["intercept"] == pytest.approx(scores[0], abs=1e-5)
    assert recovery["ranking"] == sorted(heads, key=lambda h: (recovery["coef"][h], heads.index(h)))
    # the recovery's own fields, as for any kind that keeps no per-document scores
    assert recovery["top_heads"] == recovery["ranking"][:5] and set(recovery["status"].values()) == {"estimated"}


def write_package(site, name: str, module: str, points: int = 1) -> None:
    """A package ``name`` on ``site`` (a folder for PYTHONPATH): ``module`` as ``<name>.py``, named by
    ``points`` entry points of the group (more than one: the same module twice)."""
    info = site / f"{name}-0.1.dist-info"
    info.mkdir(parents=True)
    (site / f"{name}.py").write_text(module)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[headloc.methods]\n" + "".join(f"{name}{i} = {name}\n" for i in range(points)))


def registries(site) -> subprocess.CompletedProcess:
    """The methods' and kinds' registries read in a Python that finds ``site`` on its path."""
    code = ("from headloc import methods; from headloc.methods import kinds; "
            "print(methods.names(), kinds.names(), methods.names(kind='each_alone'))")
    return subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(site)},
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("change, error", [
    (('"ablate_each"', '"greedy"'),  # its name and its options' section
     "search method 'greedy' of plugin clash is already declared; give it another name"),
    (('name = "each_alone"', 'name = "gradient"'), "method kind 'gradient' defined twice (in clash)"),
])
def test_a_plugin_takes_no_name_headloc_has(tmp_path, change, error):
    write_package(tmp_path, "clash", PLUGIN.replace(*change))
    found = registries(tmp_path)
    assert found.returncode != 0 and error in found.stderr


def test_a_module_named_twice_is_read_once(tmp_path):
    write_package(tmp_path, "twice", PLUGIN, points=2)
    found = registries(tmp_path)
    assert found.returncode == 0, found.stderr
    # its method once, its kind once, and the method of that kind (the registry's instance of the kind)
    assert found.stdout.count("ablate_each") == 2 and found.stdout.count("each_alone") == 1
    assert found.stdout.strip().endswith("['ablate_each']")


def test_an_entry_point_that_does_not_import_is_named(tmp_path):
    write_package(tmp_path, "broken", "import no_such_module\n")
    found = registries(tmp_path)
    assert "entry point 'broken0' of group 'headloc.methods' names module 'broken', which does not import" in found.stderr


def test_a_plugins_options_are_checked_as_the_schema_s_own(tmp_path):
    """The config's section of a plugin's options: filled in with its defaults where empty, a bad
    value refused naming its key and what is valid, as for headloc's own methods."""
    write_package(tmp_path, "with_options", PLUGIN)
    code = f"""
from headloc.workflow.schema import validate_config
for section in ({{}}, {{"rank_by": "sign"}}):
    config = {{"models": {{"m": {{"source": "x"}}}}, "tasks": {{"t": {{"lm_eval_task": "x"}}}}, "ablate_each": section}}
    try:
        validate_config(config, {str(REPO / "config" / "schema.yaml")!r})
        print(config["ablate_each"])
    except ValueError as error:
        print(error)
"""
    ran = subprocess.run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                         capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr[-3000:]
    assert ran.stdout.splitlines() == ["{'rank_by': 'change'}",
                                       "config ablate_each.rank_by: 'sign' is not valid; expected one of: change, size"]


def test_locate_runs_a_plugins_method_as_the_workflow(plugin_run, tiny_model_dir):
    """headloc.locate in a Python that finds the package: the same ranking and values as the
    workflow's search of the same documents."""
    docs = plugin_run / "results" / "data" / "ioi" / f"id_{ID_DOCS}_seed0.jsonl"
    code = f"""
import json, headloc
from headloc.model.loading import load_model
model, tokenizer = load_model({str(tiny_model_dir)!r})
found = headloc.locate(model, tokenizer, "headloc_ioi_margin", method="ablate_each", documents={str(docs)!r},
                       batch_size=8, model_name="tiny", progress=False)
print(json.dumps({{"ranking": found.ranking, "values": found.values, "n_evals": found.n_evals}}))
"""
    ran = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(plugin_run / "site"), "HF_HUB_OFFLINE": "1"})
    assert ran.returncode == 0, ran.stderr[-3000:]
    found = json.loads(ran.stdout.strip().splitlines()[-1])
    recovery = json.loads((plugin_run / "results" / "tiny" / "ioi" / SEARCH / "recovery.json").read_text())
    assert found["ranking"] == recovery["ranking"] and found["n_evals"] == recovery["n_evals"]
    assert found["values"] == pytest.approx(recovery["coef"], abs=1e-6)
