"""The shared chart layer (webcharts) in a real browser: readable axes, legends, text
alternatives and number formatting, measured on what Chromium draws.

The page spies on the canvas: every ``fillText`` is recorded with its position and
its measured width, so label overlaps are measured on the drawn text itself.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

import stepscope
from conftest import CHROMIUM
from stepscope.report import write_report
from stepscope.report._html import fmt_number
from stepscope.testing import SyntheticJob, write_synthetic_job
from stepscope.webcharts import script_text, style_text

pytestmark = [
    pytest.mark.process,  # Chromium
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs Debian's chromium"),
]

SPY = """<script>window.__texts = [];
const fill = CanvasRenderingContext2D.prototype.fillText;
CanvasRenderingContext2D.prototype.fillText = function (t, x, y) {
  const m = this.measureText(t), tr = this.getTransform();
  window.__texts.push({text: String(t), x: tr.a * x + tr.e, y: tr.d * y + tr.f,
    left: tr.a * x + tr.e - m.actualBoundingBoxLeft * tr.a,
    right: tr.a * x + tr.e + m.actualBoundingBoxRight * tr.a});
  return fill.apply(this, arguments);
};</script>"""

# Draws one chart of `span` seconds and returns the texts drawn on its canvas.
DRAW = """async ([spec]) => {
  const el = document.getElementById("c");
  window.__texts = [];
  StepscopeCharts.draw(el, spec);
  await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  return window.__texts;
}"""

T0 = 1_763_850_000.0  # a quarter past a minute, to make the first tick fall inside
SPANS = {"10 s": 10, "2 min": 120, "3 min": 180, "4 min": 240, "2 h": 7200, "3 days": 3 * 86400}


def page_of(browser: Any, width: int) -> Any:
    page = browser.new_page(viewport={"width": width, "height": 700})
    page.set_content(
        f"<!doctype html><html><head><style>{style_text()}</style></head><body>{SPY}"
        f'<div id="c" class="sc-chart"></div><script>{script_text()}</script></body></html>'
    )
    return page


def spec_of(kind: str, span: float, n: int = 300) -> dict[str, Any]:
    x = [span * i / (n - 1) for i in range(n)]
    v = [50 + 40 * ((i * 7) % 11) / 11 for i in range(n)]
    if kind == "heatmap":
        return {"id": "h", "kind": "heatmap", "title": "Cores", "unit": "%", "t0": T0 + 15,
                "x": x, "rows": ["cpu0", "cpu1"], "values": [v, v]}  # fmt: skip
    return {"id": "t", "kind": "timeseries", "title": "CPU", "unit": "%", "t0": T0 + 15, "x": x,
            "series": [{"label": "cpu", "values": v}]}  # fmt: skip


def axis_labels(texts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The time labels: the texts of the lowest row holding a ':' or a date."""
    times = [t for t in texts if ":" in t["text"] or t["text"].count("-") == 2]
    bottom = max(t["y"] for t in times)
    return sorted((t for t in times if abs(t["y"] - bottom) < 1), key=lambda t: t["x"])


@pytest.mark.parametrize("kind", ["timeseries", "heatmap"])
def test_time_axis_labels_never_overlap(browser: Any, kind: str) -> None:
    for width in (400, 1400):
        page = page_of(browser, width)
        for name, span in SPANS.items():
            labels = axis_labels(page.evaluate(DRAW, [spec_of(kind, span)]))
            texts = [t["text"] for t in labels]
            assert len(labels) >= 2, (name, width, texts)
            assert len(set(texts)) == len(texts), (name, width, "a label repeats", texts)
            for a, b in itertools.pairwise(labels):
                gap = b["left"] - a["right"]
                assert gap >= 6, (name, width, a["text"], b["text"], gap)
        page.close()


def test_heatmap_has_a_colour_legend(browser: Any) -> None:
    page = page_of(browser, 900)
    page.evaluate(DRAW, [spec_of("heatmap", 600)])
    legend = page.inner_text("#c .sc-heat-legend")
    assert "0%" in legend and "100%" in legend and "no data" in legend
    scale = page.eval_on_selector("#c .sc-heat-scale", "e => getComputedStyle(e).backgroundImage")
    # white at 0 %, red at 100 %: the colours the cells are painted with
    assert "rgb(255, 255, 255) 0%" in scale and "rgb(225, 30, 35) 100%" in scale
    page.close()


