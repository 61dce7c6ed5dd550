"""Kill loops that adapt to the machine: a process is SIGKILLed on observed progress (rows, records, bytes it
committed) at a random point of its work, never after a fixed delay; a run that still ends before its kill does
not count, the loop grows the work and tries again, and fails only when the kill never landed after growing the
work ``max_grows`` times in a row. So a fast machine, or a slow one, changes how long the loop takes, never its
outcome.

- :func:`kill_on_progress`: one process, killed once ``progress()`` reaches a given point (bounded wait).
- :func:`kill_point`: a random point in ``[low, high)`` of the work between ``done`` and ``total``.
- :func:`run_killed_on_progress`: a command started, killed at a random point of its work, its exit checked.
- :func:`kill_loop`: the iterations whose kill landed, growing the work when a run ended first.
"""

from __future__ import annotations

import math
import os
import random
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

POLL_S = 0.005
"""How often progress is looked at."""


def kill_point(rng: random.Random, done: int, total: int, low: float = 0.1, high: float = 0.9) -> int:
    """A random point of the work left (``done`` of ``total``): at least one unit past ``done``."""
    return done + max(1, math.floor((total - done) * rng.uniform(low, high)))


def kill_on_progress(proc: subprocess.Popen[Any], progress: Callable[[], int], at: int, *, rng: random.Random,
                     jitter_s: float = 0.02, bound_s: float = 180.0, what: str = "the run") -> bool:
    """SIGKILL ``proc`` once ``progress()`` reaches ``at`` (looked at every 5 ms), after a random delay of up to
    ``jitter_s`` (the kill lands anywhere between two commits, not right after one). True when the kill landed
    (the process was still running), False when it ended first. Waits at most ``bound_s`` for the progress or
    the process's end, then fails naming both; the process never outlives the call."""
    deadline = time.monotonic() + bound_s
    try:
        while proc.poll() is None:
            if progress() >= at:
                time.sleep(rng.uniform(0.0, jitter_s))
                if proc.poll() is not None:
                    return False
                os.kill(proc.pid, signal.SIGKILL)
                proc.wait(60)
                return True
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: waited {bound_s:.0f} s for its progress to reach {at} (it is at "
                                     f"{progress()}) or for it to end")
            time.sleep(POLL_S)
        return False
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(60)


def run_killed_on_progress(argv: Sequence[str], progress: Callable[[], int], total: int, *, rng: random.Random,
                           low: float = 0.1, high: float = 0.9, env: Mapping[str, str] | None = None,
                           cwd: str | Path | None = None, what: str = "the run") -> bool:
    """Start ``argv``, SIGKILL it once ``progress()`` reaches a random point in ``[low, high)`` of the way from
    where it is now to ``total`` (:func:`kill_point`, :func:`kill_on_progress`). True when the kill landed
    mid-run (the process was running and part of its work was still to do), False when the run ended first with
    exit 0, or had done all of its work when killed (a last commit bigger than the rest of the work); any other
    exit fails with the end of its stderr (kept in a file, not a pipe: a chatty run never blocks on it)."""
    at = kill_point(rng, progress(), total, low, high)
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=None if env is None else dict(env),
                                stdout=subprocess.DEVNULL, stderr=err, text=True)
        landed = kill_on_progress(proc, progress, at, rng=rng, what=what)
        err.seek(0)
        assert proc.returncode in (0, -signal.SIGKILL), f"{what} exited with {proc.returncode}: {err.read()[-2000:]}"
    return landed and progress() < total


def kill_loop(attempt: Callable[[], bool], grow: Callable[[], None], *, kills: int, max_grows: int = 6,
              what: str = "the run") -> int:
    """Call ``attempt()`` (one run killed on progress: True when its kill landed) until ``kills`` kills landed;
    after a run that ended first, ``grow()`` the work (the next run has more to do). Fails when the kill did not
    land in ``max_grows + 1`` runs in a row, each after growing the work. Returns how often the work grew."""
    landed = misses = grows = 0
    while landed < kills:
        if attempt():
            landed += 1
            misses = 0
            continue
        misses += 1
        if misses > max_grows:
            raise AssertionError(f"{what} ended before its kill {misses} times in a row, the work grown {grows} "
                                 f"times ({landed} of {kills} kills landed): is its progress observed at all?")
        grow()
        grows += 1
    return grows


__all__ = ["kill_loop", "kill_on_progress", "kill_point", "run_killed_on_progress"]
