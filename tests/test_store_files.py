"""Local writes of the store: atomic, the folder made on demand, nothing left on a full disk."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from stepscope.store import open_store


def test_write_makes_the_folder_and_replaces_whole_files(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "job"))
    store.write_bytes("steps/rank-0/part-1.parquet", b"first version")
    store.write_bytes("steps/rank-0/part-1.parquet", b"second")
    assert (tmp_path / "job/steps/rank-0/part-1.parquet").read_bytes() == b"second"
    assert [p.name for p in (tmp_path / "job/steps/rank-0").iterdir()] == ["part-1.parquet"]


def test_a_file_where_the_folder_must_be_is_an_error_naming_the_path(tmp_path: Path) -> None:
    (tmp_path / "steps").write_text("not a folder")
    store = open_store(str(tmp_path))
    with pytest.raises(OSError, match="steps"):
        store.write_bytes("steps/rank-0/part-1.parquet", b"rows")


FULL_DISK = textwrap.dedent(
    """
    import errno, os, sys
    from stepscope.store import open_store
    store = open_store(sys.argv[1])
    store.write_bytes("steps/part.parquet", b"old rows")
    try:
        store.write_bytes("steps/part.parquet", os.urandom(1 << 20))
    except OSError as exc:
        assert exc.errno == errno.ENOSPC, exc
    else:
        raise SystemExit("a 1 MiB write to a 64 KiB disk did not fail")
    print(sorted(os.listdir(os.path.join(sys.argv[1], "steps"))))
    print(open(os.path.join(sys.argv[1], "steps/part.parquet"), "rb").read().decode())
    """
)


@pytest.mark.process
@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_a_full_disk_keeps_the_old_file_and_leaves_no_partial_one(tmp_path: Path) -> None:
    """A real full filesystem: a 64 KiB tmpfs mounted in a private mount namespace."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = f'mount -t tmpfs -o size=64k none {disk} && exec {sys.executable} -c "$0" {disk}'
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"no mount namespaces here: {probe.stderr.decode().strip()}")
    out = subprocess.run(
        ["unshare", "-m", "sh", "-c", script, FULL_DISK], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["['part.parquet']", "old rows"]
