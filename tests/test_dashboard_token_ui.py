"""A tab opened without the token can enter it (issue 20, item 2), in headless Chromium.

The page is opened without ``?token=`` (a bookmark, a new window): it views, and
its first control is refused for want of the token; the page then asks for it in
the header's form, keeps it in sessionStorage and sends the control again. A
wrong token is asked again; Cancel leaves the control refused and nothing written.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from stepscope.testing import SyntheticJob, write_synthetic_job
from ui_pages import new_page, serving

pytestmark = pytest.mark.process
WAIT_MS = 30_000


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Path, str, str]]:
    """(root, base URL without the token, token) of a server over one running job."""
    store = write_synthetic_job(str(tmp_path / "live"), SyntheticJob(name="live", hours=0.01))
    store.write_json("job.json", store.read_json("job.json") | {"status": "Running",
                                                                  "end_time": None})  # fmt: skip
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})
    with serving(tmp_path) as url:
        base, token = url.split("/?token=")
        yield tmp_path, base, token


def requests(root: Path, kind: str) -> list[Path]:
    return sorted((root / "live" / "control").glob(f"{kind}-*.json"))


def open_job(browser: Any, base: str) -> Any:
    page, errors = new_page(browser)
    page.on("dialog", lambda d: d.accept())
    page.goto(f"{base}/#/job/live")  # no ?token=: a bookmark
    page.wait_for_selector("#interval-apply", state="visible", timeout=WAIT_MS)
    page.errors = errors
    return page


def test_a_tab_without_the_token_asks_for_it_and_sends_the_control_again(
    browser: Any, served: tuple[Path, str, str]
) -> None:
    root, base, token = served
    page = open_job(browser, base)
    assert page.evaluate("sessionStorage.getItem('stepscope-token')") is None
    page.select_option("#interval", "1000")
    page.click("#interval-apply")
    page.wait_for_selector("#token-form", state="visible", timeout=WAIT_MS)
    assert "X-Stepscope-Token" in page.text_content("#token-why")
    assert requests(root, "config") == []

    page.fill("#token-input", "w" * len(token))  # a wrong one is refused and asked again
    page.click("#token-form button[type=submit]")
    # a selector, not wait_for_function: the page's CSP forbids the eval that polling uses
    page.wait_for_selector("#token-why:has-text('Wrong token')", timeout=WAIT_MS)
    assert page.is_visible("#token-form")
    page.fill("#token-input", token)
    page.click("#token-form button[type=submit]")
    page.wait_for_selector("#interval-status[data-request]", timeout=WAIT_MS)
    assert page.is_hidden("#token-form")
    assert len(requests(root, "config")) == 1
    assert page.evaluate("sessionStorage.getItem('stepscope-token')") == token

    page.click("#stop")  # the token is kept: the next control is not asked again
    page.wait_for_selector("#stop-status[data-request]", timeout=WAIT_MS)
    assert page.is_hidden("#token-form")
    assert len(requests(root, "stop")) == 1
    assert page.errors == []


def test_cancel_leaves_the_control_refused(browser: Any, served: tuple[Path, str, str]) -> None:
    root, base, _ = served
    page = open_job(browser, base)
    page.select_option("#interval", "1000")  # Apply without a change sends nothing
    page.click("#interval-apply")
    page.wait_for_selector("#token-form", state="visible", timeout=WAIT_MS)
    page.click("#token-cancel")
    page.wait_for_selector('#interval-status[data-state="error"]', timeout=WAIT_MS)
    assert page.text_content("#interval-status").startswith("refused:")
    assert page.is_hidden("#token-form")
    assert requests(root, "config") == []
    assert page.errors == []
