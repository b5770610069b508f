"""Process groups inferred from the transfers' partners (traceread.ranks.inferred): the chains and their ends."""

from __future__ import annotations

import numpy as np

from traceread.ranks.blame import chains
from traceread.ranks.inferred import _links


class _E:
    def __init__(self, a: int, b: int, n: int) -> None:
        self.a, self.b, self.n, self.shared = a, b, n, False


def test_two_pipelines_of_four_read_from_their_links():
    # ranks 0,2,4,6 and 1,3,5,7 (Megatron's grid: rank = stage * dp + d); stage 0 sends first
    links = {(0, 2), (2, 4), (4, 6), (1, 3), (3, 5), (5, 7)}
    send_first = {0: 1.0, 1: 1.0, 6: 0.0, 7: 0.0}
    assert chains(8, links, send_first).tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    # the last stage's steps begin with a send instead: counted from the other end
    assert chains(8, links, {0: 0.0, 1: 0.0, 6: 1.0, 7: 1.0}).tolist() == [3, 3, 2, 2, 1, 1, 0, 0]


def test_no_chains_no_stages():
    assert chains(4, {(0, 1), (1, 2), (2, 0), (2, 3)}, {}) is None  # a rank with three partners
    assert chains(5, {(0, 1), (2, 3), (3, 4)}, {}) is None  # chains of unequal length
    assert chains(3, {(0, 1)}, {}) is None  # a rank with no partner


def test_a_loose_link_two_stages_apart_is_no_neighbour():
    # 0-2 and 2-4 matched every transfer; 0-4 agreed on a clock difference for a few (transfer, compute, transfer)
    links = _links([_E(0, 2, 128), _E(2, 4, 128), _E(0, 4, 28), _E(4, 6, 120)])
    assert links == {(0, 2), (2, 4), (4, 6)}
    stage = chains(8, links | {(1, 3), (3, 5), (5, 7)}, {0: 1.0, 1: 1.0})
    assert stage is not None and np.array_equal(stage, [0, 0, 1, 1, 2, 2, 3, 3])
