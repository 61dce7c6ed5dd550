"""The runtime's own parts of contracts 3 and 4, without a Kafka broker.

- A run's reported spans (``_exact_spans``): on a backend with transaction markers only spans of ONE task (one
  transactional producer) separated by exactly one offset are joined (that offset is the task's own commit marker);
  spans of two tasks one offset apart may hold another writer's record between them and stay apart.
"""

from __future__ import annotations

from connect_runtime import ranges
from connect_runtime.api.records import TopicPartition
from connect_runtime.runtime.source import _exact_spans, _Run

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


def _run(*commits: tuple[int, TopicPartition, tuple[int, int]]) -> _Run:
    run = _Run("spans", None, None)
    for writer, tp, span in commits:
        run.committed([(tp, span)], span[1] - span[0], 0, 0, [], transaction=True, writer=writer)
    return run


def test_one_tasks_spans_one_marker_apart_are_joined() -> None:
    run = _run((0, TP, (0, 2)), (0, TP, (3, 5)), (0, TP, (6, 9)), (0, TP, (11, 12)))
    assert _exact_spans(run, join_markers=True) == {"t": {0: [(0, 9), (11, 12)]}}
    assert _exact_spans(run, join_markers=False) == {"t": {0: [(0, 2), (3, 5), (6, 9), (11, 12)]}}


def test_spans_of_two_tasks_one_offset_apart_are_not_joined() -> None:
    """Offset 7 lies between task 1's span [6, 7) and task 0's span [8, 9): neither task's marker needs to be there
    (task 0's marker of [3, 5) is offset 5), so it may be another connector's record, and the run's ranges must not
    hold it."""
    run = _run((0, TP, (3, 5)), (1, TP, (6, 7)), (0, TP, (8, 9)), (1, TP, (10, 12)), (1, TP, (13, 14)))
    got = _exact_spans(run, join_markers=True)
    # task 0: [3,5) and [8,9) are 3 apart (not joined); task 1: [10,12)+[13,14) joined over its marker 12
    assert got == {"t": {0: [(3, 5), (6, 7), (8, 9), (10, 14)]}}
    assert ranges.dump(got) == {"t": {"0": [[3, 5], [6, 7], [8, 9], [10, 14]]}}


def test_touching_spans_of_two_tasks_are_one_span_and_partitions_stay_apart() -> None:
    """Spans that touch (no offset between them) are one span whoever wrote them; each partition on its own."""
    run = _run((0, TP, (0, 3)), (1, TP, (3, 4)), (1, OTHER, (0, 1)), (0, OTHER, (2, 3)), (1, OTHER, (5, 6)))
    assert _exact_spans(run, join_markers=True) == {"t": {0: [(0, 4)], 1: [(0, 1), (2, 3), (5, 6)]}}


def test_a_joined_span_that_holds_another_tasks_span_stays_one_span() -> None:
    """Task 1's record committed inside task 0's open transaction (the documented limit) lies inside task 0's
    span; the result is still sorted, non-overlapping spans."""
    run = _run((0, TP, (0, 4)), (1, TP, (2, 3)), (0, TP, (5, 7)), (1, TP, (9, 10)))
    assert _exact_spans(run, join_markers=True) == {"t": {0: [(0, 7), (9, 10)]}}
