"""Planted-head models: small Llama checkpoints whose capability heads are known.

- :mod:`headloc.groundtruth.recipe`: a family member's recipe from ``config/ground_truth.yaml``
- :mod:`headloc.groundtruth.design`: the design a family's sizes share: words, tasks, roles
- :mod:`headloc.groundtruth.tasks`: vocabulary, task documents, lm-eval task folder
- :mod:`headloc.groundtruth.general_text`: the general text every head is trained on
- :mod:`headloc.groundtruth.build`: tokenizer, architecture, training, ``save_pretrained``
- :mod:`headloc.groundtruth.frozen`, :mod:`headloc.groundtruth.frozen_rows`: the ``frozen`` scheme
- :mod:`headloc.groundtruth.construct`, :mod:`headloc.groundtruth.construct_layout`,
  :mod:`headloc.groundtruth.construct_heads`: the ``constructed`` scheme
- :mod:`headloc.groundtruth.truth`: the measured truth (``truth.json``), scored by
  :mod:`headloc.groundtruth.mask_scores`, certified by :mod:`headloc.groundtruth.certificates`,
  summed up by :mod:`headloc.groundtruth.truth_table` (``truth.md``)
- :mod:`headloc.groundtruth.scoring`: a search's ranking scored against a truth, per kind of head
- :mod:`headloc.groundtruth.benchmark`: every search method run on planted models and scored

See docs/ground-truth.md.
"""
