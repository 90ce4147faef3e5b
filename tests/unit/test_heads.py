import pytest

from headloc.heads import format_head, format_headset, head_index, head_name, parse_head, parse_headset


def test_round_trip_every_head_of_a_model():
    n_layers, n_heads = 30, 9
    for index in range(n_layers * n_heads):
        name = head_name(index, n_heads)
        assert head_index(name, n_layers, n_heads) == index
        assert format_head(*parse_head(name)) == name


def test_known_spellings():
    assert head_name(0, 9) == "L0H0"
    assert head_name(9 * 15 + 4, 9) == "L15H4"
    assert parse_head("L15H13") == (15, 13)


def test_headset_is_canonical():
    assert format_headset(["L16H21", "L15H13", "L2H3", "L15H13"]) == "L2H3+L15H13+L16H21"
    assert format_headset([]) == "none"
    assert parse_headset("L2H3+L15H13") == ["L2H3", "L15H13"]
    assert parse_headset("none") == []


@pytest.mark.parametrize("bad", ["L1", "H1L1", "l1h1", "L-1H2", "L1H2x", ""])
def test_bad_head_names_raise(bad):
    with pytest.raises(ValueError, match="bad head name"):
        parse_head(bad)


def test_head_outside_model_raises():
    with pytest.raises(ValueError, match="L99H0 is outside the model: layers 0..29"):
        head_index("L99H0", 30, 9)
    with pytest.raises(ValueError, match="heads 0..8"):
        head_index("L0H9", 30, 9)