def test_every_chart_kind_has_a_text_alternative(browser: Any) -> None:
    page = page_of(browser, 900)
    specs = [
        spec_of("timeseries", 180),
        spec_of("heatmap", 180),
        {"id": "s", "kind": "share", "title": "Split", "unit": "s",
         "labels": ["forward", "backward"], "values": [1.0, 3.0]},
        {"id": "hi", "kind": "histogram", "title": "Durations", "unit": "s",
         "edges": [0.1, 0.2, 0.3], "counts": [4, 6]},
    ]  # fmt: skip
    alts = []
    for spec in specs:
        page.evaluate(DRAW, [spec])
        alt = page.eval_on_selector("#c [role=img]", "e => e.getAttribute('aria-label')")
        assert alt.startswith(spec["title"] + ": "), alt
        alts.append(alt)
    assert "cpu 50% to 86.4%" in alts[0]
    assert "from 2025-11-22 22:20:15 to 2025-11-22 22:23:15 UTC" in alts[0]
    assert "2 rows, values 50% to 86.4%" in alts[1]
    assert "forward 25.0%, backward 75.0%" in alts[2]
    assert "10 steps from 100 ms to 300 ms" in alts[3]
    page.close()


def test_a_chart_without_data_says_so(browser: Any) -> None:
    page = page_of(browser, 900)
    spec = {"id": "e", "kind": "timeseries", "title": "eval step duration", "unit": "s",
            "t0": T0, "x": [0, 1], "series": [{"label": "duration", "values": [None, None]}],
            "empty": "No eval steps in this job."}  # fmt: skip
    page.evaluate(DRAW, [spec])
    assert page.inner_text("#c .sc-empty") == "No eval steps in this job."
    assert page.query_selector("#c canvas") is None
    page.close()


NUMBERS = [4.2359938621521, 0.1, 0.5, 2.0, 150, 999.6, 1234.56, 12345678, -3.14159, 0.0123456,
           0.000123456, 1e-5, 0.0, 0.999, 100.4]  # fmt: skip


def test_table_numbers_are_rounded_alike_in_python_and_javascript(browser: Any) -> None:
    page = page_of(browser, 900)
    js = page.evaluate("(xs) => xs.map((x) => StepscopeCharts.number(x))", NUMBERS)
    assert js == [fmt_number(v) for v in NUMBERS]
    assert js[:3] == ["4.24", "0.1", "0.5"] and js[6] == "1235" and js[10] == "1.23e-4"
    page.close()


SPY_EACH = (
    SPY.replace("<script>", "")
    .replace("</script>", "")
    .replace("window.__texts.push({", "window.__texts.push({canvas: canvasId(this.canvas), ")
    .replace(
        "window.__texts = [];",
        "window.__texts = []; const ids = new WeakMap(); let next = 0;\n"
        "const canvasId = (c) => { if (!ids.has(c)) ids.set(c, next++); return ids.get(c); };",
    )
)


@pytest.mark.parametrize("width", [400, 1400])
def test_a_reports_time_axes_never_overlap(tmp_path: Path, browser: Any, width: int) -> None:
    write_synthetic_job(str(tmp_path), SyntheticJob(hours=0.05, cores=4, gpus=1))  # a 3 min job
    page = browser.new_page(viewport={"width": width, "height": 900})
    page.add_init_script(SPY_EACH)
    page.goto(Path(write_report(stepscope.open(tmp_path))).as_uri())
    page.wait_for_function("document.documentElement.dataset.ready === '1'", timeout=30_000)
    page.evaluate("new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))")
    rows: dict[tuple[int, int], list[dict[str, Any]]] = {}
    for t in page.evaluate("window.__texts"):
        if ":" in t["text"]:
            rows.setdefault((t["canvas"], round(t["y"])), []).append(t)
    axes = [sorted(r, key=lambda t: t["x"]) for r in rows.values() if len(r) > 1]
    assert len(axes) >= 5  # the system charts, the heatmap and the step charts
    for labels in axes:
        for a, b in itertools.pairwise(labels):
            assert b["left"] - a["right"] >= 6, (width, a["text"], b["text"])
    page.close()
