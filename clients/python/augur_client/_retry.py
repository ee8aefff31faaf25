"""Running a transaction again when it aborts for a reason that may pass, with randomized
exponential backoff between attempts (as the Rust client's runner does: full jitter)."""

from __future__ import annotations

import dataclasses
import random
import time
from typing import Callable, Optional, TypeVar

from augur_client._errors import Aborted

T = TypeVar("T")

#: How many times `retrying` (and `Client.run`) runs a transaction at most, by default.
DEFAULT_ATTEMPTS = 10


@dataclasses.dataclass(frozen=True)
class Backoff:
    """How long to wait before running an aborted transaction again: after its `n`th abort in a
    row, a time drawn uniformly from [0, min(cap, base * 2 ** (n - 1))] seconds. The jitter
    keeps clients that conflict from retrying in lockstep; the doubling spreads a crowd out."""

    #: The bound of the first wait, in seconds (0: retry at once).
    base: float = 0.01
    #: The largest bound a wait is drawn under, in seconds.
    cap: float = 1.0

    def __post_init__(self) -> None:
        if not (self.base >= 0 and self.cap >= 0):
            raise ValueError(f"backoff times must be at least 0 s: {self}")

    def bound(self, aborts: int) -> float:
        """The bound of the wait after `aborts` consecutive aborts (at least 1)."""
        if aborts < 1:
            raise ValueError(f"a wait follows at least one abort, not {aborts}")
        # 2 ** 1000 would overflow a float product; the cap is reached long before.
        return min(self.cap, self.base * 2.0 ** min(aborts - 1, 64))

    def delay(self, aborts: int, rng: random.Random) -> float:
        """The wait after `aborts` consecutive aborts, drawn from `rng`."""
        return rng.uniform(0.0, self.bound(aborts))


def is_retryable(error: BaseException) -> bool:
    """Whether running the transaction that raised `error` again may succeed: only an abort the
    node calls retryable (a conflict, a lock not granted, a participant that did not answer),
    never a rollback, a misspeculation or an invalid request, and never a failed request (after
    a failed commit the transaction may have committed)."""
    return isinstance(error, Aborted) and error.retryable


def retrying(
    attempt: Callable[[float], T],
    *,
    attempts: int = DEFAULT_ATTEMPTS,
    backoff: Optional[Backoff] = None,
    sleep: Callable[[float], object] = time.sleep,
    rng: Optional[random.Random] = None,
    clock: Callable[[], float] = time.monotonic,
) -> T:
    """Call `attempt(trying_for)` until it returns, and return what it returned. When it raises
    a retryable `Aborted`, wait as `backoff` says (the default `Backoff()`) and call it again,
    at most `attempts` times in all; anything else it raises, and the last abort, propagate (the
    last with a note of how many attempts were made).

    `trying_for` is the time in seconds since the first attempt began (0 for the first): pass
    it on as the `trying_for` of `Client.transact` or `begin`, so that the node knows how old
    the transaction is. Protocols that resolve conflicts by wait-die let the older transaction
    win; a retry that did not say so would be the youngest again, and likely die again."""
    if attempts < 1:
        raise ValueError(f"attempts must be at least 1, not {attempts}")
    backoff = Backoff() if backoff is None else backoff
    rng = random.Random() if rng is None else rng
    first_began = clock()
    for made in range(1, attempts + 1):
        try:
            return attempt(0.0 if made == 1 else max(0.0, clock() - first_began))
        except Aborted as aborted:
            if not is_retryable(aborted):
                raise
            if made == attempts:
                aborted.add_note(f"gave up after {attempts} attempts, each aborted")
                raise
        sleep(backoff.delay(made, rng))
    raise AssertionError("unreachable")  # pragma: no cover
