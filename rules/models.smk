rule prepare_model:
    """Convert a GGUF model (the embedded demo model) once into a safetensors checkpoint folder."""
    output:
        directory("results/models/{model}"),
    log:
        "results/logs/prepare_model/{model}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        gguf=gguf_file,
    script:
        "../scripts/prepare_model.py"
