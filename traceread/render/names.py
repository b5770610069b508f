"""Names as reports show them: shortened readably, escaped for Markdown, scrubbed of private paths.

Kernel and op names come straight from the trace: C++ templates hundreds of characters long, pipes,
backticks and angle brackets that break Markdown tables or turn into HTML. Python frames carry
absolute paths, which name users (``/home/alice/...``), and hostile ones terminal escape sequences
(shown as ``\\x1b``, see :mod:`traceread.printable`). Every renderer passes names through here;
JSON keeps the full name (path-scrubbed only).
"""

from __future__ import annotations

import bisect
import difflib
import re
from collections import Counter

from traceread.printable import printable

ELLIPSIS = "…"
DEFAULT_MAX_LEN = 80

# An absolute (or home-relative) directory prefix: /home/alice/proj/, C:\Users\bob\, ~/x/.
_DIR_PREFIX = re.compile(r"(?:[A-Za-z]:[\\/]|~[\\/]|(?<![\w.])[\\/])(?:[^\\/\s:()<>\"'|]+[\\/])+")
_WS = re.compile(r"\s+")


def scrub_paths(text: str) -> str:
    """Drop directory prefixes of paths, keeping the file name (``/home/u/t.py(3): f`` -> ``t.py(3): f``)."""
    if "/" not in text and "\\" not in text:  # most names: skip the regex
        return text
    return _DIR_PREFIX.sub("", text)


