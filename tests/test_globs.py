"""Claim scopes (PROTOCOL.md 8): normalisation, syntax errors and the exact overlap test.

Three layers: a named table with every example the protocol gives (checked in both
directions, since overlap is symmetric), normalisation and error cases, and a property test
that compares :func:`relaynet.globs.overlaps` and :func:`relaynet.globs.matches` with an
independent brute-force oracle built on :func:`fnmatch.fnmatchcase`.
"""

from __future__ import annotations

import fnmatch
import functools
import itertools
import pickle
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from relaynet.globs import (
    ANY_ONE,
    ANY_RUN,
    DOUBLESTAR,
    CharClass,
    GlobError,
    Pattern,
    compile_scope,
    matches,
    normalise,
    overlaps,
)

# ---------------------------------------------------------------------------- the protocol's examples

OVERLAP_EXAMPLES = [
    # (scope a, scope b, overlap?, the sentence of PROTOCOL.md 8 it checks)
    ("src/**", "src/a/b.py", True, "src/** and src/a/b.py overlap"),
    ("src/*.py", "src/a/b.py", False, "src/*.py and src/a/b.py do not"),
    ("**/test_*.py", "tests/**", True, "**/test_*.py and tests/** overlap (tests/test_x.py)"),
    ("a/*/c", "a/b/*", True, "a/*/c and a/b/* overlap (a/b/c)"),
    ("src/*.go", "src/*.py", False, "src/*.go and src/*.py do not"),
    ("docs/**", "src/**", False, "docs/** and src/** do not"),
    ("src/a*", "src/*.py", True, "src/a* and src/*.py overlap (src/a.py)"),
    ("src/app.py", "src/app.py", True, "a scope is a path too: src/app.py overlaps itself"),
    ("src/app.py", "src/*.py", True, "... and the globs that match it"),
    ("src/app.py", "src/**", True, "... and the globs that match it (**)"),
    ("src/app.py", "src/main.py", False, "... and only those"),
    ("src/app.py", "src/*.go", False, "... not globs that do not match it"),
    ("src", "src/x.py", False, "a plain path names one file: src does not overlap src/x.py"),
    ("src/", "src/x.py", True, "claim src/ for a directory"),
    ("src/**", "src/x.py", True, "claim src/** for a directory"),
    ("src/**", "src", True, "because ** matches zero segments, src/** also matches src itself"),
    ("src/", "src", True, "a trailing / means dir/**, which matches dir itself"),
    ("Src/**", "src/a.py", False, "scopes are case-sensitive"),
    ("", "anything/at/all", True, "an empty scope is the whole tree"),
    (".", "a", True, ". is the whole tree"),
    ("**", "a/b/c", True, "** is the whole tree"),
    ("src/?.py", "src/a.py", True, "? is one character within a segment"),
    ("src/?.py", "src/ab.py", False, "? is exactly one character"),
    ("src/?", "src/a/b", False, "? never matches /"),
    ("src/*", "src/a/b", False, "* stays within one segment"),
    ("src/[abc].py", "src/b.py", True, "[abc] class"),
    ("src/[a-c].py", "src/d.py", False, "[a-z] range class"),
    ("src/[!a].py", "src/a.py", False, "[!a] negated class"),
    ("src/[!a].py", "src/[ab].py", True, "[!a] and [ab] share b"),
    ("{src,lib}/**", "lib/x.py", True, "{a,b} alternatives, which may contain /"),
    ("{src,lib}/**", "docs/x.py", False, "{a,b} alternatives exclude the rest"),
    ("a/**/b", "a/b", True, "** as a whole segment matches zero segments"),
    ("a/**/b", "a/x/y/b", True, "** matches several segments"),
    ("a**b", "a/b", False, "** inside a segment is just *, it does not cross /"),
    ("a**b", "axyb", True, "** inside a segment behaves like *"),
    ("*", "*", True, "a segment * overlaps itself (a common non-empty segment exists)"),
    (".?", "?.", False, "paths have no '..' segment, the only string both match"),
    ("[.]", "**", False, "[.] could only match a '.' segment, which no path has"),
    (".*", "*.", True, "'...' is a valid segment both match"),
    ("[.][.][.]", "*", True, "'...' is a valid segment"),
    ("[.][.]", "*", False, "'..' is not"),
    ("[!ab]", "[!.]", True, "classes range over every character but /, not just the ones named"),
]


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [pytest.param(a, b, e, id=why) for a, b, e, why in OVERLAP_EXAMPLES],
)
def test_protocol_overlap_examples_both_directions(a: str, b: str, expected: bool) -> None:
    assert overlaps(a, b) is expected
    assert overlaps(b, a) is expected
    assert overlaps(compile_scope(a), compile_scope(b)) is expected


