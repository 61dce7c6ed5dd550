"""``--profile`` for the benchmarks: cProfile of the threads where a run's work happens (each task
thread's main loop), not of the calling thread, printed once the measured block is done."""

from __future__ import annotations

import cProfile
import pstats
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@contextmanager
def profiled(cls: type, method: str, top: int = 20, enabled: bool = True) -> Iterator[None]:
    """While the block runs, every call of ``cls.method`` runs under its own profiler; afterwards the
    method is restored and each profile's ``top`` rows by own time are printed."""
    if not enabled:
        yield
        return
    original = getattr(cls, method)
    profiles: list[cProfile.Profile] = []

    def wrapped(self: Any, *args: Any, **kwargs: Any) -> Any:
        prof = cProfile.Profile()
        profiles.append(prof)
        prof.enable()
        try:
            return original(self, *args, **kwargs)
        finally:
            prof.disable()

    setattr(cls, method, wrapped)
    try:
        yield
    finally:
        setattr(cls, method, original)
    for prof in profiles:
        pstats.Stats(prof).sort_stats("tottime").print_stats(top)
