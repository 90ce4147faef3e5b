# A job is known by its code, not its files' modification times: a fresh clone gives every file the
# clone's time, so Snakemake's `code` trigger (script newer than the outputs) would re-run every job
# of a results folder moved into it, and it never sees the library. profiles/default drops that
# trigger and each script rule gets the digest of its script and of every headloc module the script
# imports as a param instead: an edited script or library module re-runs the jobs whose code it is
# (docs/outputs.md, "Moving or sharing results"). Included last by the Snakefile and
# ground_truth.smk, after their rules.

import os

from headloc.workflow.portable import code_digest

for _rule in workflow.rules:
    if _rule.script:
        _rule.set_params(
            code_digest=code_digest(
                os.path.join(os.path.dirname(_rule.snakefile), _rule.script)
            )
        )
