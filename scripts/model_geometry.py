"""Write a model's head geometry (rule model_geometry, paper Table 1)."""

from headloc.heads import HeadGeometry
from headloc.io import log_to_file, write_json
from headloc.model.loading import load_config

log = log_to_file(snakemake.log[0])
config = load_config(snakemake.params.location)
geometry = HeadGeometry.of(config)
text = getattr(config, "get_text_config", lambda: config)()
record = {
    "model": snakemake.wildcards.model,
    "source": snakemake.params.source,
    "model_type": config.model_type,
    "n_layers": geometry.n_layers,
    "n_heads": geometry.n_heads,
    "n_kv_heads": int(getattr(text, "num_key_value_heads", None) or geometry.n_heads),
    "total": geometry.total,
}
log.info("%s", record)
write_json(snakemake.output[0], record)
