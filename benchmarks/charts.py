"""Chart library benchmark: uPlot against Apache ECharts in headless Chromium.

Measures, for each library, the bytes it adds to a report, the time to parse
and run it, and the time to draw one line chart of N points (from the call
that creates the chart to the library's "drawn" signal: uPlot's ``draw`` hook,
ECharts' ``finished`` event, animations off). N is 4,000 (what the report
draws after downsampling), 172,800 (24 h at 500 ms) and 1,728,000 (ten such
series, or 24 h at 50 ms). Runs are interleaved and the median is printed.

    .venv/bin/python benchmarks/charts.py [--runs 5] [--echarts path/to/echarts.min.js]

uPlot is read from the package (``stepscope/webcharts/static``); ECharts, which
is not vendored, is fetched once with ``npm pack echarts@6.1.0`` into
``~/.cache/stepscope-bench`` unless ``--echarts`` gives a local copy.
"""

from __future__ import annotations

import argparse
import gzip
import statistics
import subprocess
import tarfile
import tempfile
from pathlib import Path

from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
UPLOT = ROOT / "src/stepscope/webcharts/static/uPlot.iife.min.js"
CACHE = Path.home() / ".cache/stepscope-bench"
ECHARTS_VERSION = "6.1.0"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
SIZES = (4_000, 172_800, 1_728_000)

# Data is made in the page (a random walk with spikes) so that only drawing is timed.
DATA_JS = """
function makeData(n) {
  const xs = new Float64Array(n), ys = new Float64Array(n);
  let v = 50, t0 = 1763850000;
  for (let i = 0; i < n; i++) {
    v += (Math.sin(i * 12.9898) * 43758.5453 % 1) * 2;
    v = Math.min(100, Math.max(0, v));
    xs[i] = t0 + i * 0.5; ys[i] = (i % 9973 === 0) ? 100 : v;
  }
  return [xs, ys];
}
"""

_UPLOT_JS = """
window.draw = (n) => new Promise((resolve) => {
  const [xs, ys] = makeData(n); const el = document.getElementById('c'); el.innerHTML = '';
  const t0 = performance.now();
  new uPlot({width: 1000, height: 300, series: [{}, {stroke: 'blue'}],
             hooks: {draw: [() => resolve(performance.now() - t0)]}}, [xs, ys], el);
});
"""
_ECHARTS_JS = """
window.draw = (n) => new Promise((resolve) => {
  const [xs, ys] = makeData(n); const el = document.getElementById('c');
  const old = echarts.getInstanceByDom(el); if (old) old.dispose();
  const pts = new Array(n); for (let i = 0; i < n; i++) pts[i] = [xs[i] * 1000, ys[i]];
  const t0 = performance.now();
  const chart = echarts.init(el, null, {renderer: 'canvas'});
  chart.on('finished', () => resolve(performance.now() - t0));
  chart.setOption({animation: false, xAxis: {type: 'time'}, yAxis: {type: 'value'},
    series: [{type: 'line', data: pts, showSymbol: false, SAMPLING}]});
});
"""
DRAW_JS = {
    "uPlot": _UPLOT_JS,
    "ECharts": _ECHARTS_JS.replace("SAMPLING", "sampling: 'lttb'"),
    "ECharts-raw": _ECHARTS_JS.replace(", SAMPLING", ""),
}


def echarts_path(given: str | None) -> Path:
    """A local echarts.min.js: the one given, or one fetched once from npm."""
    if given:
        return Path(given)
    target = CACHE / f"echarts-{ECHARTS_VERSION}.min.js"
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(
                ["npm", "pack", f"echarts@{ECHARTS_VERSION}", "--silent"],
                cwd=tmp,
                check=True,
                capture_output=True,
            )
            with tarfile.open(next(Path(tmp).glob("*.tgz"))) as tar:
                member = tar.extractfile("package/dist/echarts.min.js")
                assert member is not None
                target.write_bytes(member.read())
    return target


def page_html(lib_js: str, draw_js: str) -> str:
    return (
        "<!doctype html><html><body><div id=c style='width:1000px;height:300px'></div>"
        "<script>window.__t0 = performance.now()</script>"
        f"<script>{lib_js}</script>"
        "<script>window.__load = performance.now() - window.__t0</script>"
        f"<script>{DATA_JS}{draw_js}</script></body></html>"
    )


def measure(page: Page, url: str, n: int) -> tuple[float, float]:
    """(library load ms, draw ms) of one fresh page load and one chart of n points."""
    page.goto(url)
    load = float(page.evaluate("window.__load"))
    return load, float(page.evaluate(f"draw({n})"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--echarts", default=None, help="path to echarts.min.js")
    args = parser.parse_args()
    ech = echarts_path(args.echarts)
    libs = {"uPlot": UPLOT, "ECharts": ech, "ECharts-raw": ech}
    tmp = Path(tempfile.mkdtemp(prefix="stepscope-charts-"))
    urls = {}
    for name, path in libs.items():
        page_file = tmp / f"{name}.html"
        page_file.write_text(page_html(path.read_text(), DRAW_JS[name]))
        urls[name] = page_file.as_uri()
        raw = path.read_bytes()
        print(
            f"{name:11s} {path.name}: {len(raw) / 1e3:.0f} KB, "
            f"{len(gzip.compress(raw)) / 1e3:.0f} KB gzipped"
        )
    loads: dict[str, list[float]] = {n: [] for n in libs}
    draws: dict[tuple[str, int], list[float]] = {(n, s): [] for n in libs for s in SIZES}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
        page = browser.new_page()
        for _ in range(args.runs):
            for size in SIZES:
                for name in libs:  # interleaved: the machines are noisy
                    load, draw = measure(page, urls[name], size)
                    loads[name].append(load)
                    draws[(name, size)].append(draw)
        browser.close()
    print(f"\nmedian of {args.runs} interleaved runs, headless Chromium, 1000x300 canvas")
    print(f"{'library':11s} {'load ms':>8s} " + " ".join(f"{s:>12,d} pts" for s in SIZES))
    for name in libs:
        cells = " ".join(f"{statistics.median(draws[(name, s)]):>13.0f} ms" for s in SIZES)
        print(f"{name:11s} {statistics.median(loads[name]):8.1f} {cells}")


if __name__ == "__main__":
    main()
