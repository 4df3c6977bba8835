/* One job: live charts, node/rank selection, rule findings that jump the charts, the
 * profiling artifacts, and the controls (interval, profiling, stop, report). */
(function () {
  "use strict";
  const {api, h, iso, dur, setConn, showChart, resetCharts, pages} = window.Dash;
  const CHART_MS = 1000, DETAIL_MS = 2000, ACK_MS = 500, ACK_WAIT_MS = 60000;
  const SYSTEM = ["cpu", "cores", "gpu_util", "gpu_mem", "memory", "iowait", "disk", "net"];
  const STEPS = ["step_duration", "step_split", "step_share"];
  const $ = (id) => document.getElementById(id);
  const S = {name: null, detail: null, view: null, focus: null, timers: [], gen: 0};
  const base = () => "/api/jobs/" + encodeURIComponent(S.name);
  const running = () => S.detail && S.detail.status === "Running";

  function every(ms, fn) {
    const gen = S.gen;
    const tick = async () => {
      if (gen !== S.gen) return;
      const began = Date.now();
      if ($("live").checked || !S.detail) await fn();
      // A fixed rate, not a fixed pause: a slow answer must not delay the next poll too.
      const wait = Math.max(0, (running() ? ms : ms * 5) - (Date.now() - began));
      if (gen === S.gen) S.timers.push(setTimeout(tick, wait));
    };
    tick();
  }

  function range() {
    if (S.view) return S.view;
    const span = $("span").value;
    if (span === "all" || !S.detail) return {start: null, end: null};
    const end = S.detail.end_time || S.detail.now;
    return {start: end - Number(span), end: null};
  }

  function query(extra) {
    const r = range(), q = new URLSearchParams(extra);
    if (r.start !== null) q.set("start", r.start.toFixed(3));
    if (r.end !== null) q.set("end", r.end.toFixed(3));
    q.set("buckets", "1000");
    return q.toString();
  }

  function bands() {
    const f = S.focus;
    if (!f || f.start === null || f.start === undefined) return [];
    const t0 = S.detail.start_time || 0;
    return [{start: f.start - t0, end: (f.end ?? f.start) - t0, label: f.rule, severity: f.severity}];
  }

  async function loadSystem() {
    const node = $("node").value;
    if (!node) { SYSTEM.forEach((id) => showChart(id, null)); return; }
    const data = await api(`${base()}/system?${query({node})}`);
    SYSTEM.forEach((id) => showChart(id, data.charts[id], bands()));
    $("interval-now").textContent = data.interval_ms ? `now every ${data.interval_ms} ms` : "";
    document.body.dataset.lastSample = String(data.last);
    document.body.dataset.intervalMs = String(data.interval_ms);
    (window.__drawn = window.__drawn || []).push([data.last, Date.now() / 1e3]);
  }

  async function loadSteps() {
    const data = await api(`${base()}/steps?${query({rank: $("rank").value || 0, phase: $("phase").value})}`);
    STEPS.forEach((id) => showChart(id, data.charts[id], id === "step_share" ? undefined : bands()));
    document.body.dataset.lastStep = String(data.last_step);
  }

  async function loadCharts() {
    try {
      await Promise.all([loadSystem(), loadSteps()]);
    } catch (err) { setConn(false, err.message); }
  }

  function fillSelect(sel, values) {
    const now = [...sel.options].map((o) => o.value).join("|");
    if (now === values.join("|")) return;
    const keep = sel.value;
    sel.replaceChildren(...values.map((v) => h("option", {value: v, textContent: v})));
    if (values.includes(keep)) sel.value = keep;
  }

  function renderHead(d) {
    $("job-name").textContent = d.name;
    $("crumb").textContent = " / " + d.name;
    document.title = d.name + " · stepscope";
    const st = $("job-status");
    st.textContent = d.status; st.className = "status " + d.status; st.title = d.reason || "";
    const facts = [`started ${iso(d.start_time)} UTC`, `ran ${dur((d.end_time || d.now) - d.start_time)}`,
      `${d.steps} training steps`, `nodes: ${Object.keys(d.nodes).join(", ") || "none"}`];
    if (d.reason) facts.push(d.reason);
    $("job-facts").textContent = facts.join(" · ");
    fillSelect($("node"), Object.keys(d.nodes));
    fillSelect($("rank"), d.ranks.map(String));
    for (const el of document.querySelectorAll(".running-only")) el.hidden = !running();
    $("not-running").hidden = running();
    renderArtifacts(d);
    renderFaults(d);
  }

  /* What stepscope's own collection hit (helper deaths, gaps, full disk, store outages). */
  function renderFaults(d) {
    const faults = (d.faults || []).slice().sort((a, b) => (a.time || 0) - (b.time || 0));
    $("faults").replaceChildren(...faults.map((f) => h("li", {textContent:
      `${f.component || "?"}${f.node ? " · " + f.node : ""}: ${f.error || ""} (x${f.count || 1})`})));
    $("faults-empty").hidden = faults.length > 0;
  }

  function renderArtifacts(d) {
    const items = [];
    for (const a of d.artifacts || []) {
      const files = (a.files && a.files.length ? a.files : [a.path]).filter(Boolean);
      const label = `${a.kind} · rank ${a.rank} · steps ${a.start_step}-${a.end_step}`;
      items.push(h("li", {}, h("span", {textContent: label + (a.truncated ? " (truncated)" : "") + ": "}),
        ...files.map((f) => h("a", {className: "artifact", textContent: f.split("/").pop(),
          href: `${base()}/artifacts/${f.split("/").map(encodeURIComponent).join("/")}`}))));
    }
    $("artifacts").replaceChildren(...items);
    $("artifacts-empty").hidden = items.length > 0;
  }

  async function loadDetail() {
    try {
      S.detail = await api(base());
      renderHead(S.detail);
    } catch (err) { setConn(false, err.message); }
  }

  async function loadRules() {
    try {
      const answer = await api(`${base()}/rules`), rules = answer.rules;
      $("rules").tBodies[0].replaceChildren(...rules.flatMap(ruleRows));
      $("rules-empty").hidden = rules.length > 0;
      renderDiagnosis(answer);
    } catch (err) { setConn(false, err.message); }
  }

  /* The problems ranked by the time they cost (the report's Diagnosis, same words);
   * "evidence" jumps the charts to the worst finding, or shows the rule's row. */
  function renderDiagnosis(answer) {
    $("diagnosis-summary").textContent = (answer.diagnosis_checks || {}).summary || "";
    $("diagnosis").replaceChildren(...(answer.diagnosis || []).map((e) => h("li", {className: "diag-entry"},
      h("div", {className: "diag-msg", textContent: e.message}),
      e.recommendation ? h("div", {className: "diag-fix", textContent: "Fix: " + e.recommendation}) : null,
      h("div", {className: "muted"}, h("button", {type: "button", className: "jump evidence",
        textContent: "evidence: " + e.rule, onclick: () => evidence(e)}),
        h("span", {textContent: ` ${e.evidence.findings} finding(s)`})))));
  }

  function evidence(e) {
    const ev = e.evidence;
    if (ev.start !== null && ev.start !== undefined) jump(e.rule, Object.assign({severity: e.severity}, ev));
    else $("rules-panel").scrollIntoView({behavior: "instant", block: "start"});
  }

  function ruleRows(r) {
    const status = r.verdict ? `${r.status} (${r.verdict})` : r.status;
    const row = h("tr", {className: "rule " + (r.verdict || r.status)},
      h("td", {textContent: r.rule}), h("td", {textContent: status}),
      h("td", {className: "num", textContent: String(r.triggers ?? "")}),
      h("td", {textContent: r.message || r.reason || ""}));
    const findings = (r.findings || []).slice(0, 10).map((f) => h("tr", {className: "finding"},
      h("td", {}), h("td", {textContent: (f.severity ?? 0).toFixed(2)}), h("td", {}),
      h("td", {}, f.start ? h("button", {type: "button", className: "jump", textContent: "show",
        onclick: () => jump(r.rule, f)}) : null, h("span", {textContent: " " + f.message}))));
    return [row, ...findings];
  }

  /* A finding: show a window around it (server-side, full resolution) and shade it. */
  function jump(rule, f) {
    const len = Math.max((f.end ?? f.start) - f.start, 1), pad = Math.max(30, 2 * len);
    S.view = {start: f.start - pad, end: (f.end ?? f.start) + pad};
    S.focus = Object.assign({rule}, f);
    if (f.node && [...$("node").options].some((o) => o.value === f.node)) $("node").value = f.node;
    if (f.rank !== null && f.rank !== undefined) $("rank").value = String(f.rank);
    $("range").textContent = `${rule}: ${iso(S.view.start)} - ${iso(S.view.end)} UTC`;
    $("range-reset").hidden = false;
    $("live").checked = false;
    resetCharts();
    loadCharts().then(() => $("charts").scrollIntoView({behavior: "instant", block: "start"}));
  }

  function backToLive() {
    S.view = null; S.focus = null;
    $("range").textContent = ""; $("range-reset").hidden = true; $("live").checked = true;
    resetCharts();
    loadCharts();
  }

  /* A control request: POST, then poll its acknowledgement and show the answer. */
  async function request(path, body, out) {
    out.dataset.state = "sending"; out.textContent = "sending...";
    let name;
    try {
      name = (await api(`${base()}/${path}`, {json: body})).request;
    } catch (err) {
      out.dataset.state = "error"; out.textContent = "refused: " + err.message; return;
    }
    out.dataset.state = "pending"; out.dataset.request = name;
    out.textContent = "requested; waiting for the job to take it...";
    const until = Date.now() + ACK_WAIT_MS;
    while (Date.now() < until && S.name) {
      await new Promise((r) => setTimeout(r, ACK_MS));
      try {
        const st = await api(`${base()}/control/${encodeURIComponent(name)}`);
        if (!st.pending) {
          out.dataset.state = st.ack.accepted ? "accepted" : "rejected";
          out.textContent = (st.ack.accepted ? "done: " : "rejected: ") + (st.ack.detail || "");
          return;
        }
      } catch (err) { setConn(false, err.message); }
    }
    out.dataset.state = "timeout";
    out.textContent = "no answer yet: it applies at the job's next step boundary";
  }

  function profileBody() {
    const num = (id) => ($(id).value === "" ? null : Number($(id).value));
    const t = $("p-start-time").value.trim();
    return {detailed: $("p-detailed").checked, python: $("p-python").value || null,
      timer: $("p-timer").value, dataloader: $("p-dataloader").checked,
      start_step: num("p-start-step"), num_steps: num("p-num-steps"),
      start_time: t === "" ? null : (t === "now" ? "now" : Number(t)), duration: num("p-duration")};
  }

  $("interval-apply").addEventListener("click", () =>
    request("interval", {interval_ms: Number($("interval").value)}, $("interval-status")));
  $("profile-form").addEventListener("submit", (e) => {
    e.preventDefault(); request("profile", profileBody(), $("profile-status"));
  });
  $("stop").addEventListener("click", () => {
    if (window.confirm(`Stop the training job ${S.name}? It ends as Stopped.`)) {
      request("stop", {reason: "stopped from the dashboard"}, $("stop-status"));
    }
  });
  $("refresh").addEventListener("click", () => Promise.all([loadDetail(), loadRules(), loadCharts()]));
  $("range-reset").addEventListener("click", backToLive);
  for (const id of ["node", "rank", "phase", "span"]) $(id).addEventListener("change", () => { resetCharts(); loadCharts(); });

  pages.job = {
    async enter(name) {
      S.name = name; S.detail = null; S.view = null; S.focus = null; S.gen++;
      resetCharts();
      $("report-link").href = `${base()}/report.html`;
      $("report-link").setAttribute("download", name + "-report.html");
      await loadDetail();
      every(CHART_MS, loadCharts);
      every(DETAIL_MS, loadDetail);
      every(DETAIL_MS, loadRules);  // a finding within seconds (cached by file signature)
    },
    leave() { S.gen++; S.timers.forEach(clearTimeout); S.timers = []; S.name = null; },
  };
})();
