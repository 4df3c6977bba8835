"""DuckDB vs Polars on the query shape stepscope runs most: quantiles per group.

Writes 10M synthetic system rows (node, time, cpu) as Parquet segments once, then
times p50/p95 per node over them in each engine, each in a fresh process so that
peak memory (max RSS) is comparable.

    python benchmarks/engine.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

ROWS, SEGMENTS = 10_000_000, 50

DUCK = """
import duckdb, glob, time, resource, json, sys
t = time.perf_counter()
files = sorted(glob.glob(sys.argv[1] + '/*.parquet'))
con = duckdb.connect()
con.execute("SET enable_progress_bar=false")
r = con.execute(f"SELECT node, quantile_cont(cpu, 0.5), quantile_cont(cpu, 0.95) "
                f"FROM read_parquet({files!r}) GROUP BY node").fetchall()
print(json.dumps({"s": time.perf_counter() - t, "groups": len(r),
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

POLARS = """
import polars as pl, time, resource, json, sys
t = time.perf_counter()
r = (pl.scan_parquet(sys.argv[1] + '/*.parquet').group_by('node')
     .agg(pl.col('cpu').quantile(0.5).alias('p50'),
          pl.col('cpu').quantile(0.95).alias('p95')).collect())
print(json.dumps({"s": time.perf_counter() - t, "groups": r.height,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_data(folder: Path) -> None:
    rng = np.random.default_rng(0)
    per = ROWS // SEGMENTS
    for i in range(SEGMENTS):
        table = pa.table(
            {
                "time": np.arange(i * per, (i + 1) * per, dtype=np.float64) * 0.5,
                "node": pa.array([f"node-{j % 16}" for j in range(per)]).dictionary_encode(),
                "cpu": rng.uniform(0, 100, per).astype(np.float32),
            }
        )
        pq.write_table(table, folder / f"part-{i:03d}.parquet", compression="zstd")


def measure(code: str, folder: Path) -> dict[str, float]:
    best: dict[str, float] = {}
    for _ in range(3):
        out = subprocess.run(
            [sys.executable, "-c", code, str(folder)], capture_output=True, text=True, check=True
        )
        r = json.loads(out.stdout)
        if not best or r["s"] < best["s"]:
            best = r
    return best


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_data(folder)
        print(f"{ROWS:,} rows in {SEGMENTS} Parquet segments, p50+p95 of cpu per node (16)")
        for name, code in (("duckdb", DUCK), ("polars", POLARS)):
            r = measure(code, folder)
            print(f"{name:<8} {r['s']:.2f} s  peak RSS {r['rss_mb']:.0f} MB  groups {r['groups']}")


if __name__ == "__main__":
    main()
