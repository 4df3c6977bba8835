"""What the UI tests share: a real `stepscope ui` over a folder, and a Chromium page
that keeps the errors its scripts throw (a test ends asserting there were none)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from conftest import BIN, env_for_tests


@contextmanager
def serving(root: Path, *args: str) -> Iterator[str]:
    """The base URL (with its token) of a real `stepscope ui` over ``root`` on an
    ephemeral port, given ``args`` besides; the server ends with the block."""
    ui = subprocess.Popen([str(BIN / "stepscope"), "ui", str(root), "--port", "0", *args],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                          env=env_for_tests())  # fmt: skip
    try:
        assert ui.stdout is not None
        line = ui.stdout.readline()
        assert "serving" in line, line
        yield line.split(" at ", 1)[1].strip()
    finally:
        ui.terminate()
        ui.communicate(timeout=30)


def new_page(
    browser: Any, width: int | None = None, height: int = 900, init_script: str | None = None
) -> tuple[Any, list[str]]:
    """A page of ``browser`` (``width`` x ``height``; None: Playwright's viewport) and
    the list its script errors are added to; ``init_script`` runs before the page's."""
    page = browser.new_page(**({"viewport": {"width": width, "height": height}} if width else {}))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    if init_script is not None:
        page.add_init_script(init_script)
    return page, errors
