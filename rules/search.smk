rule make_masks:
    """Build the measurement matrix Phi (M x N, 1 = ablated) of one search."""
    input:
        model=get_model_input,
    output:
        paths.MASKS,
    log:
        "results/logs/make_masks/{model}/{task}/{search}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
        design=step_params("design"),
    script:
        "../scripts/make_masks.py"


rule score_masks:
    """Score one chunk of masks on the identification subset: one model load for many masks."""
    input:
        model=get_model_input,
        masks=paths.MASKS,
        docs=get_id_subset,
    output:
        scores=paths.SCORES,
        samples=paths.SAMPLES,
    log:
        "results/logs/score_masks/{model}/{task}/{search}/{chunk}.log",
    benchmark:
        "results/benchmarks/score_masks/{model}/{task}/{search}/{chunk}.tsv"
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(task=task_options),
        higher_is_better=scoring_direction,  # written beside the scores: every search reads it
        chunks=PLAN.settings.chunks,
    script:
        "../scripts/score_masks.py"


rule search_job:
    """A search whose method's kind runs it in one job (headloc.methods.one_job.OneJob: gradient,
    sequential and guided searches) on the identification subset: one model load, then the kind's
    step, which scores masks on the search's scoring task, differentiates the same documents' gold
    continuations, or both; a killed job's rerun resumes from the search's record (record.npz).
    """
    input:
        model=get_model_input,
        docs=get_id_subset,
    output:
        paths.ONE_JOB_RESULT,
    log:
        "results/logs/{kind}_search/{model}/{task}/{search}.log",
    benchmark:
        "results/benchmarks/{kind}_search/{model}/{task}/{search}.tsv"
    wildcard_constraints:
        search=alternatives(PLAN.searches_run_by("search_job")),
        kind=alternatives(ONE_JOB_KINDS),
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(),
        task_digest=task_digest,
        tasks=one_job_tasks,
        step=one_job_step,
    script:
        "../scripts/search_job.py"


rule refine_masks:
    """cs_adaptive, stage 2: from stage 1's scores, masks over the heads still uncertain (none when
    stage 1's top k is settled)."""
    input:
        masks=paths.MASKS,
        scores=get_chunk_scores,
    output:
        masks=paths.STAGE2_MASKS,
        plan=paths.REFINEMENT,
    log:
        "results/logs/refine_masks/{model}/{task}/{search}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
        refine=step_params("refine"),
    script:
        "../scripts/refine_masks.py"


use rule score_masks as score_stage2_masks with:
    input:
        model=get_model_input,
        masks=paths.STAGE2_MASKS,
        docs=get_id_subset,
    output:
        scores=paths.STAGE2_SCORES,
        samples=paths.STAGE2_SAMPLES,
    log:
        "results/logs/score_masks/{model}/{task}/{search}/stage2/{chunk}.log",
    benchmark:
        "results/benchmarks/score_masks/{model}/{task}/{search}/stage2/{chunk}.tsv"


rule make_greedy_masks:
    """Greedy round r: the heads chosen in rounds 1..r-1 plus each remaining head in turn."""
    input:
        model=get_model_input,
        previous=get_previous_choice,
        universal=round_universal_heads,
    output:
        paths.ROUND_MASKS,
    log:
        "results/logs/make_greedy_masks/{model}/{task}/{search}/round{round}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
    script:
        "../scripts/make_greedy_masks.py"


use rule score_masks as score_greedy_masks with:
    input:
        model=get_model_input,
        masks=paths.ROUND_MASKS,
        docs=get_id_subset,
    output:
        scores=paths.ROUND_SCORES,
        samples=paths.ROUND_SAMPLES,
    log:
        "results/logs/score_masks/{model}/{task}/{search}/round{round}/{chunk}.log",
    benchmark:
        "results/benchmarks/score_masks/{model}/{task}/{search}/round{round}/{chunk}.tsv"


rule choose_greedy_head:
    """Keep the head whose addition lowers the score most in greedy round r."""
    input:
        masks=paths.ROUND_MASKS,
        scores=get_round_scores,
        previous=get_previous_choice,
        universal=universal_heads,
    output:
        paths.CHOSEN,
    log:
        "results/logs/choose_greedy_head/{model}/{task}/{search}/round{round}.log",
    conda:
        "../envs/headloc.yaml"
    params:
        location=model_location,
    script:
        "../scripts/choose_greedy_head.py"
