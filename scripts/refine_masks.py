"""cs_adaptive's stage 2 (rule refine_masks): fit stage 1, stop if its top k is settled, else design
masks over the uncertain candidates (headloc.methods.kinds.masks.refine)."""

from headloc.workflow.warm import run_warm

run_warm()  # HEADLOC_WARM_JOBS=1: a warm interpreter runs the job (docs/performance.md)

from headloc.io import log_to_file
from headloc.methods.kinds import masks
from headloc.model.geometry import head_geometry

log = log_to_file(snakemake.log[0])
masks.refine(masks.RefineParams(**snakemake.params.refine), head_geometry(snakemake.params.location),
             snakemake.input.masks, snakemake.input.scores, masks_out=snakemake.output.masks,
             plan_out=snakemake.output.plan, log=log)
