"""The search algorithms, each a pure function or scikit-learn estimator of arrays and models:
measurement matrices (``masks``), the Lasso of eq. (1) and its stability (``recovery``), two-stage
compressed sensing (``adaptive``), greedy rounds (``greedy``), attribution patching
(``attribution``) and Causal Head Gating (``chg``); and the masks a search needs (``budget``).

They know nothing of the workflow; :mod:`headloc.methods` binds each to a search method.
"""