MATCH_EXAMPLES = [
    ("src/**", "src/a/b.py", True),
    ("src/**", "src", True),
    ("src/*.py", "src/a/b.py", False),
    ("src/*.py", "src/app.py", True),
    ("**/test_*.py", "tests/test_x.py", True),
    ("**/test_*.py", "test_x.py", True),
    ("a/*/c", "a/b/c", True),
    ("src", "src/x.py", False),
    ("src/", "src/x.py", True),
    ("{src,lib}/*.py", "lib/a.py", True),
    ("src/*", "src/*", True),  # a path is taken literally
    ("src/a*", "src/*", False),
]


@pytest.mark.parametrize(("pattern", "path", "expected"), MATCH_EXAMPLES)
def test_matches_a_concrete_path(pattern: str, path: str, expected: bool) -> None:
    assert matches(pattern, path) is expected


# ---------------------------------------------------------------------------- normalisation

NORMALISATION = [
    ("./src//a/./b", "src/a/b", "drop a leading ./, collapse repeated /, drop . segments"),
    ("src/", "src/**", "a trailing / means dir/**"),
    ("", "**", "an empty scope is the whole tree"),
    (".", "**", ". is the whole tree"),
    ("**", "**", "** is the whole tree"),
    ("/", "**", "a lone / is the whole tree"),
    ("./", "**", "./ is the whole tree"),
    ("/x", "x", "drop a leading /"),
    ("  src/a.py \n", "src/a.py", "trim whitespace"),
    ("a/**/**/b", "a/**/b", "adjacent ** segments mean the same as one"),
    ("src/**/", "src/**", "a trailing / after ** adds nothing"),
    ("{src,lib}/", "{src,lib}/**", "braces are kept; the trailing / still means /**"),
    ("src/ a", "src/ a", "inner whitespace is part of a name"),
    ("/ x", "x", "whitespace exposed by dropping a leading / is trimmed too (idempotence)"),
]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [pytest.param(r, e, id=why) for r, e, why in NORMALISATION],
)
def test_normalisation(raw: str, expected: str) -> None:
    assert normalise(raw) == expected
    assert normalise(expected) == expected  # idempotent
    assert compile_scope(raw) == compile_scope(expected)


ERRORS = [
    ("src/[ab", r"unclosed character class '\[' at position 4", "an unclosed class ["),
    ("src/[a/b]", r"unclosed character class", "a class cannot span a /"),
    ("src/{a,b", r"unclosed brace '\{' at position 4", "an unclosed brace {"),
    ("{a,{b,c}", r"unclosed brace", "an unclosed outer brace"),
    ("a/../b", r"'\.\.' segments are not allowed", ".. segments are 400"),
    ("..", r"'\.\.' segments are not allowed", "a bare .."),
    ("{..,a}/b", r"'\.\.' segments are not allowed", ".. produced by brace expansion"),
    ("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}", r"more than 32 alternatives", "64 alternatives"),
    ("{" + ",".join("abcdefghijklmnopqrstuvwxyzABCDEFG") + "}", r"more than 32 alternatives", "33 alternatives"),
    ("a" * 1025, r"1025 characters long; the limit is 1024", "over 1024 characters"),
    ("src/[].py", r"empty character class '\[\]'", "an empty class []"),
    ("src/[!].py", r"empty character class '\[!\]'", "an empty negated class [!]"),
    ("src/[z-a]", r"reversed range 'z-a'", "a reversed range"),
]


@pytest.mark.parametrize(
    ("raw", "message"),
    [pytest.param(r, m, id=why) for r, m, why in ERRORS],
)
def test_malformed_scopes_are_errors_with_a_useful_message(raw: str, message: str) -> None:
    for call in (normalise, compile_scope, lambda s: overlaps(s, "x"), lambda s: overlaps("x", s)):
        with pytest.raises(GlobError) as info:
            call(raw)
        assert re.search(message, info.value.message), info.value.message
        assert isinstance(info.value, ValueError)
        assert str(info.value) == info.value.message


