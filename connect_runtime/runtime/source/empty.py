"""Why a source run committed no record: the result's ``empty``, from what the tasks and the connector said
(:class:`~connect_runtime.api.source.NothingRead`) and what the run's interval already holds.

``empty`` is ``None`` when the run committed records; else one of these ``reason`` values, in this order:

- ``committed_before``: the interval's ranges record already holds records (a rerun of the interval), or a
  task or the connector found input and every part of it committed by an earlier run;
- ``filtered``: records were read and every one was dropped by a transform or skipped by error tolerance;
- ``no_input``: a task or the connector found no input where it looked (``where`` names it);
- ``unknown``: the source returned nothing and did not say where it looked.

``message`` is one sentence for the log; ``looked_at`` lists every report (``task`` is the task index, or
``"connector"``). Only ``no_input`` and ``unknown`` are an empty interval (the provider's ``on_empty``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from connect_runtime import ranges as ranges_mod
from connect_runtime.api.source import COMMITTED_BEFORE, NO_INPUT, NothingRead

FILTERED = "filtered"
UNKNOWN = "unknown"
EMPTY_INTERVAL = (NO_INPUT, UNKNOWN)
"""Reasons that mean the interval holds nothing because there was nothing to read."""


def empty_reason(records: int, filtered: int, skipped: int, held: Mapping[str, Any],
                 reports: Mapping[int | str, NothingRead]) -> dict[str, Any] | None:
    """The result's ``empty`` (see the module docstring); ``None`` when ``records`` > 0."""
    if records:
        return None
    looked_at = [{"task": who, "where": r.where, "reason": r.reason, "detail": r.detail}
                 for who, r in sorted(reports.items(), key=lambda kv: (isinstance(kv[0], str), str(kv[0])))]
    places = "; ".join(r.message() for _, r in sorted(reports.items(), key=lambda kv: str(kv[0])))
    if held:
        n = ranges_mod.count(ranges_mod.parse(held))
        reason, message = COMMITTED_BEFORE, f"the interval was committed before (it holds {n} records)"
    elif any(r.reason == COMMITTED_BEFORE for r in reports.values()):
        reason, message = COMMITTED_BEFORE, places
    elif filtered or skipped:
        reason = FILTERED
        message = (f"{filtered + skipped} records were read and none written ({filtered} dropped by transforms, "
                   f"{skipped} skipped by errors.tolerance)")
    elif reports:
        reason, message = NO_INPUT, places
    else:
        reason, message = UNKNOWN, "the source returned no records (the connector does not say where it looked)"
    return {"reason": reason, "message": message, "looked_at": looked_at}


__all__ = ["EMPTY_INTERVAL", "FILTERED", "UNKNOWN", "empty_reason"]
