"""runner.write.write_pieces: a writer's pieces written in order on a thread of their own, errors raised in the caller."""

from __future__ import annotations

import io
import threading
import time

import pytest

from traceread.runner.write import WRITE_AHEAD_PIECES, write_pieces


def test_pieces_written_in_order_and_whole() -> None:
    pieces = [b"%d," % i * (i % 7) for i in range(5000)]
    out = io.BytesIO()
    write_pieces(out, iter(pieces))
    assert out.getvalue() == b"".join(pieces)
    assert not [t for t in threading.enumerate() if t.name == "traceread-write"]


def test_pieces_are_made_while_earlier_ones_are_written() -> None:
    # The file's write of piece 0 waits until piece 2 is made: the test cannot pass if writes and
    # making run one after the other.
    made = [threading.Event() for _ in range(3)]

    class Slow(io.BytesIO):
        def write(self, b: bytes) -> int:  # type: ignore[override]
            if b == b"0":
                assert made[2].wait(10), "piece 2 was not made while piece 0 was being written"
            return super().write(b)

    def pieces():
        for i in range(3):
            made[i].set()
            yield b"%d" % i

    out = Slow()
    write_pieces(out, pieces())
    assert out.getvalue() == b"012"


def test_a_failed_write_is_raised_and_nothing_is_written_after_it() -> None:
    class Full(io.BytesIO):
        def write(self, b: bytes) -> int:  # type: ignore[override]
            if b == b"3":
                raise OSError(28, "No space left on device")
            return super().write(b)

    asked = []

    def pieces():
        for i in range(1000):
            asked.append(i)
            yield b"%d" % i

    out = Full()
    with pytest.raises(OSError, match="No space"):
        write_pieces(out, pieces())
    assert out.getvalue() == b"012"
    assert len(asked) < 1000  # the pieces stop being made once a write failed
    assert not [t for t in threading.enumerate() if t.name == "traceread-write"]


def test_a_failure_making_a_piece_is_raised_after_the_earlier_pieces() -> None:
    def pieces():
        yield from (b"a", b"b")
        raise ValueError("bad row")

    out = io.BytesIO()
    with pytest.raises(ValueError, match="bad row"):
        write_pieces(out, pieces())
    assert not [t for t in threading.enumerate() if t.name == "traceread-write"]


def test_at_most_the_write_ahead_pieces_wait() -> None:
    # While the first write is held, the maker runs ahead by the queue and no further (memory bounded
    # by the pieces, not the table).
    release = threading.Event()
    asked: list[int] = []

    class Held(io.BytesIO):
        def write(self, b: bytes) -> int:  # type: ignore[override]
            release.wait(10)
            return super().write(b)

    def pieces():
        for i in range(100):
            asked.append(i)
            yield b"x"

    out = Held()
    caller = threading.Thread(target=write_pieces, args=(out, pieces()))
    caller.start()
    try:
        for _ in range(1000):  # until the maker reaches the bound (at most 10 s), then a little longer
            if len(asked) >= WRITE_AHEAD_PIECES + 2:
                break
            time.sleep(0.01)
        caller.join(0.2)
        # one piece in the held write, WRITE_AHEAD_PIECES queued, one made and waiting to be queued
        assert len(asked) == WRITE_AHEAD_PIECES + 2
    finally:
        release.set()
        caller.join(10)
    assert out.getvalue() == b"x" * 100
