"""``import_job``: a predecessor job in, a stepscope job folder out (docs/sagemaker.md).

The same input writes the same folder, byte for byte: segments are named by their
rows' times and pid 0, nothing records when the import ran, and importing again
into a folder that holds an earlier import of it replaces that import.

Like the live runner's final evaluation, the import ends by evaluating the job's
rules (ProfilerReport: an imported job has no rule configuration) and writing
their verdicts to ``rules/<Rule>.json``, dated at the job's end, so ``show`` and
the report open with a diagnosis.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field

import pyarrow as pa

from stepscope.errors import UsageError
from stepscope.importers.sagemaker._artifacts import import_artifacts
from stepscope.importers.sagemaker._segments import Segments
from stepscope.importers.sagemaker._source import Listing, SystemFile, open_source
from stepscope.importers.sagemaker._system import Grid, interval_ms, node_rows
from stepscope.importers.sagemaker._tally import Tally
from stepscope.importers.sagemaker._tensors import import_tensors
from stepscope.importers.sagemaker._timelines import import_timelines
from stepscope.jobfolder import JobMeta, JsonObject, is_job, paths, read_meta, write_meta
from stepscope.store import Store, open_store

IMPORTED = "Imported"


@dataclass
class Extent:
    """The earliest and latest time seen in any stream (the job's start and end)."""

    start: float | None = None
    end: float | None = None

    def add(self, start: float, end: float) -> None:
        self.start = start if self.start is None else min(self.start, start)
        self.end = end if self.end is None else max(self.end, end)


@dataclass
class ImportSummary:
    """What an import read and wrote, and what had no place (also in job.json's ``origin``)."""

    source: str
    job: str
    origin: JsonObject = field(default_factory=dict)
    # rule -> status, as written: `stepscope import` evaluates the rules (cli/_import.py)
    verdicts: dict[str, str] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        got = self.origin.get("counts")
        return {str(k): int(v) for k, v in got.items()} if isinstance(got, dict) else {}

    @property
    def unplaced(self) -> dict[str, int]:
        got = self.origin.get("unplaced")
        if not isinstance(got, dict):
            return {}
        return {str(k): int(v["count"]) for k, v in got.items() if isinstance(v, dict)}

    def text(self) -> str:
        """The summary printed by ``stepscope import``."""
        lines = [f"imported {self.source} -> {self.job}"]
        lines += [f"  {k}: {v}" for k, v in self.counts.items()]
        if self.unplaced:
            lines.append("no place in stepscope's format (counted, listed in job.json 'origin'):")
            lines += [f"  {k}: {v}" for k, v in self.unplaced.items()]
        if self.verdicts:
            lines.append(f"rules evaluated ({len(self.verdicts)}, verdicts in rules/):")
            for status in ("IssuesFound", "Error", "NoIssuesFound", "NotApplicable"):
                names = sorted(r for r, s in self.verdicts.items() if s == status)
                if names:
                    lines.append(f"  {status}: {', '.join(names)}")
            lines.append(f"the diagnosis: stepscope show {self.job}")
        return "\n".join(lines)


def import_job(source: str, dest: str, name: str | None = None) -> ImportSummary:
    """Import the SageMaker Debugger/Profiler output at ``source`` (a folder or an
    ``s3://`` URL) into the job folder ``dest``; returns what was imported."""
    src, listing = open_source(source)
    out = open_store(dest)
    _prepare(out, dest)
    tally, extent = Tally(), Extent()
    grids = _system(src, listing, out, tally, extent)
    # The chunks' Arrow buffers are free now; hand them back so that the timelines
    # (Python objects, which Arrow's pool cannot reuse) do not add to them.
    pa.default_memory_pool().release_unused()
    ranks = import_timelines(src, listing.timelines, out, tally, extent.add)
    import_artifacts(src, listing, out, ranks, tally)
    import_tensors(src, listing, out, tally, extent.add)
    for key in listing.other:
        tally.no_place("files of no known part", key)
    hosts = sorted(set(grids) | {r.node for r in ranks.values()})
    for host in hosts:
        if host not in grids:
            out.write_json(paths.node_key(host), _node_info(host, None))
    origin: JsonObject = {
        "kind": "sagemaker",
        "source": source,
        "ranks": {nid: r.rank for nid, r in sorted(ranks.items())},
        "interval_ms": {n: interval_ms(g) for n, g in sorted(grids.items())},
        **tally.as_json(),
    }
    _write_meta(out, name or _name(source), hosts, extent, origin)
    return ImportSummary(source, dest, origin)


def _prepare(out: Store, dest: str) -> None:
    """Refuse to overwrite a recorded job; clear an earlier import (re-import)."""
    if is_job(out):
        if read_meta(out).get("status") != IMPORTED:
            raise UsageError(
                f"{dest!r} holds a stepscope job that was not imported; importing would "
                "overwrite it. Choose another JOB folder (e.g. runs/<name>-imported)."
            )
        for entry in out.listdir(""):
            out.delete(entry)
    elif out.listdir(""):
        raise UsageError(
            f"{dest!r} is not empty and holds no stepscope job. Choose a new or empty JOB folder."
        )


def _system(
    src: Store, listing: Listing, out: Store, tally: Tally, extent: Extent
) -> dict[str, Grid]:
    grids: dict[str, Grid] = {}
    by_node: dict[str, list[SystemFile]] = {}
    for f in listing.system:
        by_node.setdefault(f.node, []).append(f)
    for node, files in sorted(by_node.items()):
        grid = grids[node] = Grid()
        seg = Segments(out, paths.system_stream(node), "time")
        for table in node_rows(src, files, grid, tally):
            seg.add(table)
            times = table.column("time")
            extent.add(float(times[0].as_py()), float(times[-1].as_py()))
        seg.close()
        tally.read("system rows", seg.written)
        cores = sum(1 for k in grid.placements if k[0][3:].isdigit() and k[0].startswith("cpu"))
        gpus = sorted({int(c[3:].split("_")[0]) for c, _ in grid.placements if c.startswith("gpu")})
        out.write_json(paths.node_key(node), _node_info(node, grid, cores, gpus))
    return grids


def _node_info(
    node: str, grid: Grid | None, cores: int = 0, gpus: list[int] | None = None
) -> JsonObject:
    """``nodes/<node>.json``: what the metrics tell; the rest unknown (null)."""
    return {
        "node": node,
        "hostname": node,
        "cpu_count": cores or None,
        "mem_total": None,
        "gpus": [{"index": g, "name": "unknown (imported)", "mem_total": None} for g in gpus or []],
        "interval_ms": interval_ms(grid) if grid else None,
        "clock_offset_s": 0.0,
        "boot_time": None,
    }


def _name(source: str) -> str:
    return posixpath.basename(source.rstrip("/")) or "imported"


def _write_meta(
    out: Store, name: str, hosts: list[str], extent: Extent, origin: JsonObject
) -> None:
    from stepscope import __version__

    meta = JobMeta(
        name=name,
        command=[],
        cwd="",
        config={},
        hosts=hosts,
        start_time=extent.start or 0.0,
        end_time=extent.end,
        status=IMPORTED,
        reason="imported from SageMaker Debugger/Profiler output: how the job ended is unknown",
        stepscope_version=__version__,
        extra={"origin": origin},
    )
    write_meta(out, meta)
