"""How a comparison is run: servers, pre-flight, sweeps, blocks, refinement, live views.

``target`` starts and stops a server per condition, ``preflight`` proves it can serve one
streamed completion, ``sweep`` runs one run per condition (and replicate), ``interleave`` /
``interleaved_sweep`` cut steps into blocks of every condition run in a seeded order,
``refine`` adds steps where a boundary is uncertain, and ``provisional`` compares a run still
in progress. This floor sits above the scenario, the client, the recorder and analysis
(it runs the one and writes what the other reads) and below the front ends (``options``,
``locust``, ``cli``).
"""
