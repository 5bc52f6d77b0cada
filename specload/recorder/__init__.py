"""Run directories: writing them (master only) and reading them back (analysis).

See ``docs/run-dir.md`` "Run directory" for the files and keys.
"""

from specload.recorder.jsonl import JsonlWriter, iter_jsonl
from specload.recorder.rundir import (
    RUN_SCHEMA_VERSION,
    RUN_STATUSES,
    RunData,
    RunMeta,
    RunWriter,
    check_out_dir,
    read_run,
)

__all__ = [
    "RUN_SCHEMA_VERSION",
    "RUN_STATUSES",
    "JsonlWriter",
    "RunData",
    "RunMeta",
    "RunWriter",
    "check_out_dir",
    "iter_jsonl",
    "read_run",
]
