"""``specload locust ARGS``: Locust itself, with specload's plugin installed before Locust
reads its command line.

Why: Locust prints ``--help`` before it imports the locustfile (``parse_locustfile_option``
answers ``-h`` on its own), so ``locust -f chat.py --help`` cannot list the options a plugin
adds there. Here the plugin is installed first, so ``specload locust -f chat.py --help``
lists specload's options beside Locust's, and ``specload locust -f chat.py ...`` is the same
run as ``locust -f chat.py ...`` (the locustfile's own ``install()`` finds it done).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

HELP = "Locust with specload's options loaded: `specload locust -f FILE --help` lists them"


def add_parser(sub: Any) -> None:
    """Listed in ``specload --help`` only: ``main`` hands the arguments over unparsed."""
    sub.add_parser("locust", help=HELP, description=HELP, add_help=False)


def run(args: Sequence[str]) -> int:
    """Locust's own ``main`` on ``args`` (its exit code), the plugin installed first."""
    import locust  # noqa: F401  first: gevent patches the standard library on this import
    from locust.main import main as locust_main

    from specload.locust.plugin import install

    install()
    sys.argv = ["locust", *args]
    try:
        locust_main()  # type: ignore[no-untyped-call]
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    return 0


__all__ = ["HELP", "add_parser", "run"]
