"""A per-thread list that a block of code fills: what replay.py needs to see of a forward (its launches, its buffers)."""

from __future__ import annotations

import contextlib
import threading


class ThreadLog(threading.local):
    """``with log.collecting() as items:`` every ``log.add(item)`` made on this thread inside the block is appended to
    ``items``; blocks nest, the inner one seeing only its own items. Outside every block ``add`` does nothing."""

    items: list | None = None

    def add(self, item) -> None:
        items = self.items
        if items is not None:
            items.append(item)

    @contextlib.contextmanager
    def collecting(self):
        outer = self.items
        self.items = items = []
        try:
            yield items
        finally:
            self.items = outer
