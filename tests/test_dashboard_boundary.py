"""The served folder is the boundary (issue 20, item 8).

A job folder, or anything in it, that resolves outside the folder given to
``stepscope ui`` is neither listed nor served unless ``follow_links`` is set; a
control body over the limit is refused before it is read in full, whether its
``Content-Length`` announces it or it comes in chunks.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from stepscope.dashboard import create_app
from stepscope.testing import SyntheticJob, write_synthetic_job

TOKEN = "t0ken-for-the-tests-0123456789"
LOCAL = "http://127.0.0.1:8765"
GOOD = {"X-Stepscope-Token": TOKEN}


def running_job(folder: Path, name: str) -> None:
    store = write_synthetic_job(str(folder), SyntheticJob(name=name, hours=0.01))
    store.write_json("job.json", store.read_json("job.json") | {"status": "Running",
                                                                  "end_time": None})  # fmt: skip
    store.write_json("heartbeat/node-a.json", {"time": time.time() + 3600, "pid": 1})


@pytest.fixture
def served(tmp_path: Path) -> Path:
    """``served/`` with a job inside, a link to a job outside, and a job whose control/ leaks."""
    served, outside = tmp_path / "served", tmp_path / "outside"
    running_job(served / "inside", "inside")
    running_job(outside / "elsewhere", "elsewhere")
    os.symlink(outside / "elsewhere", served / "linked")
    os.symlink(served / "inside", served / "alias")  # a link that stays inside is fine
    running_job(served / "leaky", "leaky")
    (outside / "drop").mkdir()
    os.symlink(outside / "drop", served / "leaky" / "control")
    return served


def client_for(root: Path, **kwargs: Any) -> Iterator[TestClient]:
    before = set(threading.enumerate())
    with TestClient(create_app(str(root), "127.0.0.1", TOKEN, **kwargs), base_url=LOCAL) as c:
        yield c
    for t in set(threading.enumerate()) - before:  # AnyIO's idle workers end with the loop
        t.join(timeout=10)


@pytest.fixture
def client(served: Path) -> Iterator[TestClient]:
    yield from client_for(served)


def test_a_job_folder_linked_from_outside_is_neither_listed_nor_served(
    client: TestClient, served: Path, tmp_path: Path
) -> None:
    names = {j["name"] for j in client.get("/api/jobs").json()["jobs"]}
    assert names == {"inside", "alias"}
    for path in ("", "/rules", "/steps", "/system?node=node-a", "/report.html"):
        r = client.get(f"/api/jobs/linked{path}")
        assert r.status_code == 404, path
        assert "outside the served folder" in r.json()["error"]
    assert client.get("/api/jobs/inside").status_code == 200
    assert client.get("/api/jobs/alias").status_code == 200
    r = client.post("/api/jobs/linked/stop", json={}, headers=GOOD)
    assert r.status_code == 404
    assert not (tmp_path / "outside" / "elsewhere" / "control").exists()


def test_a_link_inside_a_job_that_leads_outside_refuses_the_job(
    client: TestClient, tmp_path: Path
) -> None:
    r = client.post("/api/jobs/leaky/stop", json={}, headers=GOOD)
    assert r.status_code == 404 and "outside the served folder" in r.json()["error"]
    assert list((tmp_path / "outside" / "drop").iterdir()) == []  # nothing written there
    assert client.post("/api/jobs/inside/stop", json={}, headers=GOOD).status_code == 202


def test_follow_links_serves_them_on_request(served: Path, tmp_path: Path) -> None:
    for c in client_for(served, follow_links=True):
        names = {j["name"] for j in c.get("/api/jobs").json()["jobs"]}
        assert names == {"inside", "alias", "linked", "leaky"}
        assert c.get("/api/jobs/linked").status_code == 200
        assert c.post("/api/jobs/leaky/stop", json={}, headers=GOOD).status_code == 202
    assert len(list((tmp_path / "outside" / "drop").glob("stop-*.json"))) == 1


# -- bodies over the limit -------------------------------------------------------------
CHUNK = 16 * 1024
CHUNKS = 100  # 1.6 MB, 25 times the limit


def post_raw(root: Path, headers: list[tuple[bytes, bytes]]) -> tuple[int, int]:
    """POST a stop in CHUNKS chunks straight through ASGI: (status, chunks the app read)."""
    app = create_app(str(root), "127.0.0.1", TOKEN)
    read, statuses = 0, []

    async def receive() -> dict[str, object]:
        nonlocal read
        if read < CHUNKS:
            read += 1
            return {"type": "http.request", "body": b" " * CHUNK, "more_body": read < CHUNKS}
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/api/jobs/inside/stop", "raw_path": b"/api/jobs/inside/stop",
        "root_path": "", "query_string": b"", "server": ("127.0.0.1", 8765),
        "client": ("127.0.0.1", 40000),
        "headers": [(b"host", b"127.0.0.1:8765"), (b"content-type", b"application/json"),
                    (b"x-stepscope-token", TOKEN.encode()), *headers],
    }  # fmt: skip
    asyncio.run(app(scope, receive, send))  # type: ignore[arg-type]
    return statuses[0], read


def test_a_body_announced_over_the_limit_is_refused_unread(served: Path) -> None:
    status, read = post_raw(served, [(b"content-length", str(CHUNK * CHUNKS).encode())])
    assert status == 413
    assert read == 0


def test_a_chunked_body_over_the_limit_is_refused_once_it_passes_it(served: Path) -> None:
    status, read = post_raw(served, [(b"transfer-encoding", b"chunked")])
    assert status == 413
    assert read <= 64_000 // CHUNK + 1  # stopped at the limit, not at the end (100)