def test_limits_are_inclusive() -> None:
    assert normalise("a" * 1024) == "a" * 1024
    thirty_two = "{a,b}{c,d}{e,f}{g,h}{i,j}"
    assert len(compile_scope(thirty_two).alternatives) == 32


def test_non_string_scope_is_an_error() -> None:
    with pytest.raises(GlobError, match="must be a string"):
        compile_scope(42)  # type: ignore[arg-type]


def test_matches_rejects_bad_paths() -> None:
    for bad in ("", "a/../b", "./"):
        with pytest.raises(GlobError):
            matches("**", bad)


# ---------------------------------------------------------------------------- representation


def test_compiled_representation_has_the_documented_shape() -> None:
    p = compile_scope("{src,lib}/a*[!x]?/**")
    assert isinstance(p, Pattern)
    assert p.scope == "{src,lib}/a*[!x]?/**"
    assert len(p.alternatives) == 2
    src = p.alternatives[0]
    assert src[0] == ("s", "r", "c")
    assert src[1][:2] == ("a", ANY_RUN)
    cls = src[1][2]
    assert isinstance(cls, CharClass) and cls.negated and cls.ranges == ((ord("x"), ord("x")),)
    assert "y" in cls and "x" not in cls
    assert src[1][3] is ANY_ONE
    assert src[2] is DOUBLESTAR
    assert hash(p) == hash(compile_scope("{src,lib}/a*[!x]?/**/"))
    with pytest.raises(AttributeError):
        p.scope = "x"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(p)) == p


def test_empty_alternatives_vanish_and_the_trailing_slash_rule_is_for_the_whole_scope() -> None:
    assert not overlaps("x/{,a}", "x/b")  # x or x/a, not x/**
    assert overlaps("x/{,a}", "x") and overlaps("x/{,a}", "x/a")
    assert overlaps("{,a}", "b/c")  # an empty alternative is the whole tree
    assert overlaps("{a,b}/", "b/c")


def test_braces_expand_before_splitting_and_nest() -> None:
    p = compile_scope("{a/{b,c},d}/e")
    assert [tuple("".join(s) if s is not DOUBLESTAR else "**" for s in alt) for alt in p.alternatives] == [
        ("a", "b", "e"),
        ("a", "c", "e"),
        ("d", "e"),
    ]


def test_no_escapes_backslash_is_an_ordinary_character() -> None:
    assert matches("a\\*", "a\\xyz")
    assert not matches("a\\*", "a*")  # the * is still a wildcard, and needs the backslash


def test_negated_classes_are_exact_over_unicode() -> None:
    assert not overlaps("[!\x00-\U0010ffff]", "**")
    assert overlaps("[!a]", "[!b]")
    assert not overlaps("[!\x00-\uffff]", "[!\U00010000-\U0010ffff]")
    assert overlaps("[.-0]", "0") and not overlaps("[.-0]", "[!.0]")


# ---------------------------------------------------------------------------- the brute-force oracle

ALPHABET = "ab.c"  # c stands for every character no generated pattern names
MAX_SEGMENT_CHARS = 2  # char-consuming tokens per generated segment
SEGMENT_LENGTH = 2 * MAX_SEGMENT_CHARS + 1
SEGMENTS = [
    "".join(t)
    for n in range(1, SEGMENT_LENGTH + 1)
    for t in itertools.product(ALPHABET, repeat=n)
    if "".join(t) not in (".", "..")
]

ATOMS = [
    "a", "b", ".", "*", "?", "[ab]", "[!a]", "[a-b]", "[!.]", "[!ab]", "[.]", "[!b.]",
    "{a,b}", "{a,.}", "{*,b}", "{,a}", "{a/b,b}", "{[ab],?}",
]  # fmt: skip


class _OracleError(Exception):
    pass


def oracle_expand(pattern: str) -> list[str]:
    """Brace expansion by repeated rewriting of an innermost ``{...}`` (the generated classes
    hold no braces or commas, so no class awareness is needed)."""
    done, todo = [], [pattern]
    while todo:
        s = todo.pop()
        m = re.search(r"\{([^{}]*)\}", s)
        if m is None:
            done.append(s)
            continue
        todo.extend(s[: m.start()] + alt + s[m.end() :] for alt in m.group(1).split(","))
    if len(done) > 32:
        raise _OracleError("too many alternatives")
    return done


