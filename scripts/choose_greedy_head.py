"""Keep the most damaging head of one greedy round (rule choose_greedy_head)."""

import numpy as np

from headloc.heads import head_name
from headloc.io import log_to_file, read_json, read_scores, write_json
from headloc.methods.greedy import choose_round
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
geometry = head_geometry(snakemake.params.location)
names = [head_name(i, geometry.n_heads) for i in range(geometry.total)]
previous = read_json(snakemake.input.previous) if snakemake.input.previous else None
universal = read_json(snakemake.input.universal)["heads"] if snakemake.input.universal else []
record = choose_round(previous, np.load(snakemake.input.masks), read_scores(snakemake.input.scores)["score"].to_numpy(),
                      names, universal)
if record["round"] != int(snakemake.wildcards.round):
    raise ValueError(f"round {snakemake.wildcards.round} follows {len(record['chosen']) - 1} chosen heads")
log.info("round %s keeps %s (score %.4f)", record["round"], record["chosen"][-1], record["score"])
write_json(snakemake.output[0], record)
