"""Reader of a job's output tensors: ``job.tensors`` (docs/tensors.md, docs/format.md).

```python
job = stepscope.open("runs/bert-42")
job.tensors.names()                          # every tensor saved (rank 0)
w = job.tensors["layer3.weight"]
w.steps(phase="train")                       # the steps it was saved at
w.value(100)                                 # numpy array (raw) or float (scalars)
w.reduction(100, "l2")                       # stored, or computed from the raw tensor
job.tensors.scalars(names=["loss"])          # a DataFrame, for rules and exports
```
Lookups filter the Parquet index and scalar segments by name, phase and step
(pushed down into the files on a local disk; on an object store each lookup fetches
those small segments whole), then read only the bytes of the one raw tensor asked
for, so a lookup does not scan the other tensors' data. Works on every store.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, cast

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from stepscope.jobfolder import INDEX_SCHEMA, SCALARS_SCHEMA, paths, rank_prefix
from stepscope.read._decode import RawTensor, TensorValue, decode, np_reduce
from stepscope.read._tensor import Tensor
from stepscope.store import SegmentCheck, Store, clean_floats

if TYPE_CHECKING:  # imported on first lookup: a job's rules open Tensors without one
    import pyarrow.dataset as ds

__all__ = ["RawTensor", "Tensor", "TensorValue", "Tensors", "decode", "np_reduce"]


class Tensors:
    """The output tensors of one rank of a job (rank 0 unless chosen)."""

    def __init__(
        self,
        store: Store,
        rank: int = 0,
        check: SegmentCheck | None = None,
        skipped: dict[str, str] | None = None,
    ) -> None:
        self.store, self.rank_id = store, rank
        self.prefix = rank_prefix(rank)
        # Shared with the Job: damaged segments and files are skipped and named there.
        self._check = check if check is not None else SegmentCheck()
        self._skipped = skipped if skipped is not None else {}

    def __repr__(self) -> str:
        return f"<Tensors rank {self.rank_id} of {self.store.url}>"

    def ranks(self) -> list[int]:
        """The ranks that saved tensors."""
        dirs = self.store.listdir(paths.TENSORS)
        return sorted({r for r in map(paths.rank_of, dirs) if r is not None})

    def rank(self, rank: int) -> Tensors:
        """The tensors of another rank."""
        return Tensors(self.store, rank, self._check, self._skipped)

    def _keys(self, stream: str) -> list[str]:
        keys = self.store.list(f"{self.prefix}/{stream}", suffix=".parquet")
        if self.store.is_local:
            keys = self._check.readable(self.store, keys)[0]
        return keys

    def _dataset(self, keys: list[str], schema: pa.Schema) -> ds.Dataset:
        import pyarrow.dataset as ds

        if self.store.is_local:
            paths = [self.store.path(k) for k in keys]
            return ds.dataset(paths, schema=schema, format="parquet", filesystem=self.store.fs)
        # Object stores: each segment fetched whole and read from Arrow's memory. A
        # dataset over the fsspec filesystem would have Arrow's threads hold Python
        # files, which can abort the process at exit (store.arrow_reader says why).
        tables = self._check.read_tables(self.store, keys)
        return ds.dataset([_conform(t, schema) for t in tables], schema=schema)

    def _read(
        self,
        stream: str,
        schema: pa.Schema,
        names: Sequence[str] | None,
        phase: str | None,
        step: int | None,
        columns: list[str] | None = None,
    ) -> pd.DataFrame:
        keys = self._keys(stream)
        if not keys or (names is not None and not len(names)):
            return schema.empty_table().to_pandas()
        import pyarrow.dataset as ds

        where = ds.field("rank") == self.rank_id
        if names is not None:
            where &= ds.field("name").isin(list(names))
        if phase is not None:
            where &= ds.field("phase") == phase
        if step is not None:
            where &= ds.field("step") == step
        try:
            table = self._dataset(keys, schema).to_table(filter=where, columns=columns)
        except (OSError, ValueError):  # a segment's data is damaged: find it, read the rest
            # (object stores' segments were each read whole, and checked, above)
            if not self.store.is_local or not self._check.deep(self.store, keys, pq.read_table):
                raise
            return self._read(stream, schema, names, phase, step, columns)
        return clean_floats(table).to_pandas()

    def scalars(
        self, names: Sequence[str] | None = None, phase: str | None = None, step: int | None = None
    ) -> pd.DataFrame:
        """Scalar rows (``phase, step, name, key, value``; ``key`` is ``value`` for a
        scalar's own value, else a reduction), ordered by name, phase, step."""
        df = self._read("scalars", SCALARS_SCHEMA, names, phase, step)
        return df.sort_values(["name", "phase", "step", "key"], kind="stable", ignore_index=True)

    def index(
        self, names: Sequence[str] | None = None, phase: str | None = None, step: int | None = None
    ) -> pd.DataFrame:
        """Raw tensor index rows (``name, phase, step, dtype, shape, blob, offset, nbytes``)."""
        df = self._read("index", INDEX_SCHEMA, names, phase, step)
        return df.sort_values(["name", "phase", "step"], kind="stable", ignore_index=True)

    def load(self, row: pd.Series) -> RawTensor:
        """The raw tensor of one index row (reads only its bytes)."""
        path = self.store.path(f"{self.prefix}/blobs/{row['blob']}")
        start = int(row["offset"])
        data = self.store.fs.cat_file(path, start=start, end=start + int(row["nbytes"]))
        return decode(data, str(row["dtype"]), list(row["shape"]))

    def names(self, phase: str | None = None) -> list[str]:
        """Every tensor name saved (in ``phase`` if given), sorted."""
        cols = ["name"]
        found = set(self._read("scalars", SCALARS_SCHEMA, None, phase, None, cols)["name"])
        found |= set(self._read("index", INDEX_SCHEMA, None, phase, None, cols)["name"])
        return sorted(found)

    def steps_of(self, name: str, phase: str | None = None) -> list[int]:
        """The steps at which anything of tensor ``name`` was saved (of ``phase`` if given)."""
        cols = ["step"]
        found = set(self._read("scalars", SCALARS_SCHEMA, [name], phase, None, cols)["step"])
        found |= set(self._read("index", INDEX_SCHEMA, [name], phase, None, cols)["step"])
        return sorted(int(s) for s in found)

    def collections(self) -> dict[str, list[str]]:
        """``{collection: [tensor names]}`` as the agent saw them."""
        key = f"{self.prefix}/collections.json"
        try:
            found = self.store.read_json(key)
        except FileNotFoundError:
            return {}
        except (OSError, ValueError):
            found = None
        ok = isinstance(found, dict) and all(
            isinstance(v, list) and all(isinstance(n, str) for n in v) for v in found.values()
        )
        if not ok:
            self._skipped[key] = "not an object of lists of tensor names"
            return {}
        return cast(dict[str, list[str]], found)

    def __getitem__(self, name: str) -> Tensor:
        return Tensor(self, name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and bool(self[name].steps())

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in its order and types (nulls where absent)."""
    columns = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)
