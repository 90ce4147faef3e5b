"""Attribution patching (:mod:`headloc.search.attribution`): each head's ablation effect to first
order, one gradient of the gold continuation's log-likelihood at gate = 1 (rule search_job)."""

from headloc.methods.contract import SCALE, Method


def fit(model, examples, options, seed, batch_size):
    from headloc.search.attribution import attribution

    return attribution(model, examples, batch_size=batch_size)


METHODS = (
    Method(
        name="attribution", kind="gradient", about="attribution patching: one gradient at gate = 1",
        label="-d score / d gate (first-order effect of ablation)", marker="P",
        reading="Each cell is minus d score / d gate at gate = 1: the first-order estimate of the change in the gold\n"
                "continuation's mean log-likelihood (nats per document) when the head is ablated.\n\n" + SCALE,
        search_id=lambda parts: f"attribution_{parts.tail}", algorithm=fit,
    ),
)
