"""The front door for a model you already have: :func:`locate` (``headloc.locate``) and the
command ``python -m headloc locate`` (:mod:`headloc.api.cli`).

It makes the calls the workflow's rules make (:func:`headloc.methods.driver.drive`, then the
method's ``recover``), with headloc's lm-eval engine scoring the masks on your loaded model, so a
search found here and the same search of the workflow give the same ranking.
"""

from headloc.api.located import Located
from headloc.api.locator import locate
from headloc.api.validation import Validation

__all__ = ["Located", "Validation", "locate"]
