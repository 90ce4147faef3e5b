"""The masks of one greedy round (rule make_greedy_masks)."""

from headloc.search import greedy
from headloc.heads import head_index
from headloc.io import log_to_file, read_json, save_npy
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
geometry = head_geometry(snakemake.params.location)
chosen = read_json(snakemake.input.previous)["chosen"] if snakemake.input.previous else []
universal = read_json(snakemake.input.universal)["heads"] if snakemake.input.universal else []
indices = [head_index(head, geometry.n_layers, geometry.n_heads) for head in chosen]
excluded = [head_index(head, geometry.n_layers, geometry.n_heads) for head in universal]
masks = greedy.round_masks(geometry.total, indices, exclude=excluded)
log.info("round %s: %d masks, heads kept ablated: %s; universal heads left out: %s", snakemake.wildcards.round,
         len(masks), ", ".join(chosen) or "none", ", ".join(universal) or "none")
save_npy(snakemake.output[0], masks)
