"""How measurements are arranged in time: interleaved blocks of every condition.

This floor sits above the scenario and the recorder (it cuts a scenario into block runs and
merges their run dirs) and below the sweep that starts servers; ``analysis`` reads what it
writes (the records' ``block`` field, run.json's ``interleave``) without importing it.
"""
