"""The read-ahead both long reads use (a stream's chunks, a copy's batches): items in order, the producer's error
raised in the consumer, and a consumer that stops early leaves no thread behind."""

from __future__ import annotations

import threading

import pytest

from ledger.store.read_ahead import Put, ReadAhead


def _threads(name: str) -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == name]


def test_items_arrive_in_order_and_the_thread_ends() -> None:
    def produce(put: Put[int]) -> None:
        for i in range(1_000):
            if not put(i):
                return

    assert list(ReadAhead(produce, name="t-order")) == list(range(1_000))
    assert not _threads("t-order")


def test_the_producers_error_is_raised_in_the_consumer_as_translated() -> None:
    def produce(put: Put[int]) -> None:
        put(1)
        raise OSError("the disk went away")

    got: list[int] = []
    with pytest.raises(RuntimeError, match="cannot read: the disk went away") as info:
        for item in ReadAhead(produce, name="t-error", translate=lambda e: RuntimeError(f"cannot read: {e}")):
            got.append(item)
    assert got == [1] and isinstance(info.value.__cause__, OSError)

    def fails(put: Put[int]) -> None:
        raise ValueError("as it is")

    with pytest.raises(ValueError, match="as it is"):
        list(ReadAhead(fails, name="t-plain"))  # no translate: the producer's own error


def test_stopping_early_stops_the_producer() -> None:
    made: list[int] = []

    def produce(put: Put[int]) -> None:
        i = 0
        while put(i):
            made.append(i)
            i += 1

    with ReadAhead(produce, name="t-stop", ahead=2) as items:
        assert next(items) == 0
        assert next(items) == 1
    assert not _threads("t-stop")
    assert len(made) <= 5  # the two read, two waiting, one handed over as the stop came
