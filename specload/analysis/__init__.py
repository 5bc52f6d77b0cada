"""Analysis of run directories: per-step statistics, bootstrap CIs, crossover, attribution, contract.

Works on run directories from any server (it never imports the client, Locust or the
simulator). The entry point is ``specload.analysis.compare.compare_runs``; every result is a
plain dataclass, and ``specload.report`` renders them.
"""

__all__: list[str] = []
