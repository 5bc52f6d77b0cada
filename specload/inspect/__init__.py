"""``specload inspect``: will drafting or prefix caching help this traffic, before paying for
it? ``repetition`` holds the pure figures, ``profile`` reads prompt sets and run dirs.
"""
