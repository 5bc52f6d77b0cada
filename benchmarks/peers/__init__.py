"""Helpers of ``benchmarks/peers.py``: one module per concern.

- ``cpu``: CPU seconds of a client's whole process tree, sampled over time.
- ``truth``: the simulator's ground truth, per-request errors, the row of one client at one rate.
- ``specload_runner``, ``vllm_bench``, ``guidellm_runner``: run one client, return its
  per-request samples and the percentiles it printed itself.
- ``guidellm_env``: guidellm in its own cached virtual env.
- ``report``: the Markdown table and the JSON beside it.
"""
