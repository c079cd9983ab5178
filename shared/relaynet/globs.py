"""Claim scopes: normalisation, parsing and the exact overlap test of PROTOCOL.md 8.

Two claims conflict when their scopes *overlap*: some path matches both. This module decides
that exactly, for globs, in polynomial time, without building regular expressions.

Semantics (PROTOCOL.md 8)
-------------------------
* Scopes are ``/``-separated and case-sensitive. :func:`normalise` trims whitespace (again
  if dropping ``/`` or ``.`` segments exposed more, so ``"/ x"`` is ``x``), drops
  empty segments (so leading ``/`` and repeated ``/`` go) and ``.`` segments (so a leading
  ``./`` goes); a trailing ``/`` means ``dir/**``; a ``..`` segment is an error (400); an
  empty scope, ``.`` and ``**`` all normalise to ``**`` (the whole tree). Adjacent ``**``
  segments collapse into one (``a/**/**/b`` is ``a/**/b``; they mean the same).
* ``*`` is any run of characters within one segment, ``?`` one character, ``[abc]``,
  ``[a-z]`` and ``[!a]`` are classes (only ``!`` negates; ``^`` is an ordinary character;
  ``-`` first or last is literal), ``{a,b}`` are alternatives (nested braces are fine, at
  most 32 alternatives after full expansion) and ``**`` *as a whole segment* is zero or
  more segments. ``**`` (or ``***`` ...) inside a segment with other characters, e.g.
  ``a**b``, is just ``*``; so is a ``***`` segment.
* There are **no escapes**: ``\\`` is an ordinary character, and ``]`` cannot be put in a
  class (``[]`` is an empty class, an error). ``,`` and ``}`` outside braces are literal.
* Braces are expanded on the whole (normalised) string before it is split into segments,
  so alternatives may hold ``/`` (``{src,lib}/**``). Within an alternative, empty and ``.``
  segments vanish as in normalisation, and an alternative left with no segment is the
  whole tree: ``x/{,a}`` is ``x`` or ``x/a``; ``{a,.}/b`` is ``a/b`` or ``b``; ``{,a}`` is
  ``**``. The trailing-``/`` rule applies to the scope as written, not to alternatives.
* Paths consist of one or more segments; a segment is a non-empty string without ``/``
  that is not ``.`` or ``..`` (those never survive normalisation). Consequently ``[.]``
  matches no path and ``.?`` and ``?.`` do not overlap (their only common string is
  ``..``). Characters are Unicode code points other than ``/``; negated classes are taken
  over exactly that alphabet.
* A plain path names one file: ``src`` does not overlap ``src/x.py``. ``**`` matches zero
  segments, so ``src/**`` also matches ``src``.
* This module handles path globs only; ``task`` scopes are compared as exact strings after
  trimming (PROTOCOL.md 8) by their callers.

Malformed scopes raise :class:`GlobError` (a ``ValueError``; the HTTP layer answers 400):
over 1024 characters, an unclosed ``[`` or ``{``, an empty class ``[]``/``[!]``, a
reversed range ``[z-a]``, a ``..`` segment, or more than 32 alternatives.

Representation
--------------
:func:`compile_scope` returns a :class:`Pattern` whose ``alternatives`` is a tuple (one per
brace alternative, duplicates removed) of tuples of segments. A segment is either the
:data:`DOUBLESTAR` marker or a tuple of tokens: a one-character ``str`` (a literal),
:data:`ANY_RUN` (``*``), :data:`ANY_ONE` (``?``) or a :class:`CharClass`. Everything is
immutable and hashable.

Algorithm and proof sketch
--------------------------
Each alternative is a regular language over *segments*; each segment pattern is a regular
language over *characters*. Overlap of two scopes is: some alternative pair overlaps.

*Segment level.* View alternative ``A = A_0..A_{n-1}`` as an automaton with states
``0..n``: ``**`` at ``i`` is a self-loop on any path segment plus an epsilon edge
``i -> i+1``; a segment pattern at ``i`` is an edge ``i -> i+1`` on the segments it matches.
The product of the automata of ``A`` and ``B`` has states ``(i, j)``; a path is in both
languages iff the product reaches ``(n, m)`` from ``(0, 0)`` reading it. Reading one
segment ``s`` is possible from ``(i, j)``:

* ``(**, **)``: a self-loop, never needed for reachability;
* ``(**, T)``: to ``(i, j+1)`` iff ``T`` matches *some* segment (``T`` is satisfiable);
* ``(S, **)``: to ``(i+1, j)`` iff ``S`` is satisfiable;
* ``(S, T)``: to ``(i+1, j+1)`` iff some segment matches both ``S`` and ``T``.

Since the existential "some segment" is the only thing a transition needs, overlap is
exactly reachability of ``(n, m)`` in this graph: a witness path is assembled from the
witnesses of the edges on a reaching walk, and conversely any common path gives such a
walk. (A path of zero segments is matched only by all-``**`` alternatives, which also share
every one-segment path, so allowing it changes nothing.)

*Character level.* "Some segment matches both ``S`` and ``T``" is the same construction one
level down, over characters: ``*`` is a self-loop plus epsilon, and ``?``/literal/class
tokens are edges labelled by character sets, where two labels are compatible iff their sets
intersect. Sets are exact sorted code-point interval lists (a negated class is stored as its
complement within the alphabet), so every intersection test is exact. Validity of the
segment (non-empty, not ``.``, not ``..``) is a 4-state DFA ``d`` (read nothing, read ``.``,
read ``..``, valid) run in the same product: states ``(i, j, d)``, accept ``(n, m, valid)``.
While ``d`` is not yet *valid* only dots have been read, so at most three characters have
been consumed and the reachable set is tiny; it is explored directly ("phase 1"), and the
states where the DFA turns valid seed a plain ``(i, j)`` reachability ("phase 2"). A walk
in the product spells a string accepted by all three automata and vice versa, so the test
is exact.

*Evaluation.* Reachability is computed row by row with Python integers as bit sets over
``j``: moves within a row (epsilon over a ``*``/``**`` of ``B``, or ``A``'s star reading a
token of ``B``) are closed in one step by the carry trick ``R | (((R & H) + H) ^ H)``
(a carry runs along each block of set bits of ``H`` that ``R`` touches), and moves to the
next row are a mask and a shift. Segment-pair results are memoised (``lru_cache``), as are
compiled scopes and whole pattern-pair answers.

*Complexity.* With ``a`` alternatives, ``s`` segments per alternative and ``t`` tokens per
segment on each side, the work is
``O(alts_a * alts_b * segs_a * segs_b * toks_a * toks_b)`` elementary steps in the worst
case (each segment pair costs ``O(toks_a * toks_b)``), i.e. polynomial; the bit-parallel rows
make it far smaller in practice, and typical pairs (``src/api/**`` vs ``src/api/app.py``) take
microseconds cold and well under one warm.
"""