def oracle_alternatives(pattern: str) -> list[list[str]]:
    """The alternatives as lists of segments (``**`` for doublestar): a trailing ``/`` of the
    trimmed scope means ``/**``; then expand braces; then in each alternative empty and
    ``.`` segments vanish, and one with no segment left is the whole tree."""
    pattern = pattern.strip()
    if pattern.endswith("/"):
        pattern += "**"
    out = []
    for alt in oracle_expand(pattern):
        segs = [s for s in alt.split("/") if s not in ("", ".")]
        if ".." in segs:
            raise _OracleError("..")
        out.append(segs or ["**"])
    return out


def oracle_seq_match(psegs: list[str], path: tuple[str, ...]) -> bool:
    if not psegs:
        return not path
    if psegs[0] == "**":
        return any(oracle_seq_match(psegs[1:], path[k:]) for k in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], psegs[0]) and oracle_seq_match(psegs[1:], path[1:])


@functools.lru_cache(maxsize=None)
def segment_language(seg: str) -> int:
    """Bit set of the enumerated segments a segment pattern matches (``**``: all of them)."""
    return sum(1 << k for k, s in enumerate(SEGMENTS) if seg == "**" or fnmatch.fnmatchcase(s, seg))


def layouts(psegs: list[str], k: int):
    """Every way to spread the alternative over exactly ``k`` path segments: each ``**``
    becomes a run of ``**`` placeholders (each matching any one segment)."""
    stars = [i for i, s in enumerate(psegs) if s == "**"]
    fixed = len(psegs) - len(stars)
    free = k - fixed
    if free < 0 or (free > 0 and not stars):
        return
    for split in itertools.product(range(free + 1), repeat=len(stars)):
        if sum(split) != free:
            continue
        runs = dict(zip(stars, split))
        yield [s for i, seg in enumerate(psegs) for s in ([seg] if seg != "**" else ["**"] * runs[i])]


def chars(seg: str) -> int:
    return sum(1 for c in re.sub(r"\[[^\]]*\]", "?", seg) if c != "*")


def oracle_overlap(a: list[list[str]], b: list[list[str]]) -> bool:
    """Is there a path of non-empty segments (not '.'/'..') over ALPHABET, at most
    ``max(1, fixed(A) + fixed(B))`` segments deep and at most SEGMENT_LENGTH characters per
    segment, matching an alternative of ``a`` and one of ``b``? Positions are independent once
    both alternatives are laid out over the same ``k`` segments, so a layout pair overlaps iff
    at every position some enumerated segment matches both."""
    for x in a:
        for y in b:
            fx = sum(1 for s in x if s != "**")
            fy = sum(1 for s in y if s != "**")
            for sx in x:
                for sy in y:
                    assert chars(sx) + chars(sy) + 1 <= SEGMENT_LENGTH  # the bound below holds
            for k in range(1, max(1, fx + fy) + 1):
                for lx in layouts(x, k):
                    for ly in layouts(y, k):
                        if all(segment_language(p) & segment_language(q) for p, q in zip(lx, ly)):
                            return True
    return False


_LITERALS = ["a", "b", "a", "b", "."]
_atoms_segment = st.lists(st.sampled_from(_LITERALS + ATOMS), min_size=1, max_size=MAX_SEGMENT_CHARS).map("".join)
segment_spec = st.sampled_from([False] * 4 + [True]).flatmap(lambda ds: st.just("**") if ds else _atoms_segment)
patterns = st.builds(
    lambda lead, segs, seps, trail: lead + segs[0] + "".join(sep + s for sep, s in zip(seps, segs[1:])) + trail,
    st.sampled_from(["", "", "./", "/", " "]),
    st.lists(segment_spec, min_size=1, max_size=3),
    st.lists(st.sampled_from(["/", "/", "/", "//", "/./"]), min_size=2, max_size=2),
    st.sampled_from(["", "", "/", " "]),
)


