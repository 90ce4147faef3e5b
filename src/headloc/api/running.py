"""How :func:`headloc.locate` runs a search or a validation on a user's model: in eval() mode and
back, lm-eval quiet, one progress bar with the search's log lines above it, the driver's score and
gradient."""

from __future__ import annotations

import contextlib
import logging

from headloc.api.tasks import Task, mask_scorer
from headloc.methods.settings import SearchSettings

LOG = logging.getLogger("headloc.locate")


@contextlib.contextmanager
def evaluation_mode(model):
    """``model`` in eval() mode while open (no dropout in a score or a gradient), then every module
    back in the mode it had: a model passed in train() mode comes back in train() mode."""
    modes = [(module, module.training) for module in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for module, training in modes:
            module.training = training


def quiet(task: Task):
    """lm-eval's own bars and messages off (a callable task runs no lm-eval): headloc's bar says
    how far a search or a validation is, lm-eval's would add one per mask."""
    if task.callable:
        return contextlib.nullcontext()
    from headloc.engine.lm_eval_tasks import lm_eval_quiet

    return lm_eval_quiet()


def search_bar(spec, settings: SearchSettings, progress: bool):
    """One bar for the whole search, over every call of its ``score(masks)`` (a greedy method's
    rounds, a sequential search's proposals): the masks scored, out of the budget where the method
    spends one. None when ``progress`` is off or the method scores no masks."""
    if not (progress and spec.scored):
        return contextlib.nullcontext()
    from tqdm.auto import tqdm

    return _logged_above(tqdm(total=settings.n_masks if spec.budgeted else None, desc=f"{spec.name} masks",
                              unit="mask"))


@contextlib.contextmanager
def _logged_above(bar):
    """``bar``, with what the search logs while it is drawn (its evidence: "no head found above
    noise") printed on a line above it instead of glued to its end. Only where Python's last-resort
    handler would print the line (no handler on this logger or the root): a handler a user set up
    keeps the record as it is."""
    from tqdm.contrib.logging import logging_redirect_tqdm

    redirect = not (LOG.handlers or logging.getLogger().handlers)
    with bar, (logging_redirect_tqdm([LOG], tqdm_class=type(bar)) if redirect else contextlib.nullcontext()):
        yield bar


def scorer(spec, task: Task, model, tokenizer, batch_size, masks_per_pass, progress, bar=None):
    """The driver's ``score(masks)``; a method that scores nothing (gradient, draw) never calls it."""
    if not spec.scored:
        return None
    score = mask_scorer(task, model, tokenizer, batch_size=batch_size, masks_per_pass=masks_per_pass,
                        progress=progress, bar=bar, per_doc=True)
    return lambda masks: score(masks, desc=f"{spec.name} masks")


def gradient_of(spec, task: Task, model, tokenizer):
    if not spec.kind.gold:
        return None
    from headloc.engine.supervision import task_examples

    return model, task_examples(tokenizer, task.spec, include_path=task.task_folders)