from __future__ import annotations

import functools
from bisect import bisect_right
from typing import NamedTuple, Union

__all__ = [
    "ANY_ONE",
    "ANY_RUN",
    "DOUBLESTAR",
    "MAX_ALTERNATIVES",
    "MAX_SCOPE_LENGTH",
    "CharClass",
    "GlobError",
    "Pattern",
    "compile_scope",
    "matches",
    "normalise",
    "overlaps",
]

MAX_SCOPE_LENGTH = 1024
"""PROTOCOL.md 8: a scope is at most 1024 characters."""

MAX_ALTERNATIVES = 32
"""PROTOCOL.md 8: brace expansion may give at most 32 alternatives."""

_MAX_CP = 0x10FFFF
_SLASH = 0x2F
_DOT = 0x2E
_UNIVERSE: tuple[tuple[int, int], ...] = ((0, _SLASH - 1), (_SLASH + 1, _MAX_CP))


class GlobError(ValueError):
    """A malformed scope (PROTOCOL.md 8); the HTTP layer answers 400 ``invalid_argument``.

    ``message`` is one human sentence, e.g. "unclosed character class '[' at position 4 of
    'src/[ab'".
    """

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class _Marker:
    """A singleton token; identity-hashed so that token tuples hash fast."""

    __slots__ = ("name", "text")

    def __init__(self, name: str, text: str):
        self.name = name
        self.text = text

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self) -> str:
        return self.name


