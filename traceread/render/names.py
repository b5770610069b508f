"""Names as reports show them: shortened readably, escaped for Markdown, scrubbed of private paths.

Kernel and op names come straight from the trace: C++ templates hundreds of characters long, pipes,
backticks and angle brackets that break Markdown tables or turn into HTML. Python frames carry
absolute paths, which name users (``/home/alice/...``). Every renderer passes names through here;
JSON keeps the full name (path-scrubbed only).
"""

from __future__ import annotations

import re

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


def _collapse_depth(name: str, keep_depth: int) -> str:
    """Replace template arguments nested deeper than ``keep_depth`` by ``…``."""
    out: list[str] = []
    depth = 0
    for ch in name:
        if ch == "<":
            depth += 1
            if depth <= keep_depth + 1:
                out.append(ch)
            if depth == keep_depth + 1:
                out.append(ELLIPSIS)
            continue
        if ch == ">" and depth > 0:
            if depth <= keep_depth + 1:
                out.append(ch)
            depth -= 1
            continue
        if depth <= keep_depth:
            out.append(ch)
    return "".join(out)


def _drop_params(name: str) -> str:
    """Drop a trailing C++ parameter list ``(int, float*, ...)``: the template arguments identify the kernel."""
    if not name.endswith(")"):
        return name
    depth = 0
    for i in range(len(name) - 1, 0, -1):
        depth += {")": 1, "(": -1}.get(name[i], 0)
        if depth == 0:
            head = name[:i].rstrip()
            return head if head and not head.endswith(("::", "operator")) else name
    return name


_QUALIFIER = re.compile(r"\b(?:[A-Za-z_]\w*::)+")


def _unqualify_args(name: str) -> str:
    """Drop namespace qualifiers inside template arguments (``<at::native::Mul<float>>`` -> ``<Mul<float>>``)."""
    cut = name.find("<")
    if cut < 0:
        return name
    return name[:cut] + _QUALIFIER.sub("", name[cut:])


def shorten(name: str, max_len: int = DEFAULT_MAX_LEN) -> str:
    """A readable short form of a long (templated) kernel or op name; short names pass unchanged.

    Steps, each only while the name is still too long: drop ``void ``/return types and the parameter
    list, collapse nested template arguments, then cut the middle.
    """
    name = _WS.sub(" ", scrub_paths(str(name))).strip()
    if len(name) <= max_len:
        return name
    if name.startswith("void "):
        name = name[5:]
    name = name.replace("(anonymous namespace)::", "")
    name = _drop_params(name)
    name = _unqualify_args(name)
    for depth in (1, 0):
        if len(name) <= max_len:
            return name
        name = _collapse_depth(name, depth)
        name = name.replace(" >", ">")
    if len(name) <= max_len:
        return name
    head = (max_len - 1) * 2 // 3
    tail = max_len - 1 - head
    return name[:head] + ELLIPSIS + name[-tail:]


_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")


def md_text(text: str) -> str:
    """Escape free text for a Markdown paragraph or table cell (pipes, backticks, emphasis, HTML).

    Paths are scrubbed too: evidence and notes may quote a Python frame.
    """
    text = _WS.sub(" ", scrub_paths(str(text)))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def md_code(text: str) -> str:
    """A Markdown code span holding ``text`` verbatim, safe inside a table cell.

    Inside a code span ``<``, ``_`` and ``*`` are literal; backticks need a longer fence and pipes
    need ``\\|`` (GitHub splits table cells before parsing code spans).
    """
    text = _WS.sub(" ", scrub_paths(str(text))).strip()
    if not text:
        return ""
    runs = [len(m) for m in re.findall(r"`+", text)]
    fence = "`" * (max(runs, default=0) + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text.replace('|', chr(92) + '|')}{pad}{fence}"


def md_name(name: str, max_len: int = DEFAULT_MAX_LEN) -> str:
    """A kernel/op name for Markdown: path-scrubbed, shortened, in a code span."""
    return md_code(shorten(name, max_len))
