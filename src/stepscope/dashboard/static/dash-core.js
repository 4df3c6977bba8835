/* stepscope dashboard: API calls, small DOM helpers, live charts, routing.
 *
 * Every text that comes from a job is set with textContent (never innerHTML), so
 * names, messages and paths cannot inject markup. The token (dash-token.js) is
 * sent in the X-Stepscope-Token header with every request (the server requires it
 * on POSTs); a POST refused for want of it asks for it and is sent again.
 */
(function (global) {
  "use strict";
  const {DashToken} = global;

  async function api(path, opts) {
    const init = Object.assign({headers: {}, cache: "no-store"}, opts || {});
    if (init.json !== undefined) {
      init.method = init.method || "POST";
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(init.json);
      delete init.json;
    }
    for (;;) {
      const token = DashToken.get();
      if (token) init.headers["X-Stepscope-Token"] = token;
      const res = await fetch(path, init);
      const data = await res.json().catch(() => ({error: res.statusText}));
      setConn(true);
      if (res.ok) return data;
      // A control refused for want of the token (a tab opened without it): ask, send again.
      if (init.method === "POST" && DashToken.refusedForToken(res.status, data.error)
          && await DashToken.ask(data.error)) continue;
      throw Object.assign(new Error(data.error || `HTTP ${res.status}`), {status: res.status});
    }
  }

  function setConn(ok, why) {
    const el = document.getElementById("conn");
    el.textContent = ok ? "" : "connection lost: " + (why || "");
    el.classList.toggle("bad", !ok);
  }

  /* h("td", {className: "x"}, "text", child): an element; strings become text nodes. */
  function h(tag, props, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "dataset") Object.assign(el.dataset, v);
      else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
      else el[k] = v;
    }
    for (const c of children) if (c !== null && c !== undefined) el.append(c);
    return el;
  }

  const iso = (t) => (t ? new Date(t * 1e3).toISOString().replace("T", " ").slice(0, 19) : "--");
  function dur(s) {
    if (s === null || s === undefined) return "--";
    s = Math.round(s);
    const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600);
    const mm = Math.floor((s % 3600) / 60), ss = s % 60;
    return (d ? d + "d " : "") + (d || hh ? hh + "h " : "") + (d || hh || mm ? mm + "m " : "") + ss + "s";
  }

  /* Live charts: a uPlot chart whose series are unchanged takes the new data with
   * setData (a user's zoom is kept); anything else is drawn anew. */
  const live = {};
  const HEATMAP_MS = 5000;  // a heatmap is redrawn whole: at most this often while live

  /* A chart is drawn anew when its series or its y-range top (warm-up steps above it) change. */
  function seriesKey(spec) {
    return spec.kind + "|" + (spec.series || []).map((s) => s.label).join(",") + "|" + (spec.yMax || "");
  }

  function uplotData(spec) {
    const t0 = spec.t0 || 0, xs = Float64Array.from(spec.x, (x) => t0 + x);
    if (spec.kind !== "stacked") return [xs, ...spec.series.map((s) => s.values)];
    let acc = new Array(xs.length).fill(0);
    return [xs, ...spec.series.map((s) => (acc = acc.map((a, j) =>
      (s.values[j] === null || a === null ? null : a + s.values[j]))))];
  }

  function record(id, el, spec) {
    const reg = StepscopeCharts.registry[id];
    if (!reg) return;
    const stats = spec.series.map((s) => {
      const v = s.values.filter((x) => x !== null && !Number.isNaN(x));
      return {label: s.label, n: v.length, min: v.length ? Math.min(...v) : null,
        max: v.length ? Math.max(...v) : null, first: v[0] ?? null, last: v[v.length - 1] ?? null};
    });
    reg.series = stats;
    reg.points = stats.reduce((a, s) => a + s.n, 0);
    el.dataset.points = String(reg.points);
  }


  function showChart(id, spec, bands) {
    const el = document.querySelector(`[data-chart="${id}"]`);
    if (!el) return;
    el.hidden = !spec;
    if (!spec) { delete live[id]; el.textContent = ""; el.removeAttribute("data-drawn"); return; }
    spec.id = id;
    const old = live[id];
    if (old && old.plot && old.key === seriesKey(spec) && old.t0 === spec.t0) {
      old.bands.length = 0; old.bands.push(...(bands || []));
      const keep = StepscopeCharts.isZoomed(old.plot);  // against the shared time axis
      old.plot.setData(uplotData(spec), !keep);
      if (keep) old.plot.redraw();
      record(id, el, spec);
      return;
    }
    if (old && !old.plot && spec.kind === "heatmap" && Date.now() - old.at < HEATMAP_MS) return;
    spec.bands = (bands || []).slice();
    const plot = StepscopeCharts.draw(spec.kind === "heatmap" ? wrapper(el) : el, spec);
    if (spec.kind === "heatmap") record(id, el, {series: spec.values.map((v, i) => ({label: spec.rows[i], values: v}))});
    el.dataset.drawn = "1";
    const isPlot = plot && typeof plot.setData === "function";
    live[id] = {plot: isPlot ? plot : null, key: seriesKey(spec), t0: spec.t0, bands: spec.bands,
      at: Date.now()};
  }

  /* A heatmap is drawn into a fresh inner element: the chart layer keeps a repaint
   * function per heatmap drawn, and the old one must keep a (detached) parent. */
  function wrapper(el) {
    const inner = document.createElement("div");
    el.replaceChildren(inner);
    return inner;
  }

  function resetCharts() {
    for (const id of Object.keys(live)) delete live[id];
    for (const el of document.querySelectorAll("[data-chart]")) {
      el.textContent = ""; el.removeAttribute("data-drawn"); el.removeAttribute("data-points");
    }
  }

  /* Routing: #/ is the jobs list, #/job/<name> a job page, #/compare/<base>/<new> the
   * comparison of two sides (names URI-encoded, a side's runs joined by commas); any other hash is the jobs
   * list, and a job address that does not decode is shown as naming no job. */
  const pages = {};
  function route() {
    const m = global.location.hash.match(/^#\/job\/(.+)$/);
    const c = global.location.hash.match(/^#\/compare\/([^/]+)\/([^/]+)$/);
    for (const p of Object.values(pages)) p.leave();
    document.getElementById("jobs-view").hidden = !!m || !!c;
    document.getElementById("job-view").hidden = !m;
    document.getElementById("compare-view").hidden = !c;
    if (c) { pages.compare.enter(c[1], c[2]); return; }
    if (!m) { pages.jobs.enter(); return; }
    let name;
    try { name = decodeURIComponent(m[1]); } catch (err) {
      pages.job.missing(m[1], `the address #/job/${m[1]} is malformed (${err.message})`);
      return;
    }
    pages.job.enter(name);
  }
  global.addEventListener("hashchange", route);
  global.addEventListener("DOMContentLoaded", route);

  global.Dash = {api, h, iso, dur, setConn, showChart, resetCharts, pages, live,
    get token() { return DashToken.get(); }};
})(window);
