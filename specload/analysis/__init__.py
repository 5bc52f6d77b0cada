"""Analysis of run directories, in rooms named for their jobs, each built on those before it.

- ``inputs``: run directories read into columns, server metrics and telemetry per step;
- ``statistics``: per-step figures, their intervals and the one help/hurt/same rule;
- ``decisions``: crossover, verdict, gates, capacity, per-class and per-start answers, advice;
- ``diagnostics``: why a step reads as it does (regimes, decode steps, outputs);
- ``schedules``: vLLM's batch-size speculation schedules, proposed and checked.

``compare.compare_runs`` puts them together into one ``comparison.Comparison`` (plain
dataclasses) that ``specload.report`` renders. It works on run directories from any server:
it never imports the client, Locust or the simulator.
"""

__all__: list[str] = []
