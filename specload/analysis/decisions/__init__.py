"""What the statistics decide: where a condition starts and stops helping (crossover), the
verdict, CI gates, capacity under an SLO, per-class answers, server starts and attribution
(the advice drawn from them is words: ``report/advice_rules.py``)."""