# Rewrites that make a long C++ name readable without losing what it is (applied only to long names).
_CAST = re.compile(r"\((?:unsigned |signed )?(?:int|long|long long|short|char|bool|unsigned)\)(?=-?\d)")
_VOID_ARG = re.compile(r"(?<=[<,] )void |(?<=<)void ")  # nsys spells function-template arguments with it
_OPERATOR_CALL = re.compile(r"::operator ?\(\) ?\([^()]*\)(?: const)?(?=::[{\[]lambda)")
_LAMBDA = re.compile(r"\{lambda\(([^()]*)\)#\d+\}|\[lambda\(([^()]*)\) \(instance \d+\)\]")
_LAMBDA_CHAIN = re.compile(r"(?:::lambda\([^()]*\)(?:#\d+)?)+(?=::lambda\()")
_PARAMS_BEFORE_LAMBDA = re.compile(r"(?<=[\w>])\((?:[^()]|\([^()]*\))*\)(?=::lambda\()")
_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+(?!lambda\()")  # not the function a lambda names
_OPEN, _CLOSE = "<(", ">)"


def _normalize(name: str, lambda_index: bool = False) -> str:
    """Spelling noise out of a long name: ``void``, anonymous namespaces, clang's ``(int)4`` casts, lambda chains.

    ``f(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda(float)#1}`` (gcc) and
    ``f(...)::[lambda() (instance 1)]::operator ()() const::[lambda(float) (instance 1)]`` (nsys's
    demangler) both become ``f::lambda(float)``: the enclosing function names the op
    (``f::lambda(float)#2`` with ``lambda_index``, for two lambdas of one function).
    """
    name = name.removeprefix("void ")
    for anon in ("(anonymous namespace)::", "<unnamed>::", "::<unnamed>"):
        name = name.replace(anon, "")
    name = _CAST.sub("", name)
    name = _VOID_ARG.sub("", name)
    if "lambda" in name:
        name = _OPERATOR_CALL.sub("", name)
        name = _LAMBDA.sub(lambda m: _lambda(m, lambda_index), name)
        name = _LAMBDA_CHAIN.sub("", name)
        name = _PARAMS_BEFORE_LAMBDA.sub("", name)
    name = name.replace(" >", ">").replace(" &", "&").replace(" *", "*")
    return _unwrap(name) if "gpu_kernel_impl" in name else name


_WRAPPER = re.compile(r"(?:at::native::)?gpu_kernel_impl(?:_nocast)?<")


def _unwrap(name: str) -> str:
    """``gpu_kernel_impl<F>::lambda(int)`` -> ``F``: PyTorch's launch wrapper says nothing about the op."""
    m = _WRAPPER.search(name)
    if not m:
        return name
    close = {o: c for o, c in _groups(list(name))}.get(m.end() - 1)
    if close is None:
        return name
    rest = name[close + 1:]
    rest = rest[len("::lambda(int)"):] if rest.startswith("::lambda(int)") else rest
    return name[:m.start()] + name[m.end():close] + _unwrap(rest)


def _lambda(m: re.Match, index: bool) -> str:
    args = m.group(1) if m.group(1) is not None else m.group(2)
    number = re.search(r"(?:#|instance )(\d+)", m.group(0))
    return f"lambda({args})" + (f"#{number.group(1)}" if index and number else "")


class _Chars:
    """A name being shortened: its characters and, per character, whether it must stay (it tells the
    name apart from another one that would otherwise read the same)."""

    def __init__(self, text: str, keep: list[bool] | None = None) -> None:
        self.c = list(text)
        self.keep = keep if keep is not None else [False] * len(text)

    def __len__(self) -> int:
        return len(self.c)

    def text(self) -> str:
        return "".join(self.c)

    def removable(self, i: int, j: int) -> bool:
        return not any(self.keep[i:j])

    def replace(self, i: int, j: int, by: str = "") -> None:
        self.c[i:j] = list(by)
        self.keep[i:j] = [False] * len(by)


def _groups(chars: list[str]) -> list[tuple[int, int]]:
    """Matching ``<...>`` and ``(...)`` pairs as (open index, close index); none when unbalanced."""
    stack: list[int] = []
    out: list[tuple[int, int]] = []
    for i, ch in enumerate(chars):
        if ch in _OPEN:
            stack.append(i)
        elif ch in _CLOSE:
            if not stack or _OPEN.index(chars[stack[-1]]) != _CLOSE.index(ch):
                return []
            out.append((stack.pop(), i))
    return out if not stack else []


def _drop_params(s: _Chars) -> None:
    """Drop a trailing C++ parameter list ``(int, float*, ...)``: the template arguments identify the kernel."""
    if not s.c or s.c[-1] != ")":
        return
    opens = [o for o, c in _groups(s.c) if c == len(s.c) - 1]
    if not opens:
        return
    head = "".join(s.c[:opens[0]]).rstrip()
    if head and not head.endswith(("::", "operator")) and s.removable(len(head), len(s.c)):
        s.replace(len(head), len(s.c))


def _unqualify_args(s: _Chars) -> None:
    """Drop namespace qualifiers inside template arguments (``<at::native::Mul<float>>`` -> ``<Mul<float>>``)."""
    text = s.text()
    cut = text.find("<")
    if cut < 0:
        return
    for m in reversed(list(_QUALIFIER.finditer(text, cut))):
        if s.removable(m.start(), m.end()):
            s.replace(m.start(), m.end())


def _plain_arg_runs(chars: list[str], o: int, c: int) -> list[tuple[int, int]]:
    """Spans of two or more consecutive plain arguments (types, numbers) of the group ``(o, c)`` that
    also holds other arguments: ``BinaryFunctor<float, float, float, MulFunctor<…>>`` -> the floats."""
    cuts, depth = [o], 0
    for i in range(o + 1, c):
        depth += (chars[i] in _OPEN) - (chars[i] in _CLOSE)
        if depth == 0 and chars[i] == ",":
            cuts.append(i)
    cuts.append(c)
    args = [(cuts[k] + 1, cuts[k + 1]) for k in range(len(cuts) - 1)]
    plain = [_says_little("".join(chars[a:b])) and "".join(chars[a:b]).strip() != ELLIPSIS for a, b in args]
    if all(plain):
        return []
    runs, k = [], 0
    while k < len(args):
        if plain[k]:
            j = k
            while j + 1 < len(args) and plain[j + 1]:
                j += 1
            if j > k:
                runs.append((args[k][0] + (chars[args[k][0]] == " "), args[j][1]))
            k = j + 1
        else:
            k += 1
    return runs


# Past this many characters a name is collapsed in bulk: groups nested deeper than HUGE_DEPTH are
# emptied in one pass, then every candidate of the best kind at once per round, so that the work
# stays linear in the name's length (one at a time, the work is quadratic in a name of many groups).
# Shorter names (every real kernel name seen) collapse one group at a time, longest first.
HUGE_NAME = 1024
HUGE_DEPTH = 2


def _collapse(s: _Chars, max_len: int) -> None:
    """Collapse template/argument lists to ``…`` while the name is too long: lists of plain types and
    numbers first, then runs of plain arguments beside a named one, then the rest, longest first."""
    if len(s) > HUGE_NAME:
        _empty_deep_groups(s)
    while len(s) > max_len:
        found = _candidates(s)
        if not found:
            return
        if len(s) > HUGE_NAME:  # in bulk: the candidates of one kind are disjoint (innermost groups, runs)
            kind = min(k for k, _, _ in found)
            for _, a, b in sorted((c for c in found if c[0] == kind), key=lambda c: -c[1]):
                s.replace(a, b, ELLIPSIS)
            continue
        _, a, b = min(found, key=lambda c: (c[0], -(c[2] - c[1])))
        s.replace(a, b, ELLIPSIS)


def _candidates(s: _Chars) -> list[tuple[int, int, int]]:
    """(kind, start, end) of every span :func:`_collapse` may turn into ``…`` (removable ones)."""
    groups = _groups(s.c)
    # how many template groups hold each position: a call outside templates is part of the name
    depth = [0] * (len(s.c) + 1)
    for lo, lc in groups:
        if s.c[lo] == "<":
            depth[lo + 1] += 1
            depth[lc] -= 1
    for i in range(1, len(depth)):
        depth[i] += depth[i - 1]
    out = []
    for o, c in groups:
        if s.c[o] == "(" and depth[o] == 0:
            continue  # a call outside templates (``enumerate(DataLoader)#...``) is part of the name
        inner = s.c[o + 1:c]
        candidates = [(2, o + 1, c)] if inner != [ELLIPSIS] and (
            not any(ch in _OPEN for ch in inner) or _all_collapsed(inner)) else []
        if candidates and _says_little("".join(inner)):
            candidates = [(0, o + 1, c)]
        candidates += [(1, a, b) for a, b in _plain_arg_runs(s.c, o, c)]
        out += [(kind, a, b) for kind, a, b in candidates if s.removable(a, b)]
    return out


def _empty_deep_groups(s: _Chars) -> None:
    """``…`` inside every group nested deeper than HUGE_DEPTH (one pass; kept characters stay)."""
    spans, stack = [], []
    for i, ch in enumerate(s.c):
        if ch in _OPEN:
            stack.append(i)
        elif ch in _CLOSE and stack:
            o = stack.pop()
            if len(stack) == HUGE_DEPTH and i > o + 1:  # the outermost group at that depth
                spans.append((o + 1, i))
    for a, b in reversed(spans):  # disjoint, right to left: earlier indices stay valid
        if s.removable(a, b):
            s.replace(a, b, ELLIPSIS)


_PLAIN = frozenset("bool char short int long unsigned signed float double half Half BFloat16 bfloat16 const "
                   "void size_t ul u T T1 T2 T3".split())


def _says_little(inner: str) -> bool:
    """True for template/call arguments of only plain types and numbers (``float, 4``, ``char*, 3``)."""
    return all(w in _PLAIN for w in re.findall(r"[A-Za-z_]\w*", inner))


def _all_collapsed(inner: list[str]) -> bool:
    """True when every bracket group inside ``inner`` is already ``…``."""
    text = "".join(inner)
    return all(text[i + 1:i + 3] in (ELLIPSIS + ">", ELLIPSIS + ")") for i, ch in enumerate(text) if ch in _OPEN)


def _runs(keep: list[bool]) -> list[list[int]]:
    """Runs [start, end) of kept characters; runs a character or two apart are one run."""
    runs: list[list[int]] = []
    for i, k in enumerate(keep):
        if k:
            if runs and i - runs[-1][1] <= 2:
                runs[-1][1] = i + 1
            else:
                runs.append([i, i + 1])
    return runs


def _widen(text: str, run: list[int], reach: int = 48) -> list[int]:
    """A run widened to the whole template/call argument it sits in (at most ``reach`` characters a side)."""
    a, depth = run[0], 0
    while a > 0 and run[0] - a < reach:
        ch = text[a - 1]
        depth += (ch in _CLOSE) - (ch in _OPEN)
        if depth < 0:  # inside a template's arguments: take the template's name too
            a -= 1
            while a > 0 and run[0] - a < reach and (text[a - 1].isalnum() or text[a - 1] in "_:"):
                a -= 1
            break
        if depth == 0 and ch in ", ":
            break
        a -= 1
    b, depth = run[1], 0
    while b < len(text) and b - run[1] < reach:
        ch = text[b]
        depth += (ch in _OPEN) - (ch in _CLOSE)
        if depth < 0 or (depth == 0 and ch == ","):
            break
        b += 1
    return [a, b]


def _join(text: str, pieces: list[list[int]]) -> str:
    out, at = [], 0
    for a, b in pieces:
        out.append((ELLIPSIS if a > at else "") + text[a:b])
        at = b
    return "".join(out) + (ELLIPSIS if at < len(text) else "")


def _cut(s: _Chars, max_len: int) -> str:
    """Cut a name still too long: the middle by default; around the characters that must stay when there are."""
    text = s.text()
    if len(text) <= max_len:
        return text
    head = (max_len - 1) * 2 // 3
    tail = max_len - 1 - head
    runs = _runs(s.keep)
    if not runs:
        return text[:head] + ELLIPSIS + text[-tail:]
    # The kernel's own name (up to its template arguments), then each part that tells it apart.
    lt = text.find("<")
    head = lt + 1 if 0 < lt <= max_len * 3 // 5 else min(max_len // 3, runs[0][0])
    # Without its namespaces the kernel's name leaves more room for what tells it apart.
    bare = text.rfind("::", 0, head) + 2 if head == lt + 1 and text.rfind("::", 0, head) > 0 else 0
    heads = [[0, head]] + ([[bare, head]] if bare else [])
    tries = [[h] + [_widen(text, r, reach) for r in runs] for reach in (48, 24, 12) for h in heads] + [[[0, head]] + [[a, min(b, a + cap)] for a, b in runs] for cap in (10 ** 6, 24, 12, 6, 3)]
    for pieces in tries:
        merged: list[list[int]] = []
        for a, b in pieces:
            if merged and a <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], b)
            else:
                merged.append([a, b])
        shown = _join(text, merged)
        if len(shown) <= max_len:
            # Room left: more of what follows the last part, for context.
            while merged[-1][1] < len(text):
                merged[-1][1] += 1
                longer = _join(text, merged)
                if len(longer) > max_len:
                    break
                shown = longer
            return shown
    return shown[:max_len - 1] + ELLIPSIS


