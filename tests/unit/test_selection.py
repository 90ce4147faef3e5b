"""Universal, task-specific and knowledge heads from rankings."""

from headloc.workflow.selection import knowledge_heads, task_heads, universal_heads

RANKINGS = {
    "gsm8k": ["L1H29", "L15H13", "L16H21", "L0H31", "L9H9"],
    "arithmetic": ["L15H13", "L1H29", "L16H21", "L3H3", "L4H4"],
    "mbpp": ["L0H31", "L24H31", "L1H29", "L6H6", "L7H7"],
    "swear": ["L11H2", "L26H7", "L14H12", "L1H1", "L8H15"],
}
CAPS = {"gsm8k": "math", "arithmetic": "math", "mbpp": "code", "swear": "language"}


def test_universal_heads_need_distinct_capabilities_not_just_tasks():
    found = universal_heads(RANKINGS, CAPS, top_n=5, min_capabilities=2)
    # L15H13 and L16H21 hit two tasks, but both are math: task-specific, not universal
    assert found == {"L0H31": ["gsm8k", "mbpp"], "L1H29": ["gsm8k", "arithmetic", "mbpp"]}
    assert universal_heads(RANKINGS, CAPS, top_n=1, min_capabilities=2) == {}
    assert universal_heads(RANKINGS, CAPS, top_n=5, min_capabilities=3) == {}


def test_universal_depth_counts():
    # at depth 2, L1H29 hits gsm8k and arithmetic (math) only; L0H31 only mbpp
    assert universal_heads(RANKINGS, CAPS, top_n=2) == {}
    assert universal_heads(RANKINGS, CAPS, top_n=3) == {"L1H29": ["gsm8k", "arithmetic", "mbpp"]}


def test_given_universal_heads_replace_detection_and_keep_their_hits():
    # L15H13 is math-only (not detected); given, it is universal, mapped to the tasks it hits at
    # top_n; a given head in no top (L2H2) hits nothing; the detected L1H29 is not added
    found = universal_heads(RANKINGS, CAPS, top_n=5, given=["L15H13", "L2H2"])
    assert found == {"L2H2": [], "L15H13": ["gsm8k", "arithmetic"]}
    assert universal_heads(RANKINGS, CAPS, given=[]) == {}


def test_task_heads_skip_excluded_and_keep_order():
    assert task_heads(RANKINGS["gsm8k"], 3, exclude=["L1H29", "L0H31"]) == ["L15H13", "L16H21", "L9H9"]
    assert task_heads(RANKINGS["gsm8k"], 2) == ["L1H29", "L15H13"]


def test_knowledge_heads_shared_by_all_or_min_tasks():
    rankings = {"bio": ["L0H22", "L1H1", "L11H8"], "chem": ["L1H1", "L0H22", "L9H26"],
                "cyber": ["L6H31", "L0H22", "L1H1"]}
    assert knowledge_heads(rankings, ["bio", "chem", "cyber"], top_n=2) == {"L0H22": ["bio", "chem", "cyber"]}
    # without L0H22, L1H1 moves up into every filtered top 2
    assert knowledge_heads(rankings, ["bio", "chem", "cyber"], top_n=2, exclude=["L0H22"]) == {
        "L1H1": ["bio", "chem", "cyber"]}
    # at depth 1 no head is shared by all three, but L1H1 by two (chem; bio after the filter)
    assert knowledge_heads(rankings, ["bio", "chem", "cyber"], top_n=1, exclude=["L0H22"]) == {}
    assert knowledge_heads(rankings, ["bio", "chem", "cyber"], top_n=1, min_tasks=2,
                           exclude=["L0H22"]) == {"L1H1": ["bio", "chem"]}
    assert knowledge_heads(rankings, [], top_n=2) == {}
