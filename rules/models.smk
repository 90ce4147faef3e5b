rule prepare_model:
    """Convert a GGUF model (the embedded demo model) once into a safetensors checkpoint folder."""
    output:
        directory(paths.MODEL_DIR),
    log:
        "results/logs/prepare_model/{model}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        source=model_identity,
    script:
        "../scripts/prepare_model.py"


rule model_geometry:
    """Layers, heads per layer and key/value heads of a model, from its config (paper Table 1)."""
    input:
        model=get_model_input,
    output:
        paths.GEOMETRY,
    log:
        "results/logs/model_geometry/{model}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
        source=model_source,
    script:
        "../scripts/model_geometry.py"