def _shorten_chars(s: _Chars, max_len: int) -> str:
    if len(s) > max_len:
        _drop_params(s)
        _unqualify_args(s)
        _collapse(s, max_len)
    return _cut(s, max_len)


def shorten(name: str, max_len: int = DEFAULT_MAX_LEN) -> str:
    """A readable short form of a long (templated) kernel or op name; short names pass unchanged.

    Steps, each only while the name is still too long: drop ``void``, anonymous namespaces, clang
    casts and lambda chains (the enclosing function stays), the parameter list, namespaces inside
    template arguments, collapse template arguments (innermost and longest first), then cut the middle.
    Distinct names can shorten alike; :class:`ShortNames` keeps a set of names apart.
    """
    name = printable(_WS.sub(" ", scrub_paths(str(name))).strip())
    if len(name) <= max_len:
        return name
    return _shorten_chars(_Chars(_normalize(name)), max_len)


_TOKEN = re.compile(r"[A-Za-z]+|\d+|\s+|.")
_FULL_COMPARE, _NEIGHBOURS = 24, 6  # family size compared all against all; else neighbours each side


def _diff_spans(mine: list[tuple[int, int, str]], theirs: list[str]) -> list[tuple[int, int]]:
    """Character spans of ``mine``'s tokens that differ from ``theirs`` (an insertion on their side marks
    the token beside it)."""
    spans = []
    words = [w for _, _, w in mine]
    if len(words) + len(theirs) > _DIFF_TOKENS:
        return _diff_spans_huge(mine, words, theirs)
    matcher = difflib.SequenceMatcher(None, words, theirs, autojunk=False)
    for op, i1, i2, _, _ in matcher.get_opcodes():
        if op == "equal":
            continue
        if i2 == i1:  # they have tokens here that we lack: our neighbour tells us apart
            i1, i2 = (i1 - 1, i1) if i1 > 0 else (0, 1)
        spans.append((mine[i1][0], mine[min(i2, len(mine)) - 1][1]))
    return spans


