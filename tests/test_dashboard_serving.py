"""Serving beyond loopback (issue 20, item 2): the names answered to, TLS, clear errors.

The full path from another machine is tests/test_dashboard_network.py (two network
namespaces); here the names a server answers to, the CLI's checks of its TLS files
and ``--allow-host`` values, and a real HTTPS server.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest
from starlette.testclient import TestClient

from conftest import BIN, env_for_tests
from stepscope.dashboard import check_name, create_app
from stepscope.dashboard._hosts import served_names
from stepscope.testing import SyntheticJob, write_synthetic_job

TOKEN = "t0ken-for-the-tests-0123456789"
GOOD = {"X-Stepscope-Token": TOKEN}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    write_synthetic_job(str(tmp_path / "runs" / "done"), SyntheticJob(name="done", hours=0.01))
    return tmp_path / "runs"


def get(app: object, base: str, path: str, **headers: str) -> tuple[int, str]:
    before = set(threading.enumerate())
    with TestClient(app, base_url=base) as c:  # type: ignore[arg-type]
        r = c.get(path, headers=headers)
    for t in set(threading.enumerate()) - before:
        t.join(timeout=10)
    return r.status_code, r.text


def test_all_interfaces_answer_to_the_machine_names_and_addresses(root: Path) -> None:
    names = served_names("0.0.0.0")
    assert {socket.gethostname().lower(), "localhost", "127.0.0.1", "::1"} <= set(names)
    found = {a.address for addrs in psutil.net_if_addrs().values() for a in addrs
             if a.family == socket.AF_INET}  # fmt: skip
    assert found <= set(names)
    app = create_app(str(root), "0.0.0.0", TOKEN)
    for name in (socket.gethostname(), *sorted(found)):
        assert get(app, f"http://{name}:8765", "/api/jobs", **GOOD)[0] == 200, name
    assert get(app, "http://[::1]:8765", "/api/jobs", **GOOD)[0] == 200
    status, text = get(app, "http://evil.example:8765", "/api/jobs", **GOOD)
    assert status == 403 and "--allow-host" in text


def test_one_address_answers_to_itself_and_the_names_allowed(root: Path) -> None:
    names = served_names("192.0.2.7", ("Dash.Example", "[2001:db8::7]"))
    assert names == ("192.0.2.7", "2001:db8::7", "dash.example")
    app = create_app(str(root), "192.0.2.7", TOKEN, extra_hosts=("dash.example",))
    assert get(app, "http://dash.example:8765", "/api/jobs", **GOOD)[0] == 200
    assert get(app, f"http://{socket.gethostname()}:8765", "/api/jobs", **GOOD)[0] == 403


@pytest.mark.parametrize("bad", ["http://dash.example", "dash.example:8765", "a b", "", "x/y"])
def test_allow_host_takes_names_and_addresses_only(bad: str) -> None:
    with pytest.raises(ValueError, match="--allow-host"):
        check_name(bad)
    assert check_name("[2001:DB8::7]") == "2001:db8::7"
    assert check_name("Dash.Example") == "dash.example"


def ui(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "stepscope"), "ui", str(root), "--port", "0", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env_for_tests())


@pytest.mark.process
def test_bad_tls_files_and_names_are_clear_errors(root: Path, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    cases = [
        (["--certfile", str(tmp_path / "nope.pem")], "--certfile", "no such file"),
        (["--keyfile", str(junk)], "--keyfile needs --certfile", ""),
        (["--certfile", str(junk)], "not a PEM certificate", "openssl req -x509"),
        (["--certfile", str(tmp_path)], "not a PEM certificate", ""),
        (["--allow-host", "http://dash.example"], "is not a host name", ""),
    ]
    for args, said, fix in cases:
        p = ui(root, *args)
        assert p.returncode == 2, (args, p.stderr)
        assert said in p.stderr and fix in p.stderr, p.stderr
        assert "Traceback" not in p.stderr


@pytest.fixture
def cert(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    key, crt = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
         "-nodes", "-keyout", str(key), "-out", str(crt), "-days", "1", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    yield crt, key


@pytest.mark.process
def test_tls_serves_https_with_a_secure_cookie(
    root: Path, tmp_path: Path, cert: tuple[Path, Path]
) -> None:
    (tmp_path / "elsewhere").mkdir()
    write_synthetic_job(str(tmp_path / "elsewhere" / "far"), SyntheticJob(name="far", hours=0.01))
    os.symlink(tmp_path / "elsewhere" / "far", root / "far")
    cmd = [str(BIN / "stepscope"), "ui", str(root), "--port", "0", "--certfile", str(cert[0]),
           "--keyfile", str(cert[1]), "--follow-symlinks"]  # fmt: skip
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env_for_tests())  # fmt: skip
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split(" at ", 1)[1].strip()
        assert url.startswith("https://127.0.0.1:"), url
        trust = ssl.create_default_context(cafile=str(cert[0]))
        with urllib.request.urlopen(url, timeout=20, context=trust) as r:
            assert r.status == 200 and "Secure" in r.headers["set-cookie"]
        base = url.split("/?token=")[0]
        with urllib.request.urlopen(base + "/api/jobs", timeout=20, context=trust) as r:
            assert {j["name"] for j in json.load(r)["jobs"]} == {"done", "far"}
        with pytest.raises(OSError):  # plain HTTP gets no answer from a TLS server
            urllib.request.urlopen(base.replace("https:", "http:") + "/api/jobs", timeout=20)
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert "plain HTTP" not in err  # loopback: no warning; TLS never warns
