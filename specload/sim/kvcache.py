"""KV-cache block accounting with an LRU prefix cache, as vLLM's block pool does it.

Blocks are counted, not stored. A request holds *anonymous* blocks (its private KV) and
references to *cached* blocks, named by the chained hash of the prompt tokens they hold. When a
cached block's last holder finishes, the block stays in an LRU list: still hit-able, but free to
evict when new blocks are needed. ``usage`` counts only blocks someone holds, as
``vllm:kv_cache_usage_perc`` does.
"""

from __future__ import annotations

from collections import OrderedDict

__all__ = ["KVCache", "block_hashes"]


def block_hashes(tokens: list[str], block_size: int) -> list[int]:
    """Chained hashes of the full ``block_size`` blocks of ``tokens`` (in-process only)."""
    out = []
    h = 0
    for i in range(0, len(tokens) - block_size + 1, block_size):
        h = hash((h, tuple(tokens[i : i + block_size])))
        out.append(h)
    return out


class KVCache:
    """Counts of used blocks plus the prefix cache's hash → refcount and LRU of free hashes."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.used = 0  # blocks held by at least one request
        self._ref: dict[int, int] = {}
        self._lru: OrderedDict[int, None] = OrderedDict()

    @property
    def free(self) -> int:
        """Blocks available to allocate (evicting cached-but-unused ones as needed)."""
        return self.num_blocks - self.used

    @property
    def usage(self) -> float:
        return self.used / self.num_blocks if self.num_blocks else 0.0

    def lookup(self, hashes: list[int]) -> int:
        """How many leading blocks of ``hashes`` are cached (held or in the LRU)."""
        n = 0
        for h in hashes:
            if h in self._ref or h in self._lru:
                n += 1
            else:
                break
        return n

    def acquire(self, hashes: list[int]) -> None:
        """Take a reference on cached blocks found by ``lookup``."""
        for h in hashes:
            if h in self._ref:
                self._ref[h] += 1
            else:
                del self._lru[h]
                self._ref[h] = 1
                self.used += 1

    def allocate(self, n: int) -> bool:
        """Claim ``n`` anonymous blocks, evicting LRU cached blocks; False if they don't fit."""
        if n <= 0:
            return True
        if self.num_blocks - self.used < n:
            return False
        # Free space counts LRU blocks; evict just enough of them to stay consistent.
        over = self.used + len(self._lru) + n - self.num_blocks
        for _ in range(max(0, over)):
            self._lru.popitem(last=False)
        self.used += n
        return True

    def free_anon(self, n: int) -> None:
        self.used -= n

    def publish(self, h: int) -> bool:
        """Turn one of the caller's anonymous blocks into cached block ``h`` (False: exists)."""
        if h in self._ref or h in self._lru:
            return False
        self._ref[h] = 1
        return True

    def release(self, hashes: list[int]) -> None:
        """Drop references; blocks nobody holds move to the LRU (most recent last)."""
        for h in hashes:
            c = self._ref[h] - 1
            if c:
                self._ref[h] = c
            else:
                del self._ref[h]
                self._lru[h] = None
                self.used -= 1

    def reset_prefix_cache(self) -> int:
        """Forget every cached block nobody holds (``POST /reset_prefix_cache``)."""
        n = len(self._lru)
        self._lru.clear()
        return n
