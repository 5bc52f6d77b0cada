"""The ground floor: what every other part of specload may import, and which imports nothing
of specload but itself.

The error types and their exit codes (``errors``), the per-request record (``records``), the
SLO and error budget (``slo``, ``budget``), a server condition (``condition``), the open-loop
arrival schedule (``pacer``), retry policy (``retry``) and free ports (``ports``). Keeping
them below everything is what lets the simulator, the client and compare be used alone.
"""
