"""Throughput of the claim-scope overlap test (PROTOCOL.md 8), cold and warm.

Run: ``.venv/bin/python benchmarks/bench_globs.py [--seconds 0.5]``. Not a test.

*cold*: every memo table is emptied before each check, so the figure includes parsing
both scopes and the full dynamic program. *warm*: the same pair again with the caches
filled (what a hub sees when the same claims are checked repeatedly). *compiled*: warm,
with pre-compiled :class:`~relaynet.globs.Pattern` objects (no string cache look-up).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "shared"))

from relaynet import globs  # noqa: E402

PAIRS = [
    ("plain path vs plain path", "src/api/handlers.py", "src/api/handlers.py"),
    ("plain path vs other path", "src/api/handlers.py", "src/api/models.py"),
    ("src/api/** vs path", "src/api/**", "src/api/handlers.py"),
    ("src/api/** vs docs/**", "src/api/**", "docs/**"),
    ("**/test_*.py vs tests/**", "**/test_*.py", "tests/**"),
    ("a/*/c vs a/b/*", "a/*/c", "a/b/*"),
    ("src/*.go vs src/*.py", "src/*.go", "src/*.py"),
    ("braces vs braces", "{src,lib}/{api,core}/*.{py,pyi}", "{lib,tests}/{core,util}/[a-m]*.py"),
    ("braces vs ** glob", "{src,lib,tests,docs}/**/*.{md,rst,txt}", "**/README.{md,txt}"),
    ("32 alternatives vs path", "{a,b}/{c,d}/{e,f}/{g,h}/{i,j}/*.py", "b/d/f/h/j/x.py"),
]

WORST = [
    (
        "1024-char scopes, 32 alternatives x ~500 segments",
        "{a,b}{c,d}{e,f}{g,h}{i,j}/" + "/".join(["*"] * 500)[:995],
        "{k,l}{m,n}{o,p}{q,r}{s,t}/" + "/".join(["**", "x*y"] * 300)[:995],
    ),
    (
        "1024-char scopes, 32 alternatives x one ~1000-token segment",
        "{a,b}{c,d}{e,f}{g,h}{i,j}" + ("*a" * 500)[:995],
        "{k,l}{m,n}{o,p}{q,r}{s,t}" + ("a*" * 500)[:995],
    ),
]


def rate(fn, seconds: float) -> tuple[float, int]:
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(50):
            fn()
        n += 50
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    args = ap.parse_args()

    print(f"Python {sys.version.split()[0]}; overlap checks per second ({args.seconds:g} s per figure)")
    print(f"{'pair':<36}{'result':>7}{'cold/s':>12}{'warm/s':>13}{'compiled/s':>13}")
    for label, a, b in PAIRS:
        result = globs.overlaps(a, b)

        def cold(a=a, b=b):
            globs._clear_caches()
            globs.overlaps(a, b)

        cold_rate, _ = rate(cold, args.seconds)
        globs.overlaps(a, b)
        pa, pb = globs.compile_scope(a), globs.compile_scope(b)
        warm_rate, _ = rate(lambda: globs.overlaps(a, b), args.seconds)
        compiled_rate, _ = rate(lambda: globs.overlaps(pa, pb), args.seconds)
        print(f"{label:<36}{str(result):>7}{cold_rate:>12,.0f}{warm_rate:>13,.0f}{compiled_rate:>13,.0f}")

    print("adversarial worst cases (one cold check each):")
    for label, a, b in WORST:
        globs._clear_caches()
        start = time.perf_counter()
        result = globs.overlaps(a, b)
        took = time.perf_counter() - start
        print(f"  {label}: {result}, {took * 1000:.1f} ms")


if __name__ == "__main__":
    main()
