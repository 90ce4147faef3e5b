checkpoint recover_heads:
    """Rank the heads of one search: the Lasso of eq. (1) on the masks' scores, one-shot greedy's
    single-head effects, greedy's rounds, or a gradient method's result (a checkpoint: which heads
    come out decides the validation jobs)."""
    input:
        unpack(get_recovery_input),
    output:
        paths.RECOVERY,
    log:
        "results/logs/recover_heads/{model}/{task}/{search}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
        recover=step_params("recover", higher_is_better=scoring_direction),
    script:
        "../scripts/recover_heads.py"


rule single_head_damage:
    """Heads ablated alone and in context on every task's full data (universal.detect: damage):
    each task's top heads, the heads its filtered top k reports and that top k's cumulative sets,
    in one job per model."""
    input:
        model=get_model_input,
        docs=[TASK_FACTS.full_documents(task) for task in TASKS],
        recoveries=main_recovery_files,
    output:
        heads=paths.SINGLE_HEADS,
        evals=paths.SINGLE_HEAD_EVALS,
    log:
        "results/logs/single_head_damage/{model}.log",
    benchmark:
        "results/benchmarks/single_head_damage/{model}.tsv"
    conda:
        "../envs/headloc.yaml"
    threads: local_cores
    resources:
        **EVALUATING,
    params:
        **evaluating_params(),
        names=TASKS,
        tasks=all_task_options,
        task_digests=all_task_digests,
        directions=TASK_FACTS.directions(),
        units=PLAN.units(),
        capabilities=PLAN.capabilities,
        rule=damage_rule(config["universal"]),
        k=PLAN.top_k,
    script:
        "../scripts/single_head_damage.py"


checkpoint universal_heads:
    """Heads that degrade tasks of several capabilities (paper 6.1): given, measured alone
    (universal.detect: damage) or at the top of the main method's rankings (ranking); a
    checkpoint: the tables' head sets leave them out."""
    input:
        recoveries=main_recovery_files,
        damage=universal_damage,
    output:
        paths.UNIVERSAL,
    log:
        "results/logs/universal_heads/{model}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        capabilities=PLAN.capabilities,
        rule=config["universal"],
    script:
        "../scripts/universal_heads.py"


rule score_top_heads:
    """Tuning (appendix A.1): score the identification subset unablated and with a search's top-k
    heads ablated."""
    input:
        model=get_model_input,
        recovery=paths.RECOVERY,
        docs=get_id_subset,
    output:
        paths.ID_TOPK,
    log:
        "results/logs/score_top_heads/{model}/{task}/{search}.log",
    benchmark:
        "results/benchmarks/score_top_heads/{model}/{task}/{search}.tsv"
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(task=task_options),
        higher_is_better=scoring_direction,  # the grid point that degrades the task most
        spec=grid_point,
        unit=scoring_unit,
    script:
        "../scripts/score_top_heads.py"


rule choose_hyperparameters:
    """Tuning (appendix A.1): the grid point whose top heads degrade the task most."""
    input:
        get_tuning_points,
    output:
        paths.TUNING,
    log:
        "results/logs/choose_hyperparameters/{model}/{task}.log",
    conda:
        "../envs/headloc.yaml"
    script:
        "../scripts/choose_hyperparameters.py"
