"""The logic of the measurements in the repository's benchmarks/ folder, for each benchmark that
needs more than its script's 60 lines: the GPU check (:mod:`~headloc.benchmarks.gpu_check`, its
sections in the ``gpu_*`` modules beside it), search methods against greedy on SmolLM2
(:mod:`~headloc.benchmarks.vs_greedy`) and greedy's question measured whole beside a background
(:mod:`~headloc.benchmarks.landscape`). It sits above :mod:`headloc.api`, whose ``locate`` it runs
as a user would; nothing imports it but the scripts and their tests.
"""