# Names of more tokens than this (together) are compared in linear time: their common start and end
# set aside, the rest token by token, the first _HUGE_SPANS differences kept (the alignment is
# quadratic in the tokens: two very long names that differ near their end would take minutes).
_DIFF_TOKENS = 2_000
_HUGE_SPANS = 8


def _diff_spans_huge(mine: list[tuple[int, int, str]], words: list[str], theirs: list[str]) -> list[tuple[int, int]]:
    n = min(len(words), len(theirs))
    p = 0
    while p < n and words[p] == theirs[p]:
        p += 1
    q = 0
    while q < n - p and words[-1 - q] == theirs[-1 - q]:
        q += 1
    a, b = words[p:len(words) - q], theirs[p:len(theirs) - q]
    if not a:  # they have tokens here that we lack: our neighbour tells us apart
        at = min(p, len(mine) - 1) if p < len(mine) else len(mine) - 1
        at = p - 1 if p > 0 else at
        return [(mine[max(at, 0)][0], mine[max(at, 0)][1])] if mine else []
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(a) and len(spans) < _HUGE_SPANS:
        if i < len(b) and a[i] == b[i]:
            i += 1
            continue
        j = i
        while j < len(a) and not (j < len(b) and a[j] == b[j]):
            j += 1
        spans.append((mine[p + i][0], mine[p + j - 1][1]))
        i = j
    return spans


