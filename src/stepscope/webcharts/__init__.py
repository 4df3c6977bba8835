"""The chart layer shared by the HTML report and the dashboard.

A vendored copy of uPlot (MIT, see ``static/uPlot.LICENSE``; chosen on the
measurements in docs/charts.md) and ``stepscope-charts.js``, our small module
of chart kinds over it (time series with findings and outlier markers, stacked
split, histogram, heatmap, share bar). The report inlines the text returned
here; the dashboard serves the files of :data:`STATIC_DIR`.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

__all__ = ["SCRIPTS", "STATIC_DIR", "STYLES", "UPLOT_VERSION", "script_text", "style_text"]

UPLOT_VERSION = "1.6.32"
SCRIPTS = ("uPlot.iife.min.js", "stepscope-charts.js")
STYLES = ("uPlot.min.css", "stepscope-charts.css")
STATIC_DIR = Path(str(resources.files("stepscope.webcharts").joinpath("static")))


@cache
def _read(name: str) -> str:
    return (
        resources.files("stepscope.webcharts").joinpath("static", name).read_text(encoding="utf-8")
    )


def script_text() -> str:
    """uPlot and stepscope-charts.js, to inline in one ``<script>`` element.

    The text never contains ``</script`` (checked), so it is safe to inline as is.
    """
    text = "\n;\n".join(_read(name) for name in SCRIPTS)
    if "</script" in text.lower():
        raise ValueError("a chart script contains '</script' and cannot be inlined")
    return text


def style_text() -> str:
    """The chart styles (uPlot's and ours), to inline in one ``<style>`` element."""
    return "\n".join(_read(name) for name in STYLES)
