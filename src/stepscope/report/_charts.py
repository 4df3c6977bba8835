"""Chart specs for the page: downsampled, compactly rounded, JSON-ready.

A :class:`Charts` collects the specs of one page; each ``add_*`` method
returns the id that :func:`._html.chart` places in the page. The specs are
what ``webcharts/static/stepscope-charts.js`` draws (see docs/charts.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TypedDict

import numpy.typing as npt

from stepscope.analysis.downsample import compact, mean_frame, minmax_frame, offsets
from stepscope.analysis.pagescale import percent
from stepscope.analysis.report_data import Histogram
from stepscope.jobfolder import JsonObject

REPORT_BUCKETS = 2000  # 2 points per bucket: ~4 points per pixel column of a laptop-wide chart
HEATMAP_BUCKETS = 600

#: A chart's spec: the JSON object the page's script draws (docs/charts.md).
ChartSpec = JsonObject


class Band(TypedDict):
    """A shaded time range of a time series (a rule finding), seconds from ``t0``."""

    start: float
    end: float
    label: str
    severity: float


class Charts:
    """The chart specs of one page, keyed by id."""

    def __init__(self, t0: float, buckets: int = REPORT_BUCKETS) -> None:
        # ``buckets``: the cap of a time series' points (2 per bucket); a notebook cell
        # takes fewer than the report's page.
        self.t0, self.buckets = t0, buckets
        self.specs: dict[str, ChartSpec] = {}

    def _add(self, spec: ChartSpec) -> str:
        chart_id = f"c{len(self.specs)}"
        self.specs[chart_id] = spec
        return chart_id

    def add_timeseries(
        self,
        title: str,
        x: npt.ArrayLike,
        columns: Mapping[str, npt.ArrayLike],
        unit: str = "%",
        **extra: object,
    ) -> str:
        """Line chart of several series sharing ``x`` (min/max downsampled)."""
        xs, cols = minmax_frame(x, columns, self.buckets)
        series: list[JsonObject] = [{"label": k, "values": compact(v)} for k, v in cols.items()]
        return self._add(self._ts("timeseries", title, xs, series, unit, extra))

    def add_stacked(
        self, title: str, x: npt.ArrayLike, columns: Mapping[str, npt.ArrayLike], unit: str = "s"
    ) -> str:
        """Stacked areas (bucket means, so that the stack's height stays the mean total)."""
        xs, cols = mean_frame(x, columns, self.buckets)
        series: list[JsonObject] = [{"label": k, "values": compact(v)} for k, v in cols.items()]
        return self._add(self._ts("stacked", title, xs, series, unit, {}))

    def _ts(
        self,
        kind: str,
        title: str,
        xs: npt.ArrayLike,
        series: list[JsonObject],
        unit: str,
        extra: Mapping[str, object],
    ) -> ChartSpec:
        t0 = 0.0 if extra.get("xAxis") == "step" else self.t0  # steps are not times
        spec: ChartSpec = {
            "kind": kind,
            "title": title,
            "unit": unit,
            "t0": t0,
            "x": offsets(xs, t0),
            "series": series,
        }
        spec.update(extra)
        return spec

    def add_histogram(self, title: str, hist: Histogram, unit: str = "s", **extra: object) -> str:
        """Bars of ``hist`` (edges and counts, see analysis.report_data.histogram)."""
        spec: ChartSpec = {
            "kind": "histogram",
            "title": title,
            "unit": unit,
            "edges": compact(hist["edges"], 6),
            "counts": list(hist["counts"]),
        }
        spec.update(extra)
        return self._add(spec)

    def add_heatmap(
        self, title: str, x: npt.ArrayLike, rows: Mapping[str, npt.ArrayLike], unit: str = "%"
    ) -> str:
        """Rows (cores, GPUs) over time, bucket means rounded to integers."""
        xs, cols = mean_frame(x, rows, HEATMAP_BUCKETS)
        values = [[None if math.isnan(v) else round(v) for v in c.tolist()] for c in cols.values()]
        spec: ChartSpec = {
            "kind": "heatmap",
            "title": title,
            "unit": unit,
            "t0": self.t0,
            "x": offsets(xs, self.t0),
            "rows": list(cols),
            "values": values,
        }
        return self._add(spec)

    def add_share(
        self,
        title: str,
        labels: Sequence[str],
        values: Sequence[float],
        shares: Sequence[float],
        unit: str = "s",
    ) -> str:
        """One bar split into shares (the step split in total). ``shares`` (0..1) are
        printed as the tables print them (:func:`~stepscope.analysis.pagescale.percent`)."""
        spec: ChartSpec = {
            "kind": "share",
            "title": title,
            "unit": unit,
            "labels": list(labels),
            "values": compact(values),
            "percents": [percent(s) for s in shares],
        }
        return self._add(spec)

    def band(self, start: float | None, end: float | None, label: str, severity: float) -> Band:
        """A shaded time range (a rule finding) for a time series' ``bands``."""
        s = start if start is not None else self.t0
        e = end if end is not None else s
        return {
            "start": round(s - self.t0, 3),
            "end": round(e - self.t0, 3),
            "label": label,
            "severity": severity,
        }
