"""The suite's own guard rails (tests/conftest.py): no test runs Snakemake in the checkout, so what
`make demo` left in results/ changes no test's outcome; the modules scheduled first exist."""

import pytest

from conftest import LONGEST_FIRST, REPO, module_of, snakemake


def test_snakemake_refuses_to_run_in_the_checkout():
    with pytest.raises(ValueError, match="tests run Snakemake in their own directory; pass --directory or cwd"):
        snakemake("-n", "--configfile", "config/demo.yaml")
    with pytest.raises(ValueError, match="own directory"):
        snakemake("-n", cwd=REPO / ".")


def test_every_snakemake_call_of_the_suite_goes_through_the_guarded_helper():
    """Subprocess calls of Snakemake outside the helper (their own Snakefile, or a signal to send):
    listed here, so that a new one is looked at."""
    direct = sorted(str(path.relative_to(REPO)) for path in (REPO / "tests").rglob("*.py")
                    if '"-m", "snakemake"' in path.read_text() and path.name not in ("conftest.py", "test_test_helpers.py"))
    assert direct == ["tests/integration/test_certified.py", "tests/slurm/test_real_slurm.py",
                      "tests/unit/test_report.py", "tests/workflow/test_portable.py", "tests/workflow/test_reliability.py"]
    # each runs in a tmp_path or mktemp folder: a new one is to be read for that before it is added here


def test_the_longest_modules_are_named_as_they_are_on_disk(request):
    assert module_of(request.node) == "tests/unit/test_test_helpers.py"
    assert all((REPO / module).is_file() for module in LONGEST_FIRST), "a renamed module would lose its place"
