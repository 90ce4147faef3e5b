"""Which figures a run draws, through the rules (dry runs): `all` leaves out each figure its config
cannot fill, and asking for one by name or by file stops before any job, saying what the config
lacks; the same figure is drawn once the config has it."""

import re

import pytest
import yaml

from conftest import REPO, snakemake

DEMO = REPO / "config" / "demo.yaml"


def planned_figures(output: str) -> set[str]:
    """The figure files a dry run's jobs would write."""
    return set(re.findall(r"results/figures/([\w.]+)", output))


def dry_run(tmp_path, *targets, config=DEMO, check=True):
    result = snakemake(*targets, "-n", "--directory", str(tmp_path), "--configfile", str(config), cwd=tmp_path,
                       check=check)
    return result, result.stdout + result.stderr


def test_the_demo_plans_only_the_figures_it_can_fill(tmp_path):
    _, output = dry_run(tmp_path)
    assert planned_figures(output) == {"fig1.png", "fig1.pdf", "fig2.png", "fig2.pdf"}


@pytest.mark.parametrize("target, figure, lacks", [
    ("fig3", "fig3", "this config sets no knowledge.tasks and no knowledge.eval_tasks"),
    ("results/figures/fig4.pdf", "fig4", "this config sets no knowledge.tasks (docs/configuration.md)"),
    ("methods", "methods", "this config searches with one, screened_greedy (search.methods): list two or more"),
])
def test_asking_the_demo_for_a_figure_it_cannot_fill_says_what_its_config_lacks(tmp_path, target, figure, lacks):
    result, output = dry_run(tmp_path, target, check=False)
    assert result.returncode != 0
    assert f"figure {figure} is not drawn for this config: " in output and lacks in output, output[-3000:]
    assert "Job stats" not in output  # refused before any job is planned


def test_a_second_method_brings_the_methods_figure_back(tmp_path):
    config = yaml.safe_load(DEMO.read_text())
    config["search"]["methods"] = ["screened_greedy", "attribution"]
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(config))
    _, output = dry_run(tmp_path, config=tmp_path / "two.yaml")
    assert planned_figures(output) == {f"{name}.{ext}" for name in ("fig1", "fig2", "methods") for ext in ("png", "pdf")}
