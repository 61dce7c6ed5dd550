"""backends.closing.CloseWhenIdle: a client is never released under a call, and always released once closed."""

from __future__ import annotations

import threading

from connect_runtime.backends.closing import CloseWhenIdle


class Client:
    def __init__(self) -> None:
        self.inside = 0
        self.released_under_a_call = False
        self.releases = 0

    def release(self) -> None:
        self.released_under_a_call |= self.inside > 0
        self.releases += 1


def test_close_when_idle_releases_at_once() -> None:
    client = Client()
    calls = CloseWhenIdle(client.release)
    with calls.call():
        pass
    assert client.releases == 0
    assert calls.close() is True
    assert client.releases == 1 and calls.closing


def test_close_under_a_call_leaves_the_release_to_the_call() -> None:
    client = Client()
    calls = CloseWhenIdle(client.release)
    entered, leave = threading.Event(), threading.Event()

    def call() -> None:
        with calls.call():
            client.inside += 1
            entered.set()
            assert leave.wait(10)
            client.inside -= 1

    worker = threading.Thread(target=call)
    worker.start()
    assert entered.wait(10)
    assert calls.close() is False
    assert client.releases == 0
    leave.set()
    worker.join(10)
    assert client.releases == 1 and not client.released_under_a_call


def test_a_call_that_raises_still_releases_once_closing() -> None:
    client = Client()
    calls = CloseWhenIdle(client.release)
    entered, leave = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            with calls.call():
                entered.set()
                assert leave.wait(10)
                raise RuntimeError("the write failed")
        except RuntimeError as exc:
            errors.append(exc)

    worker = threading.Thread(target=call)
    worker.start()
    assert entered.wait(10)
    assert calls.close() is False
    leave.set()
    worker.join(10)
    assert [str(e) for e in errors] == ["the write failed"] and client.releases == 1


def test_a_call_after_close_is_released_when_it_returns() -> None:
    """A thread abandoned by the run that calls once more (and opens the client again) does not leak it."""
    client = Client()
    calls = CloseWhenIdle(client.release)
    assert calls.close() is True
    with calls.call():
        client.inside += 1
        assert calls.closing  # the owner may refuse the call here
        client.inside -= 1
    assert client.releases == 2 and not client.released_under_a_call
