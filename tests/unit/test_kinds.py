"""Method kinds (headloc.methods.kinds): one object per kind owns what the kind decides, so that a new
kind is its module and its rule. A kind defined here, registered as its module would be, is planned,
told its parameters, recovered and driven with no other file knowing it; no module compares a
kind's name outside the registry; the driver and the workflow lay a search's files out alike."""

import ast
import copy
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, accuracy_demo
from headloc import methods
from headloc.heads import HeadGeometry
from headloc.io import write_json
from headloc.methods import driver, kinds
from headloc.methods.contract import Method
from headloc.methods.kinds import Kind, SearchFiles, read_result
from headloc.methods.settings import SearchSettings, SearchSpec
from headloc.methods.steps import RecoverInputs, RecoverParams
from headloc.workflow.schema import validate_config
from headloc.workflow.plan import Plan

# What adding a kind takes, tests and a docs row aside: its module and one rule (with its script).
# test_a_new_kind_needs_only_its_module_and_its_rule shows the module is enough for everything but
# the jobs; grow this list only with a reason.
A_NEW_KIND_NEEDS = ["src/headloc/methods/kinds/<kind>.py", "rules/search.smk", "scripts/<rule>.py"]


@dataclass(frozen=True)
class AloneParams:
    """The toy kind's one step: the method and its seed."""

    method: str
    seed: int

    @classmethod
    def of(cls, search):
        return cls(search.method.name, search.settings.seed)


class Alone(Kind):
    """A toy kind: one job scores the unablated model and every head alone, and ranks the heads by
    their drop (one-shot greedy as a job of its own)."""

    name = "alone"
    scored = True
    rule = "alone_search"
    steps = {"alone": AloneParams, "recover": RecoverParams}

    def recovery_inputs(self, files, search, model=()):
        return RecoverInputs(result=files.result(self.name))

    def drive(self, search, job):
        n = job.geometry.total
        scores = np.asarray(job.score(np.vstack([np.zeros(n, dtype=np.int8), np.eye(n, dtype=np.int8)])))
        effect = scores[1:] - scores[0]
        names = job.geometry.names
        write_json(job.files.result(self.name), {
            "method": self.params("alone", search).method, "n_evals": n + 1, "alpha": None, "r2": None,
            "intercept": float(scores[0]), "ranking": [names[i] for i in np.argsort(effect, kind="stable")],
            "coef": {name: float(e) for name, e in zip(names, effect)}})
        return self.recovery_inputs(job.files, search)


@pytest.fixture
def toy_kind(monkeypatch):
    """The toy kind and one method of it, registered as their modules would be."""
    monkeypatch.setitem(kinds.registry(), "alone", Alone())
    method = Method(name="alone_heads", kind="alone", about="every head alone, as a job of its own",
                    label="score change when ablated alone", reading="", marker="1",
                    search_id=lambda parts: f"alone_heads_{parts.tail}", recover=read_result)
    monkeypatch.setitem(methods.registry(), "alone_heads", method)
    return method


def test_a_new_kind_needs_only_its_module_and_its_rule(toy_kind, tmp_path):
    """Planned (its search id, the searches its rule runs), told its parameters, its recovery's
    inputs named, and driven in one process: nothing but the kind's class knows it."""
    config = accuracy_demo()
    config["search"]["methods"] = ["cs_stratified", "alone_heads"]
    validate_config(config, REPO / "config/schema.yaml")  # the schema's method enum is the registry's
    plan = Plan(config)
    search = "alone_heads_n20_s0"
    assert search in plan.searches["ioi"] and plan.searches_run_by("alone_search") == {search}
    assert plan.step_params("ioi", search, "alone") == AloneParams("alone_heads", 0)
    assert plan.recovery_inputs("m", "ioi", search) == {"result": f"results/m/ioi/{search}/alone.json"}

    effect = np.zeros(8)
    effect[5] = -0.5
    found = driver.drive(toy_kind, lambda masks: 0.9 + masks @ effect, HeadGeometry(2, 4), tmp_path)
    assert found["ranking"][0] == "L1H1" and found["n_evals"] == 9 and found["top_heads"][0] == "L1H1"
    assert json.loads((tmp_path / "alone.json").read_text())["method"] == "alone_heads"


def test_the_manual_lists_the_files_a_new_kind_needs_and_no_more():
    """docs/extending.md's "A method kind" numbers the files a new kind is written in; a kind that
    needed one more file would have to say so there, and this list would have to grow with it."""
    text = (REPO / "docs" / "extending.md").read_text()
    section = text[text.index("## A method kind"):]
    section = section[:section.index("\n## ", 1)]
    assert re.findall(r"^\d+\. \*\*`([^`]+)`\*\*", section, re.M) == A_NEW_KIND_NEEDS


def test_a_kind_is_checked_against_what_its_methods_supply():
    with pytest.raises(ValueError, match="method m: a masks method supplies an algorithm: design"):
        Method(name="m", kind="masks", about="", label="", reading="", marker="o", search_id=str, recover=read_result)
    with pytest.raises(ValueError, match="method m: a draw method supplies no algorithm"):
        Method(name="m", kind="draw", about="", label="", reading="", marker="o", search_id=str, recover=read_result,
               algorithm=len)
    with pytest.raises(ValueError, match="unknown method kind 'mask'; known: draw, gradient, guided, masks, rounds, sequential"):
        Method(name="m", kind="mask", about="", label="", reading="", marker="o", search_id=str, recover=read_result)
    # a masks kind has no recovery of its own: its methods bring theirs (the Lasso, one-shot greedy's)
    with pytest.raises(ValueError, match=r"method m: a masks method supplies its recover\(inputs, names, params, log\)"):
        Method(name="m", kind="masks", about="", label="", reading="", marker="o", search_id=str, algorithm=len)


