"""Finding a headless-capable Chromium for the report's browser tests (a plain module: import it)."""

from __future__ import annotations

import shutil


def chromium_path() -> str | None:
    """The first Chromium-family browser on PATH (.ci/run installs Debian's chromium), or None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None
