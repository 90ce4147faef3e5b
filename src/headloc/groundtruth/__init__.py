"""Planted-head models: small Llama checkpoints whose capability heads are known.

- :mod:`headloc.groundtruth.recipe`: a family member's recipe from ``config/ground_truth.yaml``
- :mod:`headloc.groundtruth.tasks`: vocabulary, general text, task documents, lm-eval task folder
- :mod:`headloc.groundtruth.build`: tokenizer, architecture, training, ``save_pretrained``
- :mod:`headloc.groundtruth.truth`: the measured truth (``truth.json``)
- :mod:`headloc.groundtruth.scoring`: a search's ranking scored against a truth, per kind of head
- :mod:`headloc.groundtruth.benchmark`: every search method run on planted models and scored

See docs/ground-truth.md.
"""
