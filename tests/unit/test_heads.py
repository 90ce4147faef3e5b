import pytest

from headloc.heads import format_head, format_headset, head_index, head_name, headset_mask, parse_head, parse_headset


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


@pytest.mark.parametrize("name, outside", [("L30H0", "layers 0..29"), ("L29H9", "heads 0..8"), ("L30H9", "layers 0..29")])
def test_one_past_the_last_layer_or_head_is_refused(name, outside):
    """The bounds are exclusive: L30H0 would be flat index 270 (one past a 270-head mask), L29H9 index
    270 too, and both would ablate nothing or another head if accepted."""
    with pytest.raises(ValueError, match=f"head {name} is outside the model: .*{outside}"):
        head_index(name, 30, 9)
    with pytest.raises(ValueError, match=f"head {name} is outside the model"):
        headset_mask([name], 30, 9)


def test_the_last_head_is_accepted():
    assert head_index("L29H8", 30, 9) == 269 and head_index("L0H0", 30, 9) == 0
    assert headset_mask(["L29H8"], 30, 9).tolist() == [0] * 269 + [1]


@pytest.mark.parametrize("bad, spelling", [("L01H05", "L1H5"), ("L1H05", "L1H5"), ("L00H0", "L0H0"), ("L10H010", "L10H10")])
def test_one_head_has_one_spelling(bad, spelling):
    """Names are compared as text (a universal head filtered out of a ranking): another spelling of
    a head is refused, naming the one headloc writes, rather than never matching."""
    with pytest.raises(ValueError, match=f"bad head name '{bad}': write it '{spelling}'"):
        parse_head(bad)
    with pytest.raises(ValueError, match=f"write it '{spelling}'"):
        headset_mask([bad], 30, 11)