ANY_RUN = _Marker("ANY_RUN", "*")
"""Token: ``*``, any run of characters within a segment (possibly empty)."""
ANY_ONE = _Marker("ANY_ONE", "?")
"""Token: ``?``, exactly one character."""
DOUBLESTAR = _Marker("DOUBLESTAR", "**")
"""Segment: ``**`` as a whole segment, zero or more path segments."""


class CharClass(NamedTuple):
    """Token: a character class ``[...]`` (PROTOCOL.md 8).

    ``ranges`` are the written characters and ranges as sorted, disjoint, inclusive
    code-point intervals (``/`` removed: it never occurs in a segment); ``negated`` is true
    for ``[!...]``; ``members`` is the set actually matched, as intervals over the alphabet
    (all code points but ``/``), i.e. ``ranges`` or its complement.
    """

    ranges: tuple[tuple[int, int], ...]
    negated: bool
    members: tuple[tuple[int, int], ...]

    def __contains__(self, ch: object) -> bool:  # type: ignore[override]
        return isinstance(ch, str) and len(ch) == 1 and _iv_has(self.members, ord(ch))

    def __repr__(self) -> str:
        body = "".join(chr(lo) if lo == hi else f"{chr(lo)}-{chr(hi)}" for lo, hi in self.ranges)
        return f"CharClass({'[!' if self.negated else '['}{body}])"


Token = Union[str, _Marker, CharClass]
Segment = Union[_Marker, tuple]  # DOUBLESTAR or tuple[Token, ...]
Alternative = tuple  # tuple[Segment, ...]


class Pattern:
    """A compiled scope (PROTOCOL.md 8): immutable and hashable.

    ``scope`` is the normalised text; ``alternatives`` is a tuple of alternatives (brace
    expansion, duplicates removed), each a tuple of segments, each segment :data:`DOUBLESTAR`
    or a tuple of tokens. Equality and hashing use ``alternatives`` only.
    """

    __slots__ = ("scope", "alternatives", "_hash")

    def __init__(self, scope: str, alternatives: tuple):
        object.__setattr__(self, "scope", scope)
        object.__setattr__(self, "alternatives", alternatives)
        object.__setattr__(self, "_hash", hash(alternatives))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("Pattern is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("Pattern is immutable")

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Pattern):
            return NotImplemented
        if self._hash != other._hash:
            return False
        return self.scope == other.scope or self.alternatives == other.alternatives

    def __hash__(self) -> int:
        return self._hash

    def __repr__(self) -> str:
        return f"Pattern({self.scope!r})"

    def __reduce__(self):
        return (compile_scope, (self.scope,))


# --------------------------------------------------------------------------- intervals


def _iv_has(iv: tuple[tuple[int, int], ...], cp: int) -> bool:
    k = bisect_right(iv, (cp, _MAX_CP + 1)) - 1
    return k >= 0 and iv[k][0] <= cp <= iv[k][1]


