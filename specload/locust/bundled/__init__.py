"""The locustfile ``specload run`` hands to Locust (``chat.py``), shipped inside the package.

It lives alone in this folder because Locust puts a locustfile's folder first on
``sys.path`` while importing it: a folder with other modules could shadow real ones.
"""