def _covered(span: tuple[int, int], todo: set[int], diffs: dict[int, list[tuple[int, int]]]) -> set[int]:
    """The texts in ``todo`` that ``span`` tells apart (it overlaps one of their differing spans)."""
    return {j for j in todo if any(a < span[1] and span[0] < b for a, b in diffs[j])}


def _telling_chars(texts: list[str]) -> list[list[bool]]:
    """Per text, a few character spans that together tell it apart from every other text of the list.

    Tokens (words, numbers, symbols) are aligned with difflib; the spans are chosen greedily, each the
    one that separates the text from the most others still alike, the earliest on a tie.
    """
    tokens = [[(m.start(), m.end(), m.group()) for m in _TOKEN.finditer(t)] for t in texts]
    words = [[w for _, _, w in tk] for tk in tokens]
    # A large family is compared with its neighbours in name order only (the alignment is quadratic);
    # what still reads alike comes back as a smaller clash on the next pass.
    order = sorted(range(len(texts)), key=texts.__getitem__)
    rank = {i: k for k, i in enumerate(order)}
    reach = len(texts) if len(texts) <= _FULL_COMPARE else _NEIGHBOURS
    out = []
    for i, text in enumerate(texts):
        near = order[max(rank[i] - reach, 0):rank[i] + reach + 1]
        diffs = {j: _diff_spans(tokens[i], words[j]) for j in near if j != i and tokens[i]}
        todo = {j for j, sp in diffs.items() if sp}
        candidates = sorted({sp for sps in diffs.values() for sp in sps})
        keep = [False] * len(text)
        while todo and candidates:
            hits = {sp: _covered(sp, todo, diffs) for sp in candidates}
            best = max(candidates, key=lambda sp: (len(hits[sp]), -sp[0]))
            hit = hits[best]
            if not hit:
                break
            keep[best[0]:best[1]] = [True] * (best[1] - best[0])
            todo -= hit
            candidates.remove(best)
        out.append(keep)
    return out


def _comparable(names: list[str]) -> list[str]:
    """Long names as they are compared: normalized, then without the parameter list and the namespaces
    inside template arguments, each only while the names stay distinct (an FP8 GEMM may differ only there)."""
    clean = [printable(_WS.sub(" ", scrub_paths(n)).strip()) for n in names]
    texts = [_normalize(n) for n in clean]
    count = Counter(texts)
    texts = [t if count[t] == 1 else _normalize(n, lambda_index=True) for n, t in zip(clean, texts, strict=True)]
    for step in (_drop_params, _unqualify_args):
        after = []
        for t in texts:
            c = _Chars(t)
            step(c)
            after.append(c.text())
        count = Counter(after)
        mixed = [a if count[a] == 1 else t for t, a in zip(texts, after, strict=True)]
        if len(set(mixed)) == len(texts):
            texts = mixed
    return texts


