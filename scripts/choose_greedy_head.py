"""Keep the most damaging head of one greedy round (rule choose_greedy_head)."""

import numpy as np

from headloc import greedy
from headloc.heads import head_index, head_name
from headloc.io import log_to_file, read_json, read_scores, write_json
from headloc.models import head_geometry

log = log_to_file(snakemake.log[0])
geometry = head_geometry(snakemake.params.location)
previous = read_json(snakemake.input.previous) if snakemake.input.previous else {"chosen": [], "n_evals": 0}
chosen = [head_index(h, geometry.n_layers, geometry.n_heads) for h in previous["chosen"]]
universal = read_json(snakemake.input.universal)["heads"] if snakemake.input.universal else []
excluded = [head_index(h, geometry.n_layers, geometry.n_heads) for h in universal]
masks = np.load(snakemake.input.masks)
scores = read_scores(snakemake.input.scores)
best, by_head = greedy.choose(masks, scores["score"].to_numpy(), chosen, exclude=excluded)
unablated = float(scores["score"].iloc[0]) if not chosen else previous["unablated"]
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
log.info("round %s keeps %s (score %.4f)", snakemake.wildcards.round, names[best], by_head[best])
write_json(snakemake.output[0], {
    "round": int(snakemake.wildcards.round),
    "chosen": [*previous["chosen"], names[best]],
    "score": float(by_head[best]),
    "unablated": unablated,
    "n_evals": previous["n_evals"] + len(masks),
    "excluded": universal,
    # round 1 scores every head alone, the excluded ones too: their one-shot score
    "excluded_scores": ({h: float(scores["score"].iloc[1 + i]) for h, i in zip(universal, excluded)}
                        if not chosen else previous.get("excluded_scores", {})),
    "scores": {names[i]: float(s) for i, s in enumerate(by_head) if not np.isnan(s)},
})
