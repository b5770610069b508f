"""The writers' look-ahead (``runner.ahead.mapped_ahead``): each block's rows laid out in order, a block
laid out while the next is made, failures raised with no thread left behind."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from test_rowjoin import _columns

from traceread.render import rowjoin
from traceread.runner.ahead import mapped_ahead


def test_blocks_joined_ahead_give_each_block_in_order() -> None:
    rng = np.random.default_rng(7)
    pieces = [b"{", b":", b"%b,", b"|", b"\n", b"}"]
    blocks, expected = [], []
    for _ in range(6):
        n = int(rng.integers(0, 200))
        columns, _ = _columns(rng, n)
        blocks.append((pieces, columns, n, b";\n"))
        expected.append(list(rowjoin.join_pieces(pieces, columns, n, b";\n", size=512)))
    for threads in (1, 2):
        got = list(mapped_ahead(iter(blocks), rowjoin.join_block, threads))
        assert [b"".join(g) for g in got] == [b"".join(e) for e in expected]


def test_a_block_is_joined_while_the_next_is_made() -> None:
    # Block 0's join waits until block 1 has been made: it cannot pass if they run one after the other.
    made_second = threading.Event()

    def slow_join(block):
        if block[2] == 1:
            assert made_second.wait(10), "block 1 was not made while block 0 was joined"
        return rowjoin.join_block(block)

    def blocks():
        yield [b"<", b">"], [np.array([1], dtype=np.int64)], 1, b","
        made_second.set()
        yield [b"<", b">"], [np.array([2, 3], dtype=np.int64)], 2, b","

    assert [b"".join(b) for b in mapped_ahead(blocks(), slow_join)] == [b"<1>", b"<2>,<3>"]


def test_a_failure_making_a_block_is_raised_and_no_join_thread_is_left() -> None:
    def blocks():
        yield [b"<", b">"], [np.array([1], dtype=np.int64)], 1, b","
        raise ValueError("bad column")

    with pytest.raises(ValueError, match="bad column"):
        list(mapped_ahead(blocks(), rowjoin.join_block))
    assert not [t for t in threading.enumerate() if t.name.startswith("traceread-ahead")]


def test_the_csv_is_the_same_laid_out_ahead_or_in_turn() -> None:
    from traceread.render import csv_table

    n = 300
    cols = [csv_table.CsvColumn("i", np.arange(n, dtype=np.int64)),
            csv_table.CsvColumn("t", np.array([f"a,{i % 7}" for i in range(n)], dtype=object))]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(csv_table, "CHUNK_ROWS", 16)
        ahead = b"".join(csv_table.csv_chunks(cols, n, "\n", ahead=mapped_ahead))
        in_turn = b"".join(csv_table.csv_chunks(cols, n, "\n"))
    assert ahead == in_turn and ahead.count(b"\n") == n + 1
