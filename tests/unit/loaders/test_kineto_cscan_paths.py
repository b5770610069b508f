"""The C scanner's word-at-a-time fast paths at their edges: same results as its general code and
as msgspec.

The fast paths (short plain strings in one 16-byte step, numbers of up to 16 digits and 7
decimals in one or two eight-digit words, ", " / ": " separators, all-digit string ids, empty
arrays) hand anything else to the general functions from the same index. Their edges are
lengths (15/16/17-byte keys, 15/16/17-digit numbers, 7/8 decimals) and the distance to the end
of the buffer (a word load must stay inside it). Two checks:

* against msgspec (the exact fallback): every shape below either decodes to the same frame or is
  refused, and the shapes the fast paths exist for are taken;
* against the same C file built with its fast paths compiled out (``CSCAN_PLAIN``: plain C, and
  ``CSCAN_NO_SSE2``: SWAR only), which is the general code alone: identical return values and
  columns on many thousands of chunks (every length at every distance from the end, mutated
  real chunks). Skipped where no C compiler is found.
"""

from __future__ import annotations

import importlib.util
import shlex
import subprocess
import sysconfig
from pathlib import Path

import msgspec
import numpy as np
import pytest
from conftest import FIXTURES, REPO
from test_kineto_scanner import _chunk_of, _same_chunk, needs_scanner

from traceread.loaders.kineto import decode, scan

# One xdist worker runs this module's tests (tests/conftest.py ONE_WORKER_MODULES): its module-scoped ``general_builds`` is made once.

SOURCE = REPO / "traceread" / "loaders" / "kineto" / "_cscan.c"
_EV = b'{"ph": "X", "cat": "kernel", "name": "k", "pid": 3, "tid": 4, "ts": 5, "dur": 1%s}'


def _digits(k: int, rng: np.random.Generator, lead: str | None = None) -> str:
    head = lead if lead is not None else str(int(rng.integers(1, 10)))
    return head + "".join(str(int(d)) for d in rng.integers(0, 10, k - 1))


def _numbers(rng: np.random.Generator) -> list[str]:
    out = []
    for k in range(1, 21):
        for decimals in (0, 1, 3, 4, 7, 8, 9):
            for lead in (None, "0"):
                x = _digits(k, rng, lead)
                if decimals:
                    x += "." + "".join(str(int(d)) for d in rng.integers(0, 10, decimals))
                out += [x, "-" + x]
    out += ["0", "-0", "0.0", "1e3", "1E+2", "2.5e-3", "01", "-", "1.", ".5", "1.e2", "--1", "9223372036854775",
            "9223372036854774", "9999999999999999", "10000000000000000", "9223372036854775807",
            "9223372036854775808"]
    return out