def _iv_merge(pairs: list[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    out: list[list[int]] = []
    for lo, hi in sorted(pairs):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1][1] = hi
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def _iv_minus_slash(iv: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for lo, hi in iv:
        if lo <= _SLASH <= hi:
            if lo < _SLASH:
                out.append((lo, _SLASH - 1))
            if hi > _SLASH:
                out.append((_SLASH + 1, hi))
        else:
            out.append((lo, hi))
    return tuple(out)


def _iv_complement(iv: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    """Complement within the alphabet (all code points but ``/``)."""
    out: list[tuple[int, int]] = []
    nxt = 0
    for lo, hi in iv:
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= _MAX_CP:
        out.append((nxt, _MAX_CP))
    return _iv_minus_slash(tuple(out))


def _iv_meet(a: tuple[tuple[int, int], ...], b: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        lo = max(a[i][0], b[j][0])
        hi = min(a[i][1], b[j][1])
        if lo <= hi:
            out.append((lo, hi))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def _iv_has_dot(iv: tuple[tuple[int, int], ...]) -> bool:
    return any(lo <= _DOT <= hi for lo, hi in iv)


def _iv_has_non_dot(iv: tuple[tuple[int, int], ...]) -> bool:
    return any(lo != hi or lo != _DOT for lo, hi in iv)


def _token_set(tok: Token) -> tuple[tuple[int, int], ...]:
    """The characters a char-consuming token matches, as intervals."""
    if tok.__class__ is str:
        cp = ord(tok)
        return ((cp, cp),)
    if tok is ANY_ONE:
        return _UNIVERSE
    return tok.members  # CharClass


def _tokens_meet(a: Token, b: Token) -> bool:
    """Do two char-consuming tokens share a character?"""
    ta = a.__class__ is str
    tb = b.__class__ is str
    if ta and tb:
        return a == b
    if a is ANY_ONE:
        return True if tb else bool(_token_set(b))
    if b is ANY_ONE:
        return True if ta else bool(_token_set(a))
    if ta:
        return _iv_has(b.members, ord(a))
    if tb:
        return _iv_has(a.members, ord(b))
    return bool(_iv_meet(a.members, b.members))


# --------------------------------------------------------------------------- parsing

_STAR = object()  # a raw '*' before segment assembly


def _check_type_and_length(scope: object) -> None:
    if not isinstance(scope, str):
        raise GlobError(f"a scope must be a string, not {type(scope).__name__}")
    if len(scope) > MAX_SCOPE_LENGTH:
        raise GlobError(f"scope is {len(scope)} characters long; the limit is {MAX_SCOPE_LENGTH}")


def _normalise_text(scope: str) -> str:
    """String-level normalisation (no syntax validation beyond ``..``)."""
    _check_type_and_length(scope)
    out = _normalise_pass(scope)
    while out != out.strip():  # e.g. "/ x": trimming again after the "/" went; keeps it idempotent
        out = _normalise_pass(out)
    return out


def _normalise_pass(scope: str) -> str:
    s = scope.strip()
    segs: list[str] = []
    pos = 0
    for seg in s.split("/"):
        if seg == "..":
            raise GlobError(f"'..' segments are not allowed (position {pos} of {s!r})")
        if seg and seg != "." and not (seg == "**" and segs and segs[-1] == "**"):
            segs.append(seg)
        pos += len(seg) + 1
    if s.endswith("/") and segs and segs[-1] != "**":
        segs.append("**")
    return "/".join(segs) or "**"


def _parse_class(s: str, start: int) -> tuple[CharClass, int]:
    """Parse ``[...]`` starting at ``s[start] == '['``; return the class and the index after ``]``."""
    i = start + 1
    negated = i < len(s) and s[i] == "!"
    if negated:
        i += 1
    end = s.find("]", i)
    slash = s.find("/", i)
    if end < 0 or (0 <= slash < end):
        raise GlobError(f"unclosed character class '[' at position {start} of {s!r}")
    body = s[i:end]
    if not body:
        raise GlobError(f"empty character class {s[start:end + 1]!r} at position {start} of {s!r}")
    pairs: list[tuple[int, int]] = []
    k = 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo > hi:
                raise GlobError(f"reversed range '{lo}-{hi}' in character class at position {start} of {s!r}")
            pairs.append((ord(lo), ord(hi)))
            k += 3
        else:
            pairs.append((ord(body[k]), ord(body[k])))
            k += 1
    ranges = _iv_minus_slash(_iv_merge(pairs))
    members = _iv_complement(ranges) if negated else ranges
    return CharClass(ranges, negated, members), end + 1


def _expand(s: str) -> list[tuple]:
    """Tokenise ``s`` and expand braces; return alternatives as flat item tuples.

    Items are one-character strings (``/`` included), ``_STAR``, ``ANY_ONE`` or
    :class:`CharClass`. Iterative (no recursion limit on nesting); gives up as soon as the
    count exceeds 32, which is sound because every brace contributes at least one
    alternative, so partial products never exceed the final count.
    """
    n = len(s)
    # A frame is (position of '{', finished alternatives of this brace, enclosing partials).
    stack: list[tuple[int, list[tuple], list[list]]] = []
    cur: list[list] = [[]]  # partial alternatives of the innermost open sequence

    def too_many() -> GlobError:
        return GlobError(f"brace expansion of {s!r} gives more than {MAX_ALTERNATIVES} alternatives")

    i = 0
    while i < n:
        c = s[i]
        item: object
        if c == "[":
            item, i = _parse_class(s, i)
            for alt in cur:
                alt.append(item)
            continue
        if c == "{":
            stack.append((i, [], cur))
            cur = [[]]
        elif c == "," and stack:
            done = stack[-1][1]
            done.extend(tuple(alt) for alt in cur)
            if len(done) > MAX_ALTERNATIVES:
                raise too_many()
            cur = [[]]
        elif c == "}" and stack:
            _, done, outer = stack.pop()
            done.extend(tuple(alt) for alt in cur)
            if len(outer) * len(done) > MAX_ALTERNATIVES:
                raise too_many()
            cur = [list(prefix) + list(alt) for prefix in outer for alt in done]
        else:
            item = _STAR if c == "*" else ANY_ONE if c == "?" else c
            for alt in cur:
                alt.append(item)
        i += 1
    if stack:
        raise GlobError(f"unclosed brace '{{' at position {stack[-1][0]} of {s!r}")
    return [tuple(alt) for alt in cur]


def _assemble(items: tuple, scope: str) -> Alternative:
    """Split one expanded alternative into segments; drop empty and ``.`` segments."""
    raw: list[list] = [[]]
    for it in items:
        if it == "/":
            raw.append([])
        else:
            raw[-1].append(it)
    segs: list[Segment] = []
    for r in raw:
        if not r or r == ["."]:
            continue
        if r == [".", "."]:
            raise GlobError(f"'..' segments are not allowed (an alternative of {scope!r} has one)")
        if len(r) == 2 and r[0] is _STAR and r[1] is _STAR:
            if not (segs and segs[-1] is DOUBLESTAR):
                segs.append(DOUBLESTAR)
            continue
        toks: list[Token] = []
        for it in r:
            if it is _STAR:
                if not (toks and toks[-1] is ANY_RUN):
                    toks.append(ANY_RUN)
            else:
                toks.append(it)
        segs.append(tuple(toks))
    return tuple(segs) if segs else (DOUBLESTAR,)


@functools.lru_cache(maxsize=4096)
def _compile_normalised(text: str) -> Pattern:
    alts: dict[Alternative, None] = {}
    for items in _expand(text):
        alts.setdefault(_assemble(items, text), None)
    return Pattern(text, tuple(alts))


@functools.lru_cache(maxsize=4096)
def _compile_raw(scope: str) -> Pattern:
    return _compile_normalised(_normalise_text(scope))


def normalise(scope: str) -> str:
    """Return the normalised form of ``scope`` (PROTOCOL.md 8), validating its syntax.

    ``"./src//a/./b"`` -> ``"src/a/b"``; ``"src/"`` -> ``"src/**"``; ``""``, ``"."``,
    ``"/"`` -> ``"**"``; ``" /x "`` -> ``"x"``. Braces are kept as written (their expansion is
    checked). Raises :class:`GlobError` for a malformed scope.
    """
    text = _normalise_text(scope)
    _compile_normalised(text)
    return text


#: The characters that make a scope a glob (PROTOCOL.md 8); ``]``, ``!``, ``,`` and ``-`` are
#: literal outside a class or braces.
GLOB_CHARS = frozenset("[*?{}")


def literal(path: str) -> str:
    """The scope that matches exactly the file ``path`` and nothing else: each glob character
    (:data:`GLOB_CHARS`) as a one-character class (``g/[xy].py`` -> ``g/[[]xy].py``,
    ``*.md`` -> ``[*].md``), so a claim taken for an edited file covers that file, not a glob
    its name happens to spell. ``matches(literal(p), q)`` holds exactly when ``p`` and ``q``
    name the same file (tests/test_globs.py checks it against the brute-force oracle)."""
    return "".join(f"[{ch}]" if ch in GLOB_CHARS else ch for ch in path)


def compile_scope(scope: str) -> Pattern:
    """Normalise and parse ``scope`` into an immutable, hashable :class:`Pattern` (PROTOCOL.md 8).

    Cached (``lru_cache``, 4096 entries). Raises :class:`GlobError` for a malformed scope.
    """
    _check_type_and_length(scope)
    return _compile_raw(scope)


# --------------------------------------------------------------------------- overlap


class _SegInfo:
    """Precomputed masks for one segment used as the column side of the char-level product."""

    __slots__ = ("toks", "n", "star", "sets", "ne", "star_mask", "ne_mask", "dmasks", "literal")

    def __init__(self, seg: tuple):
        self.toks = seg
        self.n = len(seg)
        self.star = tuple(t is ANY_RUN for t in seg)
        self.sets = tuple(None if t is ANY_RUN else _token_set(t) for t in seg)
        self.ne = tuple(s is not None and bool(s) for s in self.sets)
        self.star_mask = sum(1 << j for j, st in enumerate(self.star) if st)
        self.ne_mask = sum(1 << j for j, ne in enumerate(self.ne) if ne)
        self.dmasks: dict = {}
        self.literal = all(t.__class__ is str for t in seg)

    def dmask(self, tok: Token) -> int:
        """Bits ``j`` where token ``j`` consumes a character ``tok`` also matches."""
        m = self.dmasks.get(tok)
        if m is None:
            m = 0
            for j, t in enumerate(self.toks):
                if t is not ANY_RUN and _tokens_meet(tok, t):
                    m |= 1 << j
            self.dmasks[tok] = m
        return m


_seg_info = functools.lru_cache(maxsize=8192)(_SegInfo)


def _reach(n, pstar, pne, ptoks, dmask, q_star, q_ne, m, seeds) -> bool:
    """Row-by-row bit-parallel reachability of ``(n, m)`` in a product graph.

    Rows are positions ``i`` in P, bits are positions ``j`` in Q. ``pstar[i]``: P's token is
    a star (``*`` or ``**``); ``pne[i]``: P's token can consume something; ``q_star``/``q_ne``:
    masks of Q's stars / consumable tokens; ``dmask(tok)``: Q positions compatible with P's
    token; ``seeds[i]``: extra start bits in row ``i``.
    """
    carry = 0
    last_seed = max((i for i, s in enumerate(seeds) if s), default=-1)
    for i in range(n + 1):
        cur = carry | seeds[i]
        if not cur:
            if i >= last_seed:
                return False
            continue
        h = (q_star | q_ne) if (i < n and pstar[i]) else q_star
        x = cur & h
        if x:
            cur |= (x + h) ^ h  # close moves j -> j+1 along runs of h
        if i == n:
            return bool((cur >> m) & 1)
        if pstar[i]:
            carry = cur
        elif pne[i]:
            carry = (cur & q_star) | ((cur & dmask(ptoks[i])) << 1)
        else:
            carry = 0
    return False  # pragma: no cover - the loop returns at i == n


def _seg_dp(p: tuple, q: tuple) -> bool:
    """Exact: is there a valid segment (non-empty, not '.'/'..') matching both ``p`` and ``q``?"""
    P = _seg_info(p)
    Q = _seg_info(q)
    n, m = P.n, Q.n
    ps, qs, psets, qsets = P.star, Q.star, P.sets, Q.sets

    def close(states: set) -> set:
        todo = list(states)
        while todo:
            i, j = todo.pop()
            if i < n and ps[i] and (i + 1, j) not in states:
                states.add((i + 1, j))
                todo.append((i + 1, j))
            if j < m and qs[j] and (i, j + 1) not in states:
                states.add((i, j + 1))
                todo.append((i, j + 1))
        return states

    # Phase 1: only dots read so far (d = 0, 1, 2). Collect where the DFA becomes valid.
    seeds = [0] * (n + 1)
    layer = close({(0, 0)})
    for d in range(3):
        nxt: set = set()
        for i, j in layer:
            pi = i < n
            qj = j < m
            moves = []
            if pi and ps[i]:
                if qj and qs[j]:
                    moves.append((i, j, _UNIVERSE))
                elif qj:
                    moves.append((i, j + 1, qsets[j]))
            elif pi:
                if qj and qs[j]:
                    moves.append((i + 1, j, psets[i]))
                elif qj:
                    moves.append((i + 1, j + 1, _iv_meet(psets[i], qsets[j])))
            for i2, j2, x in moves:
                if not x:
                    continue
                if d == 2 or _iv_has_non_dot(x):
                    seeds[i2] |= 1 << j2
                if d < 2 and _iv_has_dot(x):
                    nxt.add((i2, j2))
        if not nxt:
            break
        layer = close(nxt)
    # Phase 2: the DFA is in its absorbing valid state; plain reachability.
    return _reach(n, ps, P.ne, p, Q.dmask, Q.star_mask, Q.ne_mask, m, seeds)


_ONE_STAR = (ANY_RUN,)


@functools.lru_cache(maxsize=8192)
def _seg_sat(p: tuple) -> bool:
    """Does ``p`` match at least one valid segment?"""
    if _seg_info(p).literal:
        return len(p) > 2 or (p != (".",) and p != (".", "."))
    return _seg_dp(p, _ONE_STAR)


@functools.lru_cache(maxsize=65536)
def _seg_overlap(p: tuple, q: tuple) -> bool:
    """Is there a valid segment matching both segment patterns?"""
    if p == q:
        return _seg_sat(p)
    if _seg_info(p).literal and _seg_info(q).literal:
        return False
    return _seg_dp(p, q)


class _AltInfo:
    """Precomputed masks for one alternative used as the column side of the segment product."""

    __slots__ = ("segs", "n", "star", "ne", "star_mask", "ne_mask", "dmasks", "has_ds")

    def __init__(self, alt: tuple):
        self.segs = alt
        self.n = len(alt)
        self.star = tuple(s is DOUBLESTAR for s in alt)
        self.has_ds = any(self.star)
        self.ne = tuple(s is not DOUBLESTAR and _seg_sat(s) for s in alt)
        self.star_mask = sum(1 << j for j, st in enumerate(self.star) if st)
        self.ne_mask = sum(1 << j for j, ne in enumerate(self.ne) if ne)
        self.dmasks: dict = {}

    def dmask(self, seg: tuple) -> int:
        m = self.dmasks.get(seg)
        if m is None:
            m = 0
            for j, t in enumerate(self.segs):
                if t is not DOUBLESTAR and _seg_overlap(seg, t):
                    m |= 1 << j
            self.dmasks[seg] = m
        return m


_alt_info = functools.lru_cache(maxsize=8192)(_AltInfo)


def _alt_overlap(a: tuple, b: tuple) -> bool:
    if a == b:
        A = _alt_info(a)
        return all(A.star[i] or A.ne[i] for i in range(A.n))
    A = _alt_info(a)
    B = _alt_info(b)
    if not A.has_ds and not B.has_ds:
        return A.n == B.n and all(_seg_overlap(s, t) for s, t in zip(a, b))
    seeds = [0] * (A.n + 1)
    seeds[0] = 1
    return _reach(A.n, A.star, A.ne, a, B.dmask, B.star_mask, B.ne_mask, B.n, seeds)


@functools.lru_cache(maxsize=65536)
def _patterns_overlap(pa: Pattern, pb: Pattern) -> bool:
    return any(_alt_overlap(a, b) for a in pa.alternatives for b in pb.alternatives)


def _as_pattern(x: Union[str, Pattern]) -> Pattern:
    return x if isinstance(x, Pattern) else compile_scope(x)


def overlaps(a: Union[str, Pattern], b: Union[str, Pattern]) -> bool:
    """Whether at least one path matches both scopes (PROTOCOL.md 8). Exact and symmetric.

    ``overlaps("src/**", "src/a/b.py")`` is True; ``overlaps("src/*.py", "src/a/b.py")`` is
    False; ``overlaps("src", "src/x.py")`` is False (a plain path names one file). Accepts
    scope strings or compiled :class:`Pattern` objects; raises :class:`GlobError` for a
    malformed scope string.
    """
    return _patterns_overlap(_as_pattern(a), _as_pattern(b))


def matches(pattern: Union[str, Pattern], path: str) -> bool:
    """Whether the concrete ``path`` matches ``pattern`` (PROTOCOL.md 8).

    The path is taken literally (``*`` in a path is just a character) after the same
    whitespace, ``/`` and ``.`` normalisation as a scope; a ``..`` segment, an empty path or
    a path over 1024 characters raises :class:`GlobError`.
    """
    p = _as_pattern(pattern)
    _check_type_and_length(path)
    segs = []
    for seg in path.strip().split("/"):
        if seg == "..":
            raise GlobError(f"'..' segments are not allowed in a path ({path!r})")
        if seg and seg != ".":
            segs.append(tuple(seg))
    if not segs:
        raise GlobError(f"a path needs at least one segment ({path!r})")
    alt = tuple(segs)
    return any(_alt_overlap(a, alt) for a in p.alternatives)


def _clear_caches() -> None:
    """Empty every memo table (benchmarks use this to measure cold performance)."""
    for f in (_compile_raw, _compile_normalised, _seg_info, _seg_sat, _seg_overlap, _alt_info, _patterns_overlap):
        f.cache_clear()
