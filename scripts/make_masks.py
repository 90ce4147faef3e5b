"""Build the measurement matrix of one search (rule make_masks)."""

from headloc.io import log_to_file, save_npy
from headloc.methods import make_masks
from headloc.model.loading import head_geometry

log = log_to_file(snakemake.log[0])
geometry = head_geometry(snakemake.params.location)
spec = snakemake.params.spec
masks = make_masks(geometry.total, spec["n_masks"], method=spec["method"], sparsity=spec["sparsity"],
                   random_state=snakemake.params.seed)
log.info("%s: %d masks over %d heads (%d x %d), %.1f heads ablated per mask",
         spec["method"], len(masks), geometry.total, geometry.n_layers, geometry.n_heads, masks.sum(1).mean())
save_npy(snakemake.output[0], masks)
