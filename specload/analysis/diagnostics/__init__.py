"""Why a step reads as it does: the engine step's fast and slow regimes, decode step times,
the output contract (did answers change) and output samples side by side."""
