"""Small HTML helpers: every string that reaches the page goes through :func:`esc`."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

# JSON inside <script type="application/json">: "</script>" or "<!--" in a string
# must not end the element, so the characters that could are written as escapes.
_SCRIPT_SAFE = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def esc(value: object) -> str:
    """HTML-escaped text of any value (quotes too, so it is safe in attributes)."""
    return html.escape("" if value is None else str(value), quote=True)


def script_json(obj: object) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    return json.dumps(obj, separators=(",", ":"), allow_nan=False).translate(_SCRIPT_SAFE)


def fmt_time(t: float | None) -> str:
    """A unix time as ``YYYY-mm-dd HH:MM:SS UTC``."""
    if t is None or (isinstance(t, float) and math.isnan(t)):
        return "\u2013"
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def fmt_duration(s: float | None) -> str:
    """Seconds as ``850 ms``, ``12.3 s``, ``4 min 05 s`` or ``26 h 03 min``."""
    if s is None or math.isnan(s):
        return "\u2013"
    if abs(s) < 1:
        return f"{s * 1e3:.3g} ms"
    if abs(s) < 60:
        return f"{s:.3g} s"
    m, sec = divmod(round(s), 60)
    if m < 60:
        return f"{m} min {sec:02d} s"
    h, m = divmod(m, 60)
    return f"{h} h {m:02d} min"


def fmt_value(v: float | None, unit: str) -> str:
    """A metric value with its unit: bytes with SI prefixes, seconds as durations."""
    if v is None or math.isnan(v):
        return "\u2013"
    if unit in ("B", "B/s"):
        for prefix in ("", "K", "M", "G", "T"):
            if abs(v) < 1000 or prefix == "T":
                return f"{v:.0f} {prefix}{unit}" if not prefix else f"{v:.1f} {prefix}{unit}"
            v /= 1000
    if unit == "s":
        return fmt_duration(v)
    text = f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
    return f"{text}%" if unit == "%" else f"{text} {unit}".rstrip()


def fmt_number(v: object) -> str:
    """A number for a table: integers whole, else 3 significant digits (``4.24``,
    ``0.0123``, ``1.23e-4``; ``1235`` from 1000 on). Not a number: its text.

    The dashboard's tables use ``StepscopeCharts.number`` (webcharts), the same rule.
    """
    if v is None:
        return "\u2013"
    if isinstance(v, bool) or not isinstance(v, int | float):
        return str(v)
    if math.isnan(v):
        return "\u2013"
    if math.isinf(v) or float(v).is_integer() or abs(v) >= 1000:
        return f"{v:.0f}"
    if v != 0 and abs(v) < 1e-3:
        mantissa, exp = f"{v:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exp)}"
    r = float(f"{v:.3g}")
    return f"{r:.0f}" if r.is_integer() else repr(r)


def table(
    head: Sequence[str],
    rows: Iterable[Sequence[object]],
    cls: str = "",
    raw_cols: Sequence[int] = (),
) -> str:
    """A table; cells are escaped except the columns in ``raw_cols`` (pre-rendered HTML).

    Floats are written by :func:`fmt_number`, so no table shows ``4.2359938621521``.
    """
    th = "".join(f"<th>{esc(h)}</th>" for h in head)
    body = []
    for row in rows:
        cells = (
            c if i in raw_cols else esc(fmt_number(c) if isinstance(c, float) else c)
            for i, c in enumerate(row)
        )
        body.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    rows_html = "".join(body)
    return (
        f'<table class="{esc(cls)}"><thead><tr>{th}</tr></thead><tbody>{rows_html}</tbody></table>'
    )


def section(anchor: str, title: str, body: str, level: int = 2) -> str:
    """A titled section with an anchor for the table of contents."""
    return f'<section id="{esc(anchor)}"><h{level}>{esc(title)}</h{level}>{body}</section>'


def badge(status: str) -> str:
    """A coloured status label (job status or rule status)."""
    return f'<span class="badge st-{esc(status)}">{esc(status)}</span>'


def chart(chart_id: str, caption: str = "") -> str:
    """The placeholder a chart is drawn into by the page's script."""
    cap = f'<div class="caption">{esc(caption)}</div>' if caption else ""
    div = f'<div class="sc-chart" data-chart="{esc(chart_id)}"></div>'
    return f'<figure class="figure">{div}{cap}</figure>'


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'
