/* The jobs list: sortable, filterable, refreshed every 2 s while "live" is on. */
(function (global) {
  "use strict";
  const {api, h, iso, dur, setConn, pages} = window.Dash;
  const POLL_MS = 2000;
  let rows = [], sortKey = "start_time", sortDir = -1, timer = null;
  const picked = new Set();  // the ticked jobs' names, kept across refreshes
  const chosen = new Map();  // a ticked job's side ("A" or "B") where the user chose it

  function matches(row, text) {
    if (!text) return true;
    text = text.toLowerCase();
    return String(row.name).toLowerCase().includes(text) ||
      String(row.status).toLowerCase().includes(text);
  }

  function compare(a, b) {
    const x = a[sortKey], y = b[sortKey];
    if (x === y) return 0;
    if (x === null || x === undefined) return 1;
    if (y === null || y === undefined) return -1;
    return (x < y ? -1 : 1) * sortDir;
  }

  function render() {
    const body = document.querySelector("#jobs tbody");
    const text = document.getElementById("filter").value.trim();
    const shown = rows.filter((r) => matches(r, text)).sort(compare);
    body.replaceChildren(...shown.map((r) => h("tr", {dataset: {job: r.name}},
      h("td", {}, h("input", {type: "checkbox", className: "pick", checked: picked.has(r.name),
        ariaLabel: "compare " + r.name, onchange: (e) => pick(r.name, e.target.checked)}),
        sideSelect(r.name)),
      h("td", {}, h("a", {href: "#/job/" + encodeURIComponent(r.name), textContent: r.name})),
      h("td", {}, h("span", {className: "status " + r.status, textContent: r.status,
        title: r.reason || ""})),
      h("td", {textContent: iso(r.start_time)}),
      h("td", {textContent: dur(r.duration_s)}),
      h("td", {className: "num", textContent: StepscopeCharts.number(r.steps)}),
      h("td", {className: "num" + (r.rule_issues ? " issues" : ""),
        textContent: r.rules ? `${r.rule_issues} of ${r.rules}` : "--"}))));
    document.getElementById("jobs-empty").hidden = rows.length > 0;
    document.getElementById("jobs-count").textContent = `${shown.length} of ${rows.length} jobs`;
    for (const th of document.querySelectorAll("#jobs th")) {
      th.dataset.dir = th.dataset.sort === sortKey ? (sortDir > 0 ? "asc" : "desc") : "";
      th.setAttribute("aria-sort", th.dataset.dir ? th.dataset.dir + "ending" : "none");
    }
    updateCompare();  // the new rows' side selects
  }

  /* A ticked job's side: A (the baseline) or B. Unless the user chose, the ticked job
   * started first is A and every other B (of two started at once, the one ticked
   * first); a side of several jobs is compared as several runs (docs/compare.md). */
  function sideSelect(name) {
    return h("select", {className: "side", ariaLabel: "side of " + name, hidden: !picked.has(name),
      onchange: (e) => { chosen.set(name, e.target.value); updateCompare(); }},
    h("option", {value: "A", textContent: "A"}), h("option", {value: "B", textContent: "B"}));
  }

  function ticked() {  // in the order ticked, then by start (a stable sort)
    return [...picked].map((n) => rows.find((r) => r.name === n)).filter(Boolean)
      .sort((x, y) => (x.start_time ?? Infinity) - (y.start_time ?? Infinity));
  }

  function sides() {
    const jobs = ticked(), a = [], b = [];
    jobs.forEach((r, i) => ((chosen.get(r.name) ?? (i === 0 ? "A" : "B")) === "A" ? a : b).push(r.name));
    return [a, b];
  }

  function pick(name, on) {
    if (on) picked.add(name); else { picked.delete(name); chosen.delete(name); }
    updateCompare();
  }

  /* The button opens the comparison of side B against side A once each has a job. */
  function updateCompare() {
    for (const name of [...picked]) {
      if (!rows.some((r) => r.name === name)) { picked.delete(name); chosen.delete(name); }
    }
    const [a, b] = sides();
    for (const sel of document.querySelectorAll("#jobs select.side")) {
      const name = sel.closest("tr").dataset.job;
      sel.hidden = !picked.has(name);
      sel.value = a.includes(name) ? "A" : "B";
    }
    document.getElementById("compare-open").disabled = !(a.length && b.length);
    document.getElementById("compare-hint").textContent = a.length && b.length
      ? `A (the baseline): ${a.join(", ")} \u00b7 B: ${b.join(", ")}` +
        (picked.size === 2 && !chosen.size ? " (the job started first is the baseline)" : "")
      : picked.size < 2 ? `tick two jobs or more to compare them (${picked.size} ticked)`
        : `put a ticked job on each side (A: ${a.length}, B: ${b.length})`;
  }

  function openCompare() {
    const [a, b] = sides();
    if (!a.length || !b.length) return;
    const part = (names) => names.map(encodeURIComponent).join(",");
    global.location.hash = `#/compare/${part(a)}/${part(b)}`;
  }

  async function load() {
    try {
      rows = (await api("/api/jobs")).jobs;
      // a side being chosen keeps its open list: the rows are drawn at the next refresh
      if (!document.activeElement?.matches("#jobs select.side")) render();
      document.body.dataset.jobsLoaded = String(Date.now());
    } catch (err) {
      setConn(false, err.message);
    }
  }

  function schedule() {
    clearTimeout(timer);
    if (document.getElementById("jobs-live").checked) {
      timer = setTimeout(async () => { await load(); schedule(); }, POLL_MS);
    }
  }

  // A button in each sortable header: reachable with Tab, sorts on Enter and Space.
  for (const th of document.querySelectorAll("#jobs th[data-sort]")) {
    th.replaceChildren(h("button", {type: "button", className: "sort", textContent: th.textContent}));
    th.addEventListener("click", () => {
      sortDir = sortKey === th.dataset.sort ? -sortDir : 1;
      sortKey = th.dataset.sort;
      render();
    });
  }
  document.getElementById("filter").addEventListener("input", render);
  document.getElementById("jobs-refresh").addEventListener("click", load);
  document.getElementById("jobs-live").addEventListener("change", schedule);
  document.getElementById("compare-open").addEventListener("click", openCompare);

  pages.jobs = {
    enter() {
      document.getElementById("crumb").textContent = "";
      document.title = "stepscope dashboard";
      load().then(schedule);
    },
    leave() { clearTimeout(timer); timer = null; },
  };
})(window);
