/* The comparison of two jobs, or of two sides of several runs (#/compare/<base>/<new>,
 * a side's names URI-encoded and joined by commas): /api/compare's verdict, each
 * phase's table of parts with their 95% intervals (and each run's median with the
 * spread between runs) and each run's step durations on one axis (by step number),
 * the setup that differs and the rules whose verdict changed. Text from the jobs is
 * set with textContent only (dash-core.js). */
(function () {
  "use strict";
  const {api, h, showChart, live} = window.Dash;
  const ms = (s) => (s === null || s === undefined ? "--" : StepscopeCharts.number(s * 1e3) + " ms");
  const pct = (r) => `${r.value >= 1 ? "+" : ""}${(100 * (r.value - 1)).toFixed(1)}% `
    + `(${(100 * (r.low - 1)).toFixed(1)}% to ${(100 * (r.high - 1)).toFixed(1)}%)`;
  const rate = (x) => (x === null || x === undefined ? "--" : x.toFixed(2));

  function partsTable(p) {
    const rows = [["step (median)", ms(p.base_median), ms(p.new_median), p.ratio ? pct(p.ratio) : "", ""],
      ["step (p90)", ms(p.base_p90), ms(p.new_p90), "", ""],
      ["steps/s", rate(p.steps_per_s[0]), rate(p.steps_per_s[1]), "", ""]];
    if (p.runs && p.runs.known) {
      rows.push(["run medians", p.runs.base_medians.map(ms).join(", "),
        p.runs.new_medians.map(ms).join(", "),
        p.runs.spread_pct === null ? "" : `spread between runs ${p.runs.spread_pct.toFixed(1)}% (${p.runs.df} df)`, ""]);
    }
    for (const c of p.parts) {
      rows.push([c.part, ms(c.base_s), ms(c.new_s),
        `${ms(c.change.value)} (${ms(c.change.low)} to ${ms(c.change.high)})`,
        `${Math.round(100 * c.base_share)}% \u2192 ${Math.round(100 * c.new_share)}%`]);
    }
    // a part one job lacks: named, never compared as 0 (docs/compare.md "What a job lacks")
    for (const m of p.missing_parts || []) rows.push([m.part, "", "", m.text + ", not compared", ""]);
    const head = ["", "A", "B", "change (95% interval)", "share of the step"];
    return h("table", {className: "grid parts"},
      h("thead", {}, h("tr", {}, ...head.map((t) => h("th", {textContent: t})))),
      h("tbody", {}, ...rows.map((r) => h("tr", {}, ...r.map((t, i) =>
        h("td", {className: i ? "num" : "", textContent: t}))))));
  }

  function fillTable(id, rows, missing) {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren(...rows.map(([k, a, b]) => h("tr", {},
      h("td", {textContent: k}), h("td", {textContent: a ?? `(${missing})`}),
      h("td", {textContent: b ?? `(${missing})`}))));
    if (!rows.length) body.append(h("tr", {}, h("td", {colSpan: 3, className: "muted",
      textContent: "none"})));
  }

  function render(doc) {
    const c = doc.comparison, phases = document.getElementById("compare-phases");
    document.getElementById("compare-verdict").textContent =
      c.phases.length ? c.phases[0].verdict : "no phase recorded by both jobs";
    phases.replaceChildren();
    for (const p of c.phases) {
      const id = "cmp_" + p.phase;
      delete live[id];
      // the first phase's verdict is the page's: said again only beside another phase's
      const said = c.phases.length > 1 ? h("p", {className: "phase-verdict", textContent: p.verdict}) : null;
      phases.append(h("h2", {textContent: p.phase}), said, partsTable(p),
        h("div", {className: "chart", dataset: {chart: id}}));
      showChart(id, doc.charts[p.phase] || null);
    }
    for (const m of c.missing_phases || []) {
      phases.append(h("p", {className: "muted missing-phase", textContent: m.text}));
    }
    fillTable("compare-setup", c.setup.facts, "not recorded");
    fillTable("compare-rules", c.setup.rules, "not run");
    document.body.dataset.compareLoaded = String(Date.now());
  }

  window.Dash.pages.compare = {
    async enter(baseRaw, newRaw) {
      const missing = document.getElementById("compare-missing");
      let base, next;
      try {
        [base, next] = [baseRaw, newRaw].map((raw) => raw.split(",").map(decodeURIComponent));
      } catch (err) {
        missing.textContent = `the address is malformed (${err.message})`;
        return;
      }
      const [a, b] = [base.join(","), next.join(",")];
      const runs = (names) => (names.length > 1 ? `, ${names.length} runs` : "");
      document.getElementById("crumb").textContent = `/ ${b} against ${a}`;
      document.title = `${b} against ${a} · stepscope`;
      document.getElementById("compare-title").textContent = `${b} against ${a}`;
      document.getElementById("compare-sub").textContent =
        `A: ${base.join(", ")} (the baseline${runs(base)}) \u00b7 B: ${next.join(", ")}` +
        `${next.length > 1 ? ` (${next.length} runs)` : ""} \u00b7 as stepscope compare judges it`;
      document.getElementById("compare-verdict").textContent = "comparing\u2026";
      missing.textContent = "";
      try {
        const q = "?" + [...base.map((n) => "base=" + encodeURIComponent(n)),
          ...next.map((n) => "new=" + encodeURIComponent(n))].join("&");
        render(await api("/api/compare" + q));
      } catch (err) {
        document.getElementById("compare-verdict").textContent = "";
        missing.textContent = err.message;
      }
    },
    leave() {},
  };
})();
