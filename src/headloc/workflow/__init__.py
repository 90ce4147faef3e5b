"""What the Snakemake workflow asks of the library, free of Snakemake: config checks
(``config``), the experiment plan (``plan``: searches, head sets, collected tables), the results
paths (``paths``), head selection (``selection``), reading finished results (``results``) and
keeping a results folder valid when it moves (``portable``)."""