def test_the_recovery_refuses_a_one_job_result_of_another_search_or_of_other_heads(tmp_path):
    """Rule recover_heads' step on a sequential job's result: recovered when it is the search's own;
    refused by name when the file holds another method's search, or ranks or values other heads
    than the model's (a result left by another config or model in the same folder)."""
    from headloc.methods import steps

    method, geometry = methods.get("group_testing"), HeadGeometry(2, 4)
    settings = SearchSettings(n_masks=6, top_k=2, options={"group_testing": {"group_size": 2}})
    effect = np.linspace(-0.4, 0.0, 8)
    log = logging.getLogger("test")
    driver.drive(method, lambda masks: 0.9 + masks @ effect, geometry, tmp_path, settings, log=log)
    search = SearchSpec(method, settings)
    inputs, params = method.kind.recovery_inputs(SearchFiles(str(tmp_path)), search), method.kind.params("recover", search)
    result = tmp_path / "sequential.json"
    own = json.loads(result.read_text())
    assert steps.recover(params, inputs, geometry, log)["ranking"] == own["ranking"]
    for changed, message in (({"method": "thompson"}, "holds a 'thompson' search, expected 'group_testing'"),
                             ({"ranking": own["ranking"][:-1]}, "ranks 7 heads, not the model's 8"),
                             ({"coef": {**own["coef"], "L2H0": 0.0}}, "ranks 8 heads, not the model's 8")):
        write_json(result, {**own, **changed})
        with pytest.raises(ValueError, match=message):
            steps.recover(params, inputs, geometry, log)


SOURCES = [*sorted((REPO / "src/headloc").rglob("*.py")), *sorted((REPO / "scripts").glob("*.py")),
           *sorted((REPO / "benchmarks").glob("*.py"))]
REGISTRY = {REPO / "src/headloc/methods/kinds/__init__.py", REPO / "src/headloc/methods/registry.py"}


def kind_comparisons(source: str) -> list[str]:
    """Comparisons (``==``, ``!=``, ``in``) of a kind's name with an expression of a kind."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Compare):
            continue
        operands = [node.left, *node.comparators]
        named = {c.value for o in operands for c in ast.walk(o) if isinstance(c, ast.Constant) and c.value in kinds.names()}
        if named and any(re.search(r"\bkind\b", ast.unparse(o)) for o in operands):
            found.append(ast.unparse(node))
    return found


def test_a_kind_s_name_is_compared_only_in_the_registry():
    found = {str(path.relative_to(REPO)): kind_comparisons(path.read_text()) for path in SOURCES if path not in REGISTRY}
    assert {path: comparisons for path, comparisons in found.items() if comparisons} == {}
    smk = "\n".join(path.read_text() for path in [*(REPO / "rules").glob("*.smk"), REPO / "Snakefile"])
    assert not re.findall(r"kind\W*(==|!=| in )", smk)


def test_the_scan_finds_a_comparison_of_a_kind_s_name():
    assert kind_comparisons('if method.kind == "gradient": pass') == ["method.kind == 'gradient'"]
    assert kind_comparisons('x = spec.kind.name in ("draw", "masks")') == ["spec.kind.name in ('draw', 'masks')"]
    assert kind_comparisons('if row["kind"] == "task": pass') == []  # a head selection's kind, not a method's


@pytest.mark.parametrize("name", [n for n in methods.names() if not methods.get(n).kind.gold])
def test_the_driver_lays_out_what_the_workflow_s_recovery_reads(name, tmp_path):
    """Driven in one process, every method leaves the files its kind's recovery reads, at the paths the
    workflow's plan names for the same search (relative to the search's folder)."""
    method = methods.get(name)
    settings = SearchSettings(n_masks=6, top_k=2, sparsity=0.25, alpha=0.001,
                              options={"group_testing": {"group_size": 2}, "conditional_group_testing": {"group_size": 2}})
    effect = np.linspace(-0.4, 0.0, 8)
    driver.drive(method, lambda masks: 0.9 + masks @ effect, HeadGeometry(2, 4), tmp_path, settings,
                 log=logging.getLogger("test"))
    driven = method.kind.recovery_inputs(SearchFiles(str(tmp_path)), SearchSpec(method, settings)).named()
    files = [f for value in driven.values() for f in ([value] if isinstance(value, str) else value)]
    assert all(Path(f).is_file() for f in files), files

    config = accuracy_demo()
    config["search"].update(methods=[name], n_masks=6, sparsity=0.25, chunks=1)
    config["validation"].update(top_k=2, method=name)
    config["universal"] = {"filter": False}
    validate_config(config, REPO / "config/schema.yaml")
    plan = Plan(copy.deepcopy(config))
    (search,) = plan.searches["ioi"]
    planned = plan.recovery_inputs("m", "ioi", search)
    folder = f"results/m/ioi/{search}/"
    relative = {key: [f.removeprefix(folder) for f in ([value] if isinstance(value, str) else value)]
                for key, value in planned.items()}
    assert relative == {key: [str(Path(f).relative_to(tmp_path)) for f in ([value] if isinstance(value, str) else value)]
                        for key, value in driven.items()}