def compiled_or_oracle_error(pattern: str):
    """(compiled Pattern, oracle alternatives), or (None, None) once both agree it is malformed."""
    try:
        expected = oracle_alternatives(pattern)
    except _OracleError:
        expected = None
    try:
        compiled = compile_scope(pattern)
    except GlobError:
        compiled = None
    assert (compiled is None) == (expected is None), pattern
    return compiled, expected


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns, patterns)
def test_overlap_agrees_with_the_brute_force_oracle(a: str, b: str) -> None:
    """``overlaps`` equals a bounded brute force, and the bound is enough.

    The oracle only looks at paths of at most ``max(1, fixed(A) + fixed(B))`` segments
    (``fixed`` = segments other than ``**``) of at most SEGMENT_LENGTH = 5 characters over
    ``ab.c``. Why no witness is missed, given a common path of one alternative of each side:

    * Depth: fix the two matchings of the path. A path segment matched by ``**`` on both
      sides can be deleted and both still match; every other segment is matched by a fixed
      segment of A or of B, and each fixed segment matches exactly one path segment. So a
      witness exists with at most ``fixed(A) + fixed(B)`` segments (at least one: two
      all-``**`` alternatives share every one-segment path).
    * Length: in one segment, fix the two matchings of its string. A character matched by
      ``*`` on both sides can be deleted; every other character is consumed by a
      char token (literal, ``?``, class) of one side, so at most ``c(p) + c(q) <= 4``
      characters remain. If that leaves ``''``, ``.`` or ``..`` (not valid names), put back
      one star-star character as ``a``: at most 5. Generated segments have at most
      MAX_SEGMENT_CHARS = 2 char tokens (asserted in the oracle).
    * Alphabet: the generated patterns name only ``a``, ``b`` and ``.``, so replacing every
      other character of a witness by ``c`` keeps it in every token's character set and keeps
      dots and non-dots apart: the witness stays a witness over ``ab.c``.

    Hence "no witness within the bound" really means "no overlap", and the assertion is
    exact equality, over every generated pair.
    """
    pa, xa = compiled_or_oracle_error(a)
    pb, xb = compiled_or_oracle_error(b)
    if pa is None or pb is None:
        return
    expected = oracle_overlap(xa, xb)
    assert overlaps(pa, pb) is expected, (a, b)
    assert overlaps(b, a) is expected, (b, a)


paths = st.lists(st.sampled_from([s for s in SEGMENTS if len(s) <= 3]), min_size=1, max_size=4).map("/".join)


@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(patterns, paths)
def test_matches_agrees_with_fnmatch_and_a_path_is_a_scope(pattern: str, path: str) -> None:
    """``matches`` equals fnmatch applied segment by segment (``**`` = zero or more segments),
    and, since a scope is a path too, ``matches(p, path) == overlaps(p, path)``."""
    compiled, alternatives = compiled_or_oracle_error(pattern)
    if compiled is None:
        return
    segs = tuple(path.split("/"))
    expected = any(oracle_seq_match(alt, segs) for alt in alternatives)
    assert matches(compiled, path) is expected, (pattern, path)
    assert overlaps(compiled, path) is expected, (pattern, path)


@settings(max_examples=500, deadline=None)
@given(patterns)
def test_normalise_is_idempotent_and_a_pattern_overlaps_itself_iff_it_matches_something(pattern: str) -> None:
    compiled, alternatives = compiled_or_oracle_error(pattern)
    if compiled is None:
        return
    n = normalise(pattern)
    assert normalise(n) == n
    assert compile_scope(n) == compiled
    assert overlaps(compiled, compiled) is overlaps(compiled, "**") is oracle_overlap(alternatives, [["**"]])


@settings(max_examples=1000, deadline=None)
@given(st.text(st.sampled_from(list("ab./*?[]!-{},\\ ^\x00\U0010ffff")), max_size=30), patterns)
def test_arbitrary_text_is_either_a_glob_error_or_a_well_behaved_scope(text: str, other: str) -> None:
    try:
        compiled = compile_scope(text)
    except GlobError as e:
        assert e.message
        return
    n = normalise(text)
    assert normalise(n) == n and compile_scope(n) == compiled
    try:
        o = compile_scope(other)
    except GlobError:
        return
    assert overlaps(compiled, o) is overlaps(o, compiled)


file_names = st.lists(st.text(alphabet="ab[]*?{},!-x.", min_size=1, max_size=6).filter(lambda s: s not in (".", "..")),
                      min_size=1, max_size=3).map("/".join)


@settings(max_examples=2000, deadline=None)
@given(file_names, file_names)
def test_the_literal_scope_of_a_file_matches_that_file_and_only_it(path: str, other: str) -> None:
    """``literal(path)`` (what ``relaynet hook`` claims for an edited file) matches ``path`` and
    any other file only if it is the same file, glob characters in the names included."""
    from relaynet.globs import literal

    scope = literal(path)
    assert matches(scope, path), (scope, path)
    assert matches(scope, other) is (other == path), (scope, other)
    assert overlaps(scope, literal(other)) is (other == path)
    assert overlaps(scope, "**")
