/* stepscope dashboard: the kernel panel of a job page. For each window with a PyTorch
 * trace (GET /api/jobs/<job>/kernels), its host operators beside its kernel breakdown:
 * the device's busy share and idle gaps, device time by kind, the top kernels with the
 * operator that launched them (docs/profiling.md, "Kernel breakdown"). Fetched again
 * only when the job has a new profiling window; every text is set with textContent. */
(function (global) {
  "use strict";
  const {api, h} = global.Dash;
  const NAME_CHARS = 70; // kernel names are whole C++ templates: the start tells them apart
  const NONE = "No window with a PyTorch trace yet (a detailed profiling window keeps one).";
  let shown = null; // what is drawn: the job and its number of windows

  const $ = (id) => document.getElementById(id);
  const ms = (s) => (s === null || s === undefined ? "unknown" : `${(s * 1e3).toFixed(2)} ms`);
  const share = (x) => (x === null || x === undefined ? "unknown" : `${Math.round(x * 100)}%`);
  const cut = (name) => (name.length > NAME_CHARS ? name.slice(0, NAME_CHARS) + "…" : name);

  function table(caption, head, rows) {
    return h("table", {className: "grid kernel-table"}, h("caption", {textContent: caption}),
      h("thead", {}, h("tr", {}, ...head.map(([t, num]) => h("th", {textContent: t, className: num ? "num" : ""})))),
      h("tbody", {}, ...rows.map((cells) => h("tr", {}, ...cells.map((c, i) =>
        h("td", {textContent: c, className: head[i][1] ? "num" : ""}))))));
  }

  function busy(d) {
    const text = `GPU ${d.device} was busy ${share(d.busy_share)} of its active ${ms(d.span_seconds)}`;
    if (!d.gaps) return text + ", with no idle gap.";
    return `${text}; idle ${ms(d.idle_seconds)} in ${d.gaps} gaps, the longest ${ms(d.longest_gap_seconds)} ` +
      `while the host ran ${d.longest_gap_operator || "nothing recorded"}.`;
  }

  function operators(ops) {
    if (!ops.length) return h("p", {className: "muted", textContent: "No operator table in this window's record."});
    return table("Host operators (top by the profiler)", [["operator"], ["count", 1], ["self CPU", 1], ["self device", 1]],
      ops.map((o) => [String(o.name), String(o.count ?? ""), ms((o.self_cpu_us ?? NaN) / 1e6),
        ms((o.self_device_us ?? NaN) / 1e6)]));
  }

  function breakdown(k) {
    if (k.not_applicable) return [h("p", {className: "muted", textContent: `No kernel breakdown: ${k.not_applicable}.`})];
    const total = k.kinds.reduce((a, x) => a + x.seconds, 0);
    const kinds = table("Device time by kind", [["kind"], ["count", 1], ["time", 1], ["share", 1], ["GB/s", 1], ["pageable", 1]],
      k.kinds.map((x) => [x.kind, String(x.count), ms(x.seconds), share(total ? x.seconds / total : null),
        x.gbps === null || x.gbps === undefined ? "" : x.gbps.toFixed(1), x.pageable === null || x.pageable === undefined ? "" : String(x.pageable)]));
    const top = table("Top kernels", [["kernel"], ["kind"], ["count", 1], ["time", 1], ["launched by"]],
      k.top.map((x) => [cut(x.name), x.kind, String(x.count), ms(x.seconds), x.operator || "unknown"]));
    return [...k.devices.map((d) => h("p", {className: "kernel-busy", textContent: busy(d)})), kinds, top];
  }

  function block(w) {
    const label = `${w.kind} · rank ${w.rank} · steps ${w.start_step}-${w.end_step}`;
    return h("div", {className: "kernel-window", dataset: {rank: String(w.rank), steps: `${w.start_step}-${w.end_step}`}},
      h("h3", {textContent: label}),
      h("div", {className: "kernel-grid"}, h("div", {}, operators(w.operators || [])),
        h("div", {}, ...breakdown(w.kernels))));
  }

  /* Draw the panel of the job at ``base``, fetched again when its windows changed. */
  async function load(base, windows) {
    const key = `${base}#${windows}`;
    if (key === shown) return;
    shown = key;
    try {
      const data = await api(`${base}/kernels`);
      if (shown !== key) return; // another job (or a newer window) meanwhile
      $("kernels").replaceChildren(...data.windows.map(block));
      $("kernels-empty").textContent = NONE;
      $("kernels-empty").hidden = data.windows.length > 0;
    } catch (err) {
      shown = null; // try again at the next refresh
      $("kernels-empty").textContent = `Kernel breakdown unavailable: ${err.message}`;
      $("kernels-empty").hidden = false;
    }
  }

  function reset() {
    shown = null;
    $("kernels").replaceChildren();
    $("kernels-empty").textContent = NONE;
    $("kernels-empty").hidden = false;
  }

  global.DashKernels = {load, reset};
})(window);
