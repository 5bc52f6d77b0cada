"""User options declared once and offered by two parsers: ``specload run`` / ``compare`` and
Locust's own command line and web UI (``run`` for a run's options, ``gates`` for the CI gate).

They sit above analysis and the protocol (they resolve what they check with them) and below
the two front ends, ``locust`` and ``cli``, which both import them.
"""
