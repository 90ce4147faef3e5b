"""Each head's evidence as every reader shows it (headloc.search.evidence.head_evidence): the CLI's
table, a Located's summary and the tables' effects column, each to its own digits, against the
record's numbers written out by hand."""

from headloc.api.cli import summary
from headloc.api.located import Located
from headloc.workflow.results import effect_words

RECORD = {"model": "m", "task": "ioi", "search": "greedy1s_n4_s0", "method": "greedy1s", "n_layers": 1,
          "n_heads": 2, "n_evals": 3, "ranking": ["L0H1", "L0H0"], "top_heads": ["L0H1", "L0H0"],
          "coef": {"L0H1": -1.98351, "L0H0": -0.0}, "interval": {"L0H1": [-2.314962, -1.620481], "L0H0": None},
          "p_top_k": {"L0H1": 0.971, "L0H0": None}, "found": ["L0H1"], "status": {}, "warnings": []}


def located() -> Located:
    return Located(record=dict(RECORD), parameters={}, task=None, model=None, tokenizer=None)


def test_the_cli_table_shows_four_digits_of_the_interval():
    lines = summary(located(), "out").splitlines()
    row = next(line for line in lines if line.strip().startswith("1  L0H1"))
    assert row.split() == ["1", "L0H1", "-1.9835", "[-2.315,", "-1.62]", "0.97"]
    empty = next(line for line in lines if line.strip().startswith("2  L0H0"))
    assert empty.split() == ["2", "L0H0", "0.0000", "-", "-"]  # -0.0 prints as 0, no interval, no P


def test_a_located_summary_and_the_tables_show_three_digits_of_the_interval():
    assert "L0H1 -1.984 [-2.31, -1.62] P 0.97, L0H0 0" in repr(located())
    assert effect_words(RECORD, "L0H1") == "L0H1 -1.98 [-2.31, -1.62] P 0.97"
    assert effect_words(RECORD, "L0H0") == "L0H0 0"
