"""specload: does speculative decoding make this LLM server faster for our traffic, and up to what load?

A Locust plugin plus an embedded vLLM-compatible simulator. Importing this package has no
side effects; Locust integration lives in ``specload.locust`` and is imported by locustfiles.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
