/* stepscope chart layer: small wrappers over uPlot, shared by the report and the dashboard.
 *
 * StepscopeCharts.draw(el, spec) draws one chart from a plain JSON spec; drawAll(root, specs)
 * draws every element with a data-chart="<id>" attribute. Kinds: timeseries, stacked,
 * histogram, heatmap, share. Times are unix seconds given as offsets from spec.t0 and shown
 * in UTC. Text from the data is only ever set with textContent or drawn on a canvas.
 * Every chart records what it holds in StepscopeCharts.registry[id] and on its element
 * (data-drawn, data-points) so that tests can compare charts with the job's data.
 * Every chart over time shares one time axis: setDomain(min, max) sets the range they all
 * show (the job's, or the window asked for), and zooming one zooms them all.
 */
(function (global) {
  "use strict";
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
    "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  const SPLIT_COLORS = {data_wait: "#d62728", forward: "#1f77b4", backward: "#ff7f0e",
    optimizer: "#2ca02c", other: "#9d9d9d"};
  const registry = {};
  const plots = [];  // one resize function per chart
  const HEIGHT = 220;

  const utc = (ts) => uPlot.tzDate(new Date(ts * 1e3), "Etc/UTC");
  const color = (s, i) => s.color || SPLIT_COLORS[s.label] || PALETTE[i % PALETTE.length];
  const widthOf = (el) => Math.max(320, Math.floor(el.clientWidth || 800));

  const short = (v) => (v === 0 ? "0" : String(Number(v.toPrecision(3))));

  function human(v, unit) {
    if (v === null || v === undefined || Number.isNaN(v)) return "--";
    if (unit === "B" || unit === "B/s") {
      const k = ["", "K", "M", "G", "T"]; let i = 0;
      while (Math.abs(v) >= 1000 && i < k.length - 1) { v /= 1000; i++; }
      return short(v) + " " + k[i] + unit;
    }
    if (unit === "s") return Math.abs(v) < 1 && v !== 0 ? short(v * 1e3) + " ms" : short(v) + " s";
    const s = Math.abs(v) >= 1000 ? v.toFixed(0) : short(v);
    return unit ? s + (unit === "%" ? "%" : " " + unit) : s;
  }

  /* Time axis ticks: the smallest step of NICE (seconds) whose labels, measured in the
   * axis font, fit between two ticks with GAP pixels to spare, at any job length and width. */
  const NICE = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
    43200, 86400, 2 * 86400, 7 * 86400, 14 * 86400, 28 * 86400, 91 * 86400, 364 * 86400];
  const AXIS_FONT = '12px system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif';
  const GAP = 18;  // pixels between two labels at least: they read as separate times
  let measurer = null;

  function textWidth(text, font) {
    measurer = measurer || document.createElement("canvas").getContext("2d");
    measurer.font = font || AXIS_FONT;
    return measurer.measureText(text).width;
  }

  /* The label format of a tick step over a span (seconds): the date only when the span needs it. */
  function timeFormat(incr, span) {
    if (incr >= 86400) return "{YYYY}-{MM}-{DD}";
    if (incr < 60) return span > 86400 ? "{MM}-{DD} {HH}:{mm}:{ss}" : "{HH}:{mm}:{ss}";
    return span > 86400 ? "{MM}-{DD} {HH}:{mm}" : "{HH}:{mm}";
  }

  /* {incr, ticks, labels} for [min, max] (unix s) drawn over `px` CSS pixels. */
  function timeTicks(min, max, px, font) {
    const span = Math.max(max - min, 1e-9);
    for (const incr of NICE) {
      const fmt = uPlot.fmtDate(timeFormat(incr, span));
      const widest = Math.max(textWidth(fmt(utc(min)), font), textWidth(fmt(utc(max)), font));
      if ((incr / span) * px >= widest + GAP || incr === NICE[NICE.length - 1]) {
        const ticks = [];
        for (let t = Math.ceil(min / incr) * incr; t <= max; t += incr) ticks.push(t);
        return {incr, ticks, labels: ticks.map((t) => fmt(utc(t)))};
      }
    }
    return {incr: 0, ticks: [], labels: []};
  }

  function timeAxis() {
    let last = {ticks: [], labels: []};
    const splits = (u, axisIdx, min, max) => {
      last = timeTicks(min, max, u.bbox.width / (devicePixelRatio || 1));
      return last.ticks;
    };
    const values = (u, splits) => splits.map((v, i) => (last.ticks[i] === v ? last.labels[i]
      : uPlot.fmtDate("{HH}:{mm}:{ss}")(utc(v))));
    return {splits, values, font: AXIS_FONT};
  }

  function decodeX(spec) {
    const t0 = spec.t0 || 0, out = new Float64Array(spec.x.length);
    for (let i = 0; i < out.length; i++) out[i] = t0 + spec.x[i];
    return out;
  }

  function stats(label, values) {
    let n = 0, min = null, max = null, first = null, last = null;
    for (const v of values) {
      if (v === null || v === undefined || Number.isNaN(v)) continue;
      n++; last = v; if (first === null) first = v;
      if (min === null || v < min) min = v;
      if (max === null || v > max) max = v;
    }
    return {label, n, min, max, first, last};
  }

  function record(el, spec, series, extra) {
    const points = series.reduce((a, s) => a + s.n, 0);
    registry[spec.id] = Object.assign({id: spec.id, kind: spec.kind, drawn: false, points, series}, extra || {});
    el.dataset.points = String(points);
    return registry[spec.id];
  }

  function markDrawn(el, spec) {
    if (registry[spec.id]) registry[spec.id].drawn = true;
    el.dataset.drawn = "1";
  }

  const KIND_WORDS = {timeseries: "line chart", stacked: "stacked area chart", histogram: "histogram",
    heatmap: "heatmap", share: "bar of shares"};
  const isoUTC = (t) => new Date(t * 1e3).toISOString().slice(0, 19).replace("T", " ");

  /* The text alternative of a chart: what it shows, over which range, and each series' extent. */
  function summary(spec, reg, range) {
    let head = `${spec.title || "chart"}: ${KIND_WORDS[spec.kind] || spec.kind}`;
    if (range && spec.xAxis === "step") head += ` over steps ${Math.round(range[0])} to ${Math.round(range[1])}`;
    else if (range) head += ` from ${isoUTC(range[0])} to ${isoUTC(range[1])} UTC`;
    const series = (reg && reg.series) || [];
    if (spec.kind === "heatmap") {
      const seen = series.filter((s) => s.n);
      const lo = Math.min(...seen.map((s) => s.min)), hi = Math.max(...seen.map((s) => s.max));
      return `${head}; ${series.length} rows` + (seen.length ? `, values ${human(lo, spec.unit)} to ${human(hi, spec.unit)}` : ", no data");
    }
    if (spec.kind === "share") {
      return head + "; " + spec.labels.map((l, i) => `${l} ${percent(sharePercent(spec, i, reg.total))}`).join(", ");
    }
    if (spec.kind === "histogram") {
      const e = spec.edges;
      return `${head}; ${reg.total} steps from ${human(e[0], spec.unit)} to ${human(e[e.length - 1], spec.unit)}`;
    }
    return head + "; " + series.map((s) => (s.n ? `${s.label} ${human(s.min, spec.unit)} to `
      + `${human(s.max, spec.unit)}, last ${human(s.last, spec.unit)}` : `${s.label}: no data`)).join("; ");
  }

  function setAlt(node, text) {
    node.setAttribute("role", "img");
    node.setAttribute("aria-label", text);
  }

  /* A chart with nothing to draw says so (spec.empty: the sentence), instead of empty axes. */
  function empty(el, spec) {
    el.textContent = "";
    const p = document.createElement("p");
    p.className = "sc-empty"; p.textContent = spec.empty || "No data to show.";
    el.append(titleOf(spec), p);
    registry[spec.id] = {id: spec.id, kind: spec.kind, drawn: true, points: 0, series: [], empty: true};
    el.dataset.points = "0"; el.dataset.empty = "1";
    markDrawn(el, spec);
  }

  /* Shaded bands (rule findings), vertical markers and horizontal threshold lines. */
  function overlayHooks(spec) {
    const bands = spec.bands || [], marks = spec.markers || [], hlines = spec.hlines || [];
    const drawBands = (u) => {
      const c = u.ctx, top = u.bbox.top, h = u.bbox.height;
      for (const b of bands) {
        const x0 = u.valToPos((spec.t0 || 0) + b.start, "x", true);
        const x1 = u.valToPos((spec.t0 || 0) + b.end, "x", true);
        c.fillStyle = `rgba(214,39,40,${0.08 + 0.25 * (b.severity || 0.5)})`;
        c.fillRect(Math.min(x0, x1), top, Math.max(2, Math.abs(x1 - x0)), h);
      }
    };
    const drawLines = (u) => {
      const c = u.ctx, b = u.bbox; c.save(); c.setLineDash([5, 4]); c.lineWidth = 1.5;
      c.font = `${Math.round(11 * devicePixelRatio)}px sans-serif`; c.fillStyle = c.strokeStyle = "#b00";
      for (const m of marks) {
        const x = u.valToPos((m.axis === "value" ? 0 : spec.t0 || 0) + m.x, "x", true);
        c.beginPath(); c.moveTo(x, b.top); c.lineTo(x, b.top + b.height); c.stroke();
        if (m.label) c.fillText(m.label, x + 4, b.top + 12 * devicePixelRatio);
      }
      for (const l of hlines) {
        const y = u.valToPos(l.value, "y", true);
        c.beginPath(); c.moveTo(b.left, y); c.lineTo(b.left + b.width, y); c.stroke();
        if (l.label) c.fillText(l.label, b.left + 4, y - 4);
      }
      c.restore();
    };
    return {drawClear: [drawBands], draw: [drawLines]};
  }

  /* The shared time axis: the domain every time chart shows unzoomed (unix s), and the
   * charts that follow each other's zoom. `syncing` stops a zoom echoing back. */
  const timeGroup = {domain: null, plots: new Set(), heatmaps: new Set(), view: null, syncing: false};

  function setDomain(min, max) {
    timeGroup.domain = min === null || max === null || !(max > min) ? null : [min, max];
  }

  /* The x-range of a time chart when it is not zoomed: the domain, widened to any data
   * outside it (a late sample must not be cut). uPlot asks with the data's extent when it
   * fits the chart to its data, and with the range asked for on a zoom: that one stays. */
  function timeRange(u, dmin, dmax) {
    const d = timeGroup.domain, xs = u.data[0] || [];
    if (dmin === null || dmin === undefined) return d ? d.slice() : [0, 1];
    const fit = xs.length && dmin === xs[0] && dmax === xs[xs.length - 1];
    if (!d || !fit) return dmin === dmax ? [dmin - 1, dmax + 1] : [dmin, dmax];
    return [Math.min(d[0], dmin), Math.max(d[1], dmax)];
  }

  /* One chart was zoomed (or reset): the others show the same range. */
  function follow(u, key) {
    if (key !== "x" || timeGroup.syncing || !timeGroup.plots.has(u)) return;
    const {min, max} = u.scales.x;
    if (min === null || max === null) return;
    const view = isZoomed(u) ? [min, max] : null, was = timeGroup.view;
    timeGroup.view = view;
    if (String(view) !== String(was)) {  // a zoom or its reset: the heatmaps paint the range
      for (const h of timeGroup.heatmaps) if (h.canvas.isConnected) h.paint(); else timeGroup.heatmaps.delete(h);
    }
    timeGroup.syncing = true;
    try {
      for (const p of timeGroup.plots) {
        if (p === u) continue;
        if (!p.root.isConnected) { timeGroup.plots.delete(p); continue; }
        const eps = (max - min) * 1e-9;
        if (Math.abs(p.scales.x.min - min) > eps || Math.abs(p.scales.x.max - max) > eps) {
          p.setScale("x", {min, max});
        }
      }
    } finally { timeGroup.syncing = false; }
  }

  /* Whether a time chart shows less than its unzoomed range (the live dashboard keeps it). */
  function isZoomed(u) {
    const xs = u.data[0];
    if (!xs.length) return false;
    const [lo, hi] = timeRange(u, xs[0], xs[xs.length - 1]);
    const eps = (hi - lo) * 1e-6 + 1e-9;
    return u.scales.x.min > lo + eps || u.scales.x.max < hi - eps;
  }

  /* Warm-up steps above the y-range: a triangle at the top and what they took. */
  function offScaleHook(spec) {
    const off = spec.offScale || [];
    return (u) => {
      if (!off.length) return;
      const c = u.ctx, b = u.bbox, dpr = devicePixelRatio || 1;
      c.save(); c.fillStyle = "#7a3e00"; c.textAlign = "left"; c.textBaseline = "alphabetic";
      c.font = `${Math.round(11 * dpr)}px sans-serif`;
      for (const o of off) {
        const x = u.valToPos((spec.t0 || 0) + o.x, "x", true);
        if (x < b.left - 1 || x > b.left + b.width + 1) continue;
        const y = b.top + 2 * dpr, s = 5 * dpr;
        c.beginPath(); c.moveTo(x, y); c.lineTo(x - s, y + 1.6 * s); c.lineTo(x + s, y + 1.6 * s);
        c.closePath(); c.fill();
        const text = `step ${o.step}: ${human(o.value, spec.unit)} (warm-up, off scale)`;
        const w = c.measureText(text).width, left = x + s + 3 * dpr;
        c.fillText(text, left + w > b.left + b.width ? x - s - 3 * dpr - w : left, y + 1.6 * s);
      }
      c.restore();
    };
  }

  function baseOpts(el, spec, series, extraHooks) {
    const hooks = overlayHooks(spec);
    const timeX = spec.kind !== "histogram" && spec.xAxis !== "step";
    hooks.draw.push(offScaleHook(spec));
    if (timeX) hooks.setScale = [follow];
    hooks.draw.push((u) => {
      markDrawn(el, spec);
      const range = spec.kind === "histogram" ? null : [u.scales.x.min, u.scales.x.max];
      setAlt(u.ctx.canvas, summary(spec, registry[spec.id], range));
    });
    for (const k in extraHooks || {}) hooks[k] = (hooks[k] || []).concat(extraHooks[k]);
    // yMax: the top the page chose (warm-up steps above it), the bottom is zero
    const y = spec.yRange ? {range: spec.yRange}
      : spec.yMax ? {range: (u, dmin) => [Math.min(0, dmin ?? 0), spec.yMax]} : {auto: true};
    // x is time, except for histograms (values) and charts over training steps
    const stepLabels = (u, vals) => vals.map((v) => (Number.isInteger(v) ? String(v) : ""));
    const xAxis = Object.assign({label: spec.xLabel || (timeX ? "UTC" : ""), size: 50,
      values: spec.xAxis === "step" ? stepLabels : undefined}, timeX ? timeAxis() : {});
    return {
      title: spec.title, width: widthOf(el), height: spec.height || HEIGHT, tzDate: utc, hooks,
      scales: {x: timeX ? {time: true, range: timeRange} : {time: false}, y}, series,
      axes: [xAxis, {size: 70, values: (u, vals) => vals.map((v) => human(v, spec.unit))}],
      legend: {live: true}, cursor: {drag: {x: true, y: false}},
    };
  }

  /* What a chart's y-range leaves out, for the registry: the warm-up steps and the top. */
  const scaleOf = (spec) => ({offScale: (spec.offScale || []).map((o) => o.step), yMax: spec.yMax || null});

  function timeseries(el, spec) {
    const xs = decodeX(spec);
    const data = [xs], series = [spec.xAxis === "step" ? {label: "step"}
      : {label: "time (UTC)", value: "{YYYY}-{MM}-{DD} {HH}:{mm}:{ss}"}];
    spec.series.forEach((s, i) => {
      data.push(s.values);
      const c = color(s, i);
      const opt = {label: s.label, stroke: c, width: 1.25, value: (u, v) => human(v, spec.unit)};
      if (s.fill) opt.fill = c + "33";
      if (s.points) Object.assign(opt, {paths: () => null, points: {show: true, size: 7, fill: c, stroke: c}});
      series.push(opt);
    });
    if (!record(el, spec, spec.series.map((s) => stats(s.label, s.values)), scaleOf(spec)).points) return empty(el, spec);
    return mount(el, baseOpts(el, spec, series), data);
  }

  /* Stacked areas: each layer is drawn as the running sum and filled down to the one below. */
  function stacked(el, spec) {
    const xs = decodeX(spec), data = [xs], series = [{label: "time (UTC)"}], bands = [];
    const raw = spec.series.map((s) => s.values);
    let acc = new Array(xs.length).fill(0);
    raw.forEach((vals, i) => {
      acc = acc.map((a, j) => (vals[j] === null || a === null ? null : a + vals[j]));
      data.push(acc.slice());
      const s = spec.series[i], c = color(s, i);
      series.push({label: s.label, stroke: c, fill: c + "aa", width: 1, points: {show: false},
        value: (u, v, si, idx) => human(idx === null ? null : raw[si - 1][idx], spec.unit)});
      if (i > 0) bands.push({series: [i + 1, i], fill: c + "aa"});
    });
    const opts = baseOpts(el, spec, series);
    opts.bands = bands;
    if (!record(el, spec, spec.series.map((s) => stats(s.label, s.values)), scaleOf(spec)).points) return empty(el, spec);
    return mount(el, opts, data);
  }

  function histogram(el, spec) {
    const xs = Float64Array.from(spec.edges.slice(0, -1));
    const c = spec.color || PALETTE[0];
    const series = [{label: spec.xLabel || "value", value: (u, v) => human(v, spec.unit)},
      {label: "steps", stroke: c, fill: c + "aa", points: {show: false},
       paths: uPlot.paths.bars({size: [0.95, 100], align: 1})}];
    const opts = baseOpts(el, spec, series);
    opts.axes[0].values = (u, vals) => vals.map((v) => human(v, spec.unit));
    opts.axes[1].values = (u, vals) => vals.map((v) => String(v));
    opts.scales.x = {time: false, range: [spec.edges[0], spec.edges[spec.edges.length - 1]]};
    const reg = record(el, spec, [stats("steps", spec.counts)], {total: spec.counts.reduce((a, b) => a + b, 0)});
    if (!reg.total) return empty(el, spec);
    return mount(el, opts, [xs, spec.counts]);
  }

  function mount(el, opts, data) {
    el.textContent = "";
    const plot = new uPlot(opts, data, el);
    plots.push(() => plot.setSize({width: widthOf(el), height: plot.height}));
    if (opts.scales.x.time) {
      // a new chart joins zoomed where the others are zoomed (a zoom survives a redraw)
      const other = [...timeGroup.plots].find((p) => p.root.isConnected);
      timeGroup.plots.add(plot);
      if (other && isZoomed(other)) follow(other, "x");
    }
    return plot;
  }

  /* A value in 0..100 to a colour: white-blue-red, easy to read in print. */
  function heat(v) {
    if (v === null || v === undefined) return [240, 240, 240];
    const t = Math.max(0, Math.min(1, v / 100));
    if (t < 0.5) { const k = t / 0.5; return [255 - 200 * k, 255 - 120 * k, 255 - 30 * k]; }
    const k = (t - 0.5) / 0.5; return [55 + 170 * k, 135 - 105 * k, 225 - 190 * k];
  }

  function heatmap(el, spec) {
    const rows = spec.values.length, cols = rows ? spec.values[0].length : 0;
    record(el, spec, spec.values.map((r, i) => stats(spec.rows[i], r)), {rows, cols});
    el.textContent = "";
    const canvas = document.createElement("canvas"), tip = document.createElement("div");
    tip.className = "sc-tip"; el.append(titleOf(spec), canvas, heatLegend(spec), tip);
    el.classList.add("sc-heatmap");
    const paint = () => paintHeatmap(canvas, spec, rows, cols);
    paint(); plots.push(paint);
    if (cols) timeGroup.heatmaps.add({canvas, paint});  // follows the time charts' zoom
    setAlt(canvas, summary(spec, registry[spec.id], cols ? [(spec.t0 || 0) + spec.x[0], (spec.t0 || 0) + spec.x[cols - 1]] : null));
    canvas.addEventListener("mousemove", (e) => heatTip(e, canvas, spec, rows, cols, tip));
    canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
    markDrawn(el, spec);
  }

  const GUTTER = 64, AXIS = 22;

  function titleOf(spec) {
    const t = document.createElement("div");
    t.className = "sc-title"; t.textContent = spec.title || "";
    return t;
  }

  function paintHeatmap(canvas, spec, rows, cols) {
    const dpr = devicePixelRatio || 1, w = widthOf(canvas.parentElement);
    const rowH = Math.max(4, Math.min(18, Math.floor(280 / Math.max(rows, 1))));
    const h = rows * rowH + AXIS;
    canvas.style.width = w + "px"; canvas.style.height = h + "px";
    canvas.width = w * dpr; canvas.height = h * dpr;
    const c = canvas.getContext("2d"); c.scale(dpr, dpr);
    const img = new ImageData(Math.max(cols, 1), Math.max(rows, 1));
    spec.values.forEach((r, i) => r.forEach((v, j) => {
      const p = (i * cols + j) * 4, rgb = heat(v);
      img.data[p] = rgb[0]; img.data[p + 1] = rgb[1]; img.data[p + 2] = rgb[2]; img.data[p + 3] = 255;
    }));
    const off = document.createElement("canvas"); off.width = img.width; off.height = img.height;
    off.getContext("2d").putImageData(img, 0, 0);
    c.imageSmoothingEnabled = false;
    // the columns where their times fall in the range shown (the time charts'), clipped to it
    const [lo, hi] = heatRange(spec, cols), [a, b] = heatExtent(spec, cols), px = (w - GUTTER) / (hi - lo);
    c.save(); c.beginPath(); c.rect(GUTTER, 0, w - GUTTER, rows * rowH); c.clip();
    c.drawImage(off, GUTTER + (a - lo) * px, 0, (b - a) * px, rows * rowH);
    c.restore();
    c.fillStyle = "#333"; c.font = "11px sans-serif"; c.textBaseline = "middle";
    const every = Math.ceil(12 / rowH);
    spec.rows.forEach((label, i) => { if (i % every === 0) c.fillText(label, 4, i * rowH + rowH / 2); });
    heatAxis(c, spec, cols, w, rows * rowH);
  }

  /* [first, end] of a heatmap's columns (unix s): the last column as wide as the others. */
  function heatExtent(spec, cols) {
    const x0 = (spec.t0 || 0) + spec.x[0], x1 = (spec.t0 || 0) + spec.x[cols - 1];
    return [x0, cols > 1 ? x1 + (x1 - x0) / (cols - 1) : x0 + 1];
  }

  /* The time range a heatmap shows: the time charts' zoom, else the page's domain, else
   * its own columns. */
  function heatRange(spec, cols) {
    const own = heatExtent(spec, cols), r = timeGroup.view || timeGroup.domain;
    if (!r) return own;
    return timeGroup.view ? r : [Math.min(r[0], own[0]), Math.max(r[1], own[1])];
  }

  function heatAxis(c, spec, cols, w, y) {
    if (!cols) return;
    const [t0, t1] = timeGroup.view || timeGroup.domain ? heatRange(spec, cols)
      : [(spec.t0 || 0) + spec.x[0], (spec.t0 || 0) + spec.x[cols - 1]];
    const plot = w - GUTTER, span = Math.max(t1 - t0, 1e-9);
    const {ticks, labels} = timeTicks(t0, t1, plot, c.font);
    c.textBaseline = "top"; c.textAlign = "center";
    ticks.forEach((t, k) => {
      const px = GUTTER + plot * (t - t0) / span, half = c.measureText(labels[k]).width / 2;
      if (px - half >= 0 && px + half <= w) c.fillText(labels[k], px, y + 5);  // never cut at the edges
    });
  }

  /* The colour scale of a heatmap: a gradient from 0 to 100 % and the "no data" grey. */
  function heatLegend(spec) {
    const box = document.createElement("div"), bar = document.createElement("span");
    box.className = "sc-heat-legend";
    const stops = [0, 25, 50, 75, 100].map((v) => `rgb(${heat(v).map(Math.round).join(",")}) ${v}%`);
    bar.className = "sc-heat-scale"; bar.style.background = `linear-gradient(to right, ${stops.join(", ")})`;
    const label = (text) => { const t = document.createElement("span"); t.textContent = text; return t; };
    const none = document.createElement("i");
    none.style.background = `rgb(${heat(null).join(",")})`;
    box.append(label(human(0, spec.unit || "%")), bar, label(human(100, spec.unit || "%")), none, label("no data"));
    return box;
  }

  function heatTip(e, canvas, spec, rows, cols, tip) {
    const r = canvas.getBoundingClientRect(), w = r.width;
    const rowH = (r.height - AXIS) / Math.max(rows, 1);
    const [lo, hi] = heatRange(spec, cols), [a, b] = heatExtent(spec, cols);
    const at = lo + (e.clientX - r.left - GUTTER) / (w - GUTTER) * (hi - lo);
    const j = Math.floor((at - a) / (b - a) * cols);
    const i = Math.floor((e.clientY - r.top) / rowH);
    if (i < 0 || i >= rows || j < 0 || j >= cols) { tip.style.display = "none"; return; }
    const t = new Date(((spec.t0 || 0) + spec.x[j]) * 1e3).toISOString().slice(0, 19).replace("T", " ");
    tip.textContent = `${spec.rows[i]}  ${t} UTC  ${human(spec.values[i][j], spec.unit || "%")}`;
    tip.style.display = "block";
    const box = canvas.parentElement.getBoundingClientRect();
    tip.style.left = (e.clientX - box.left + 12) + "px"; tip.style.top = (e.clientY - box.top + 12) + "px";
  }

  /* A percentage as every bar, legend and table prints it: one decimal (the page's
   * numbers come rounded so by analysis.pagescale.percent, so this only writes them). */
  const percent = (p) => (p === null || p === undefined || Number.isNaN(p) ? "--" : p.toFixed(1) + "%");

  /* Share i of a bar in %: the page's (spec.percents, rounded once where the tables are
   * written), else computed from the values. */
  function sharePercent(spec, i, total) {
    if (spec.percents) return spec.percents[i];
    return Math.round(1000 * (spec.values[i] || 0) / total) / 10;
  }

  /* One horizontal bar split into shares (the total step split). */
  function share(el, spec) {
    const total = spec.values.reduce((a, b) => a + (b || 0), 0) || 1;
    record(el, spec, [stats("share", spec.values)], {total});
    el.textContent = "";
    const bar = document.createElement("div"), legend = document.createElement("div");
    bar.className = "sc-share"; legend.className = "sc-share-legend"; el.append(titleOf(spec));
    spec.labels.forEach((label, i) => {
      const c = color({label}, i), pct = sharePercent(spec, i, total);
      const seg = document.createElement("span");
      seg.style.width = pct + "%"; seg.style.background = c; seg.title = `${label}: ${percent(pct)}`;
      bar.append(seg);
      const item = document.createElement("span"), sw = document.createElement("i");
      sw.style.background = c; item.append(sw, `${label} ${percent(pct)} (${human(spec.values[i], spec.unit)})`);
      legend.append(item);
    });
    el.append(bar, legend);
    setAlt(bar, summary(spec, registry[spec.id], null));
    markDrawn(el, spec);
  }

  const KINDS = {timeseries, stacked, histogram, heatmap, share, empty};

  function draw(el, spec) {
    try {
      const kind = KINDS[spec.kind];
      if (!kind) throw new Error("unknown chart kind " + spec.kind);
      return kind(el, spec);
    } catch (err) {
      el.dataset.error = String(err);
      el.textContent = "chart failed: " + err;
      throw err;
    }
  }

  function drawAll(root, specs) {
    for (const el of root.querySelectorAll("[data-chart]")) {
      const spec = specs[el.dataset.chart];
      if (spec) draw(el, Object.assign({id: el.dataset.chart}, spec));
    }
  }

  function resizeAll() {
    for (const resize of plots) resize();
  }

  let pending = null;
  global.addEventListener("resize", () => { clearTimeout(pending); pending = setTimeout(resizeAll, 100); });
  global.addEventListener("beforeprint", resizeAll);

  /* A number for a table: integers whole, else 3 significant digits (report/_html.py's
   * fmt_number follows the same rule; tests/test_charts_ui.py checks that they agree). */
  function number(v) {
    if (v === null || v === undefined || typeof v !== "number" || Number.isNaN(v)) return v === null || v === undefined ? "--" : String(v);
    if (Number.isInteger(v) || Math.abs(v) >= 1000) return v.toFixed(0);
    if (v !== 0 && Math.abs(v) < 1e-3) return Number(v.toExponential(2)).toExponential();
    return String(Number(v.toPrecision(3)));
  }

  global.StepscopeCharts = {draw, drawAll, resizeAll, registry, human, number, percent, timeTicks,
    setDomain, isZoomed, timeGroup, version: "1"};
})(window);
