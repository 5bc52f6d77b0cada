"""``python -m specload`` is the ``specload`` command."""

from specload.cli.main import main

raise SystemExit(main())
