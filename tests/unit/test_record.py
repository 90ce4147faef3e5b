"""The record of a one-job search (headloc.methods.record): written whole and read back as it was,
per-document scores and gradients included; another search's record, or one left on other inputs,
is not resumed."""

import logging

import numpy as np

from headloc.methods.record import Record, record_key

LOG = logging.getLogger("test_record")


def filled(identity: str) -> Record:
    record = Record.empty(identity, 4)
    record.add_scores(np.array([[0, 0, 0, 0], [1, 0, 1, 0]]), [0.9, 0.4], np.array([[1.0, 0.8], [0.5, 0.3]]))
    record.add_estimate([2], np.array([0.1, -0.2, 0.0, 0.3]), 2.5)
    return record


def test_a_record_reads_back_as_it_was_written(tmp_path):
    path = tmp_path / "record.npz"
    filled("search a").write(path)
    found = Record.read(path, "search a", 4, LOG)
    assert found.masks.tolist() == [[0, 0, 0, 0], [1, 0, 1, 0]] and found.scores.tolist() == [0.9, 0.4]
    assert found.per_doc.tolist() == [[1.0, 0.8], [0.5, 0.3]]
    assert found.backgrounds.tolist() == [[0, 0, 1, 0]] and found.costs.tolist() == [2.5]
    assert found.estimate([2]).tolist() == [0.1, -0.2, 0.0, 0.3] and found.estimate([1]) is None
    assert found.score(np.array([1, 0, 1, 0])) == 0.4 and found.equivalent() == 2.5
    # a row without per-document scores leaves the record without any (evidence then draws none)
    found.add_scores(np.array([[0, 1, 0, 0]]), [0.7], None)
    assert found.per_doc is None


def test_another_search_s_record_is_not_resumed(tmp_path):
    path = tmp_path / "record.npz"
    filled("search a").write(path)
    assert len(Record.read(path, "search b", 4, LOG).masks) == 0
    assert len(Record.read(tmp_path / "none.npz", "search a", 4, LOG).masks) == 0


def test_the_key_changes_with_each_input_file(tmp_path):
    docs = tmp_path / "docs.jsonl"
    docs.write_text("{}\n")
    fields = {"task_digest": "d", "location": "m", "model": {}, "task": {"scoring": {"metric": "acc"}}}
    before = record_key(**fields, inputs=[docs])
    stamp = docs.stat().st_mtime_ns + 10**9
    import os

    os.utime(docs, ns=(stamp, stamp))
    assert record_key(**fields, inputs=[docs]) != before
    assert record_key(**{**fields, "task": {"scoring": {"metric": "acc"}, "gold": {}}}, inputs=[docs]) != before