class ShortNames:
    """Short forms of a set of names that stay as distinct as the names: ``ShortNames(names)(name)``.

    Names that :func:`shorten` would fold together are shortened again keeping the characters that
    tell them apart (a functor, the op inside a wrapper, a template argument, a tile size); only when
    even that reads alike (never seen on real traces) is a number ``[2]`` appended. Names outside the
    set get plain :func:`shorten`.

    ``shown``: the names a table shows, when it shows only some. They are kept apart from each other
    and from their :data:`SHOWN_NEIGHBOURS` neighbours each side in name order among ``names``
    (names that shorten alike share their start, so sort together); the work is then bounded by
    the rows shown, not by a trace's thousands of distinct names (each shortening is Python work per token).
    """

    def __init__(self, names, max_len: int = DEFAULT_MAX_LEN, shown=None) -> None:
        self.max_len = max_len
        full = sorted({str(n) for n in names})
        if shown is not None:
            full = _with_neighbours(full, {str(n) for n in shown})
        short = {n: shorten(n, max_len) for n in full}
        text: dict[str, str] = {}
        keep: dict[str, list[bool]] = {}
        for _ in range(6):  # each pass only keeps more characters, so it settles
            by_short: dict[str, list[str]] = {}
            for n, s in short.items():
                by_short.setdefault(s, []).append(n)
            clashes = [g for g in by_short.values() if len(g) > 1]
            if not clashes:
                break
            fresh = [n for g in clashes for n in g if n not in text]
            text.update(zip(fresh, _comparable(fresh), strict=True))
            for group in clashes:
                for n, k in zip(group, _telling_chars([text[n] for n in group]), strict=True):
                    keep[n] = [a or b for a, b in zip(keep.get(n, k), k, strict=True)]
                    short[n] = _shorten_chars(_Chars(text[n], list(keep[n])), max_len)
        seen: dict[str, int] = {}
        for n in full:  # last resort: number what still reads alike, in name order
            seen[short[n]] = seen.get(short[n], 0) + 1
            if seen[short[n]] > 1:
                short[n] = f"{short[n]} [{seen[short[n]]}]"
        self._short = short

    def __call__(self, name: str) -> str:
        return self._short.get(str(name)) or shorten(name, self.max_len)

    def __len__(self) -> int:
        return len(self._short)


SHOWN_NEIGHBOURS = _FULL_COMPARE


def _with_neighbours(ordered: list[str], shown: set[str]) -> list[str]:
    """``shown`` and the names beside each of them in ``ordered`` (sorted), in name order."""
    pick = set(shown)
    for name in shown:
        at = bisect.bisect_left(ordered, name)
        pick.update(ordered[max(at - SHOWN_NEIGHBOURS, 0):at + SHOWN_NEIGHBOURS + 1])
    return sorted(pick)


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")


def md_text(text: str) -> str:
    """Escape free text for a Markdown paragraph or table cell (pipes, backticks, emphasis, HTML).

    Paths are scrubbed too: evidence and notes may quote a Python frame.
    """
    text = printable(_WS.sub(" ", scrub_paths(str(text))))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


_MD_ESCAPED = re.compile(r"\\([\\`*_\[\]#~])|&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}


def terminal_text(markdown: str) -> str:
    """Markdown text as a terminal shows it: the backslash escapes :func:`md_text` adds are removed
    (``resnet50\\_run2`` reads ``resnet50_run2``, ``&lt;`` reads ``<``), except ``\\|``, which keeps a table's cells apart.
    Files written with ``-o`` keep the escapes: they are read as Markdown."""
    return _MD_ESCAPED.sub(lambda m: m.group(1) or _ENTITIES[m.group(2)], markdown)


def md_code(text: str) -> str:
    """A Markdown code span holding ``text`` verbatim, safe inside a table cell.

    Inside a code span ``<``, ``_`` and ``*`` are literal; backticks need a longer fence and pipes
    need ``\\|`` (GitHub splits table cells before parsing code spans).
    """
    text = printable(_WS.sub(" ", scrub_paths(str(text))).strip())
    if not text:
        return ""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def md_name(name: str, max_len: int = DEFAULT_MAX_LEN, short: ShortNames | None = None) -> str:
    """A kernel/op name for Markdown: path-scrubbed, shortened (by ``short`` when given), in a code span."""
    return md_code(short(name) if short is not None else shorten(name, max_len))
