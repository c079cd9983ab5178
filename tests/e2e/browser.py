"""Headless Chromium for the page tests and the README screenshots: Debian's ``chromium``
package (``/usr/bin/chromium``, installed by ``make test``'s set-up) driven by Playwright for
Python. Playwright's own browser downloads are never used."""

from __future__ import annotations

import os
import shutil

CHROMIUM = os.environ.get("RELAYNET_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "playwright is not installed (pip install -e '.[test]')"
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)) and not shutil.which(CHROMIUM):
        return f"no Chromium at {CHROMIUM} (make test installs Debian's chromium with apt-get; it could not here)"
    return None


def launch(playwright):
    """A headless Chromium browser from ``playwright.chromium`` (close it when done)."""
    return playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
