"""The opt-in retry policy."""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Optional

__all__ = ["RetryPolicy"]


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a failed request is resent (opt-in).

    A request is resent only when that is safe:

    - ``429 rate_limited``, ``503 capacity_exhausted`` / ``unavailable``,
      ``507 storage_full``, ``502 port_unreachable``: the server did not act
      on it, so any request;
    - ``500 internal`` and ``504 agent_timeout``: idempotent requests only
      (GET, PUT, DELETE, and creates, which carry an ``Idempotency-Key``);
    - a connection failure: idempotent requests, or any request when the
      connection could not be opened at all.

    Uploads streamed from a file or iterator are never resent. Waits grow
    exponentially from ``initial_backoff`` to ``max_backoff`` with jitter;
    a ``Retry-After`` header (capped at ``max_retry_after``) is honoured.
    """

    max_attempts: int = 4
    initial_backoff: float = 0.25
    max_backoff: float = 5.0
    max_retry_after: float = 60.0

    def backoff(self, attempt: int, retry_after: Optional[float] = None) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based)."""
        d = self.initial_backoff
        for _ in range(1, attempt):
            if d >= self.max_backoff:
                break
            d *= 2
        d = min(d, self.max_backoff)
        d = d / 2 + random.uniform(0, d / 2)  # "equal jitter"
        if retry_after is not None:
            d = max(d, min(retry_after, self.max_retry_after))
        return d


#: No retries (the default of :class:`hutch.Client`).
NO_RETRY = RetryPolicy(max_attempts=1)
