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


rule gradient_search:
    """Attribution patching or Causal Head Gating on the identification subset: one model load,
    gradients of the gold continuations' log-likelihood instead of masked evaluations.
    """
    input:
        model=get_model_input,
        docs=get_id_subset,
    output:
        paths.GRADIENT,
    log:
        "results/logs/gradient_search/{model}/{task}/{search}.log",
    benchmark:
        "results/benchmarks/gradient_search/{model}/{task}/{search}.tsv"
    wildcard_constraints:
        search=alternatives(PLAN.searches_run_by("gradient_search")),
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(task=validation_task_options),
        gradient=step_params("gradient"),
    script:
        "../scripts/gradient_search.py"


rule sequential_search:
    """A sequential search (group testing, Thompson sampling) on the identification subset: one
    model load, rounds of masks scored in turn, each round's masks chosen from the scores so far;
    a killed job's rerun resumes from the search's record (paths.RECORD)."""
    input:
        model=get_model_input,
        docs=get_id_subset,
    output:
        paths.SEQUENTIAL,
    log:
        "results/logs/sequential_search/{model}/{task}/{search}.log",
    benchmark:
        "results/benchmarks/sequential_search/{model}/{task}/{search}.tsv"
    wildcard_constraints:
        search=alternatives(PLAN.searches_run_by("sequential_search")),
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(task=task_options),
        sequential=step_params("sequential", higher_is_better=scoring_direction),
    script:
        "../scripts/sequential_search.py"


rule guided_search:
    """Gradient-guided greedy on the identification subset: one model load; each step a gradient of
    the gold continuations beside the heads chosen so far, then the heads it lists scored on the
    search's scoring task beside them; a killed job's rerun resumes from the search's record
    (paths.RECORD)."""
    input:
        model=get_model_input,
        docs=get_id_subset,
    output:
        paths.GUIDED,
    log:
        "results/logs/guided_search/{model}/{task}/{search}.log",
    benchmark:
        "results/benchmarks/guided_search/{model}/{task}/{search}.tsv"
    wildcard_constraints:
        search=alternatives(PLAN.searches_run_by("guided_search")),
    conda:
        "../envs/headloc.yaml"
    resources:
        **EVALUATING,
    params:
        **evaluating_params(task=task_options),
        gold=validation_task_options,
        guided=step_params("guided", higher_is_better=scoring_direction),
    script:
        "../scripts/guided_search.py"


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
