"""Rank the heads of one finished search (checkpoint recover_heads).

The method's ``recover`` (headloc.methods) turns the rule's inputs into the ranking fields: a fit of
the masks' scores, greedy's rounds, a gradient job's result, or a draw; this script adds the
search's identity and its top heads.
"""

from headloc import methods
from headloc.heads import head_name
from headloc.io import log_to_file, write_json
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
geometry = head_geometry(snakemake.params.location)
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
p = snakemake.params
result = methods.get(p.method).recover(dict(snakemake.input.items()), names, p, log)
top = result["ranking"][: p.top_k]
log.info("%s: top heads %s after %d evaluations", p.method, ", ".join(top), result["n_evals"])
write_json(snakemake.output[0], {
    "model": snakemake.wildcards.model,
    "task": snakemake.wildcards.task,
    "search": snakemake.wildcards.search,
    "method": p.method,
    "n_layers": geometry.n_layers,
    "n_heads": geometry.n_heads,
    **result,
    "top_heads": top,
    # a scored method's coef and intercept are changes of the score made higher-is-better
    # (negated for a lower-is-better metric: headloc.io.read_scores); a gradient method's are
    # changes of the gold continuations' log-likelihood, higher-is-better by construction
    "higher_is_better": p.higher_is_better if methods.get(p.method).scored else True,
})
