"""A wall clock that runs ``CLOCK_SKEW_S`` seconds ahead, for one process of the network lab
(``tests/faults/netlab.py``): a worker host whose clock is off.

A real host with a wrong clock is wrong everywhere: ``time.time()`` and the kernel's receive
timestamps alike. Python can shift only the first, so this process does without kernel
receive stamps (``specload.client.rxstamp`` is told the kernel has none, as on a system
without ``SO_TIMESTAMPNS``): every timestamp it takes then comes from the shifted clock, as
on such a host.
"""

import importlib.abc
import importlib.machinery
import os
import sys
import time

_skew = float(os.environ.get("CLOCK_SKEW_S") or 0.0)


class _NoKernelStamps(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):  # noqa: ANN001, ANN201
        if name != "specload.client.rxstamp":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_without_stamps(module):  # noqa: ANN001, ANN202
            exec_module(module)
            module._SO_TIMESTAMPNS = None

        spec.loader.exec_module = exec_without_stamps
        return spec


if _skew:
    _time, _time_ns = time.time, time.time_ns
    time.time = lambda: _time() + _skew
    time.time_ns = lambda: _time_ns() + int(_skew * 1e9)
    sys.meta_path.insert(0, _NoKernelStamps())