def _texts(rng: np.random.Generator) -> list[str]:
    """Plain strings of 0-34 bytes, and ones with an escape, control or non-ASCII byte at each place."""
    out = []
    for n in range(0, 35):
        plain = "".join(chr(int(c)) for c in rng.integers(ord("a"), ord("z") + 1, n))
        out.append(plain)
        if n in (0, 1, 7, 8, 9, 14, 15, 16, 17, 18, 31, 32, 33):
            for special in ("\\n", '\\"', "\\u00e9", "\\ud83d", "\x01", "\xc3\xa9", "\xff", "\\x"):
                for at in sorted({0, n // 2, max(n - 1, 0), n}):
                    out.append(plain[:at] + special + plain[at:])
    return out


def _enc(text: str) -> bytes:
    return text.encode("latin-1")  # the texts above are byte strings spelled as latin-1


def _bodies(rng: np.random.Generator, pads: range) -> list[bytes]:
    """Chunks holding each number / text in each field the scanner reads, ending `pad` bytes after it."""
    out = []
    for num in _numbers(rng):
        n = num.encode()
        for field in (b', "x": %s' % n, b', "args": {"External id": %s}' % n, b', "args": {"Ev Idx": [%s, [%s]]}' % (n, n),
                      b', "args": {"grid": [%s, 1, 1], "block": [1, 1, %s]}' % (n, n)):
            ev = _EV % field
            out += [ev + b" " * p for p in pads]
        for field in (b'"ts": %s, "dur": 1', b'"ts": 5, "dur": %s', b'"ts": 5, "dur": 1, "pid": %s',
                      b'"ts": 5, "dur": 1, "tid": %s'):
            ev = b'{"ph": "X", "cat": "kernel", "name": "k", %s}' % (field % n)
            out += [ev + b" " * p for p in pads]
    for text in _texts(rng):
        t = _enc(text)
        for ev in (b'{"ph": "X", "cat": "%s", "name": "n", "ts": 5, "dur": 1}' % t,
                   b'{"ph": "X", "cat": "c", "name": "n", "ts": 5, "dur": 1, "%s": 2}' % t,
                   b'{"ph": "X", "cat": "c", "name": "n", "ts": 5, "dur": 1, "args": {"%s": "%s"}}' % (t, t),
                   b'{"ph": "X", "cat": "c", "name": "n", "ts": 5, "dur": 1, "tid": "%s"}' % t):
            out += [ev + b" " * p for p in pads]
    for sid in ("1441273664", "0", "007", "1" * 15, "1" * 16, "1" * 17, "1" * 18, "1" * 19, " 12", "-5", "0x1f",
                "stream 7", "Spans"):
        ev = b'{"ph": "X", "cat": "c", "name": "n", "ts": 5, "dur": 1, "pid": "%s", "tid": "%s"}' % (
            sid.encode(), sid.encode())
        out += [ev + b" " * p for p in pads]
    for sep in (b",", b", ", b",\n    ", b" ,", b", \n", b",\t"):  # the separators' one-compare paths
        for colon in (b":", b": ", b" : ", b":\n  ", b":  "):
            ev = b"{" + sep.join(b'"%s"%s%s' % (k, colon, v) for k, v in (
                (b"ph", b'"X"'), (b"cat", b'"c"'), (b"name", b'"n"'), (b"ts", b"5"), (b"dur", b"1"),
                (b"args", b'{"External id"%s7%s"x"%s[1%s2%s[]]}' % (colon, sep, colon, sep, sep)))) + b"}"
            out += [ev + b" " * p for p in pads]
    for depth in (62, 63, 64, 65):  # "[]" at the nesting limit
        out.append(_EV % (b', "x": ' + b"[" * depth + b"[]" + b"]" * depth))
    return out


@needs_scanner
def test_fast_path_shapes_same_as_msgspec() -> None:
    rng = np.random.default_rng(4)
    taken = 0
    bodies = _bodies(rng, range(0, 18, 17))  # right at the end, and with room for every word load
    for j in rng.choice(len(bodies), 1000, replace=False):
        body = bodies[j]
        fast, _ = decode.decode_scanned(body, False)
        try:
            msgspec.json.decode(b"[" + body + b"]")
        except msgspec.DecodeError:
            assert fast is None, body  # never takes what is not JSON
            continue
        if fast is None:
            continue
        _same_chunk(fast, decode.decode_msgspec(b"[" + body + b"]", body, False))
        taken += 1
    assert taken > 150
    # the shapes the fast paths are for are taken, whatever their distance to the end
    for pad in range(0, 18):
        shapes = [b'{"ph": "X", "cat": "cpu_op", "name": "aten::convolution_backward", "pid": 2910249, '
                  b'"tid": "1441273664", "ts": 4458680458014.060, "dur": 355.630, "args": {"External id": 332944,'
                  b'"Record function id": 332640, "Ev Idx": 328335, "Input Dims": [[1, 3], [64], []]}}',
                  b'{"ph": "X", "cat": "Operator", "name": "aten::view", "pid": 118664, "tid": "1441273664",\n'
                  b'    "ts": 1610366392280370, "dur": 11, "args": {"Input dims": [[150528], []], "Device": 0}}',
                  _EV % (b', "%s": 1' % (b"k" * 15)), _EV % (b', "%s": 1' % (b"k" * 16)),
                  _EV % (b', "%s": 1' % (b"k" * 17)), _EV % b', "x": 9999999999999999.1234567']
        for body in shapes:
            body += b" " * pad
            fast, reason = decode.decode_scanned(body, False)
            assert fast is not None, (pad, body, reason)
            _same_chunk(fast, decode.decode_msgspec(b"[" + body + b"]", body, False))


def _build(tmp: Path, define: str) -> object:
    cc = sysconfig.get_config_var("LDSHARED") or "cc -shared"
    out = tmp / f"_cscan_{define.lower()}.so"
    cmd = [*shlex.split(cc), "-fPIC", "-O2", f"-I{sysconfig.get_paths()['include']}", f"-D{define}", str(SOURCE),
           "-o", str(out)]
    try:
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"no C compiler to build the {define} variant: {e}")
    spec = importlib.util.spec_from_file_location("_cscan", out)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def general_builds(tmp_path_factory: pytest.TempPathFactory) -> list:
    if not scan.BUILT:
        pytest.skip("compiled scanner not built")
    tmp = tmp_path_factory.mktemp("cscan")
    return [_build(tmp, "CSCAN_PLAIN"), _build(tmp, "CSCAN_NO_SSE2")]


def _raw(mod, body: bytes) -> tuple:
    cap = len(body) // 16 + 64
    cols = np.zeros((scan.NCOLS, cap), np.int64)
    kern = np.zeros((scan.NKCOLS, cap), np.int64)
    return mod.scan(body, cols, kern, cap), cols, kern


def _assert_same_raw(mods: list, body: bytes) -> None:
    from traceread.loaders.kineto import scan

    r0, c0, k0 = _raw(scan.COMPILED, body)
    for mod in mods:
        r, c, k = _raw(mod, body)
        assert r == r0, body[:400]
        assert np.array_equal(c, c0) and np.array_equal(k, k0), body[:400]


def test_fast_paths_same_as_the_general_code(general_builds: list) -> None:
    rng = np.random.default_rng(5)
    bodies = _bodies(rng, range(0, 1))
    for body in bodies:
        for pad in (0, 1, 8, 9, 16, 17):  # the word loads' bounds checks, both sides of each
            _assert_same_raw(general_builds, body + b" " * pad)
        for cut in range(max(len(body) - 18, 0), len(body)):  # numbers and strings cut by the end
            _assert_same_raw(general_builds, body[:cut])
    assert len(bodies) > 5_000


@pytest.mark.parametrize("name", ["hta_nccl_a100_rank0of2.json.gz", "kineto2021_resnet50_bare_list.pt.trace.json.gz",
                                  "tracelens_sglang_decode_mi300x.json.gz"])
def test_real_and_mutated_chunks_same_as_the_general_code(general_builds: list, name: str) -> None:
    base = _chunk_of(FIXTURES / name, 200_000)
    _assert_same_raw(general_builds, base)
    rng = np.random.default_rng(17)
    junk = [b'"', b"\\", b"{", b"}", b"[", b"]", b",", b":", b".", b"e", b"-", b"0", b"9", b"\x00", b"\xff",
            b"\xc3", b" ", b"\n", b"u", b"1234567890", b"00", b", ", b": "]
    small = base[: base.index(b"},", 20_000) + 1]
    for trial in range(600):
        text = bytearray(small)
        for _ in range(int(rng.integers(1, 4))):
            at = int(rng.integers(0, len(text)))
            op = trial % 4
            if op == 0:
                text[at: at + 1] = junk[int(rng.integers(0, len(junk)))]
            elif op == 1:
                del text[at: at + int(rng.integers(1, 6))]
            elif op == 2:
                text[at:at] = junk[int(rng.integers(0, len(junk)))]
            else:
                text = text[:at]
        _assert_same_raw(general_builds, bytes(text))
