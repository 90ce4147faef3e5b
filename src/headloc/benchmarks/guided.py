"""Gradient-guided greedy (:func:`headloc.search.guided.guided_greedy`) with chosen options on
SmolLM2's demo tasks (benchmarks/guided_greedy.py), recorded as the SmolLM2-vs-greedy comparison
records its searches (:mod:`headloc.benchmarks.vs_greedy`), so that its table sets it beside greedy.

Each seed as the comparison runs it: the task's full data generated with the seed, the
identification subset drawn with it, the search scored on the task's continuous score
(``id_task``: ioi's margin), its gradient taken on the gold continuation's log-likelihood of the
same documents (attribution beside the background), its k heads validated on the full data.
"""

from __future__ import annotations

import time

from headloc.benchmarks import landscape, vs_greedy


def kept_options(record, label: str, options: dict, top_k: int, *, refuse=None) -> bool:
    """Whether ``record`` (a seed's records) holds ``label``'s search already; when it ran with
    other options or another top k, ``refuse(message)`` (a parser's error) or ValueError."""
    kept = vs_greedy.finished(record).get(label)
    if not kept:
        return False
    asked = {**options, "top_k": top_k}
    if {**kept["options"], "top_k": len(kept["top"])} != asked:
        message = (f"{record}: its {label} record ran with {kept['options']} and top k {len(kept['top'])}, "
                   f"not {asked}; give another --label or --out")
        if refuse is None:
            raise ValueError(message)
        refuse(message)
    return True


def run_seed(model, tokenizer, task: dict, search: dict, name: str, seed: int, *, options: dict, label: str,
             settings: vs_greedy.Comparison) -> dict:
    """One search (``options``: guided greedy's m, m_abs and carry) and its validation record."""
    from headloc.engine.supervision import task_examples
    from headloc.heads import HeadGeometry, head_name
    from headloc.search.attribution import attribution
    from headloc.search.guided import guided_greedy

    geometry = HeadGeometry.of(model.config)
    ids, data, n_full = vs_greedy.identification_documents(task, search, seed)
    gold = landscape.identification_task(task, ids, data, gold=True)
    examples = task_examples(tokenizer, gold.spec, include_path=gold.task_folders)
    score_sets = landscape.task_scorer(model, tokenizer, landscape.identification_task(task, ids, data),
                                       batch_size=settings.batch_size)

    def estimate(background):
        return -attribution(model, examples, batch_size=settings.batch_size, background=background).effects

    started = time.perf_counter()
    found = guided_greedy(estimate, score_sets, geometry.total, settings.top_k, **options)
    heads = [head_name(h, geometry.n_heads) for h in found.heads]
    validate, metric = vs_greedy.validators(model, tokenizer, task, data, settings)
    row = vs_greedy.validation_record(vs_greedy.Searched(heads, found.evaluations), validate, geometry, task=name,
                                      seed=seed, label=label, n_docs=n_full, seconds=time.perf_counter() - started,
                                      settings=settings, metric=metric, relative=task.get("relative", False),
                                      id_metric=task.get("id_metric"))
    return {**row, "gradient_passes": found.gradient_passes, "drops": found.drops,
            "lists": [[head_name(h, geometry.n_heads) for h in short] for short in found.lists], "options": options}
