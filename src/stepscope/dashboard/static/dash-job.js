/* One job: live charts, node/rank selection, rule findings that jump the charts, the
 * profiling artifacts, and the controls (interval, profiling, stop, report). */
(function () {
  "use strict";
  const {api, h, iso, dur, setConn, showChart, resetCharts, pages} = window.Dash;
  const CHART_MS = 1000, DETAIL_MS = 2000, ACK_MS = 500, ACK_WAIT_MS = 60000;
  const SYSTEM = ["cpu", "cores", "gpu_util", "gpu_mem", "memory", "iowait", "disk", "net"];
  const STEPS = ["step_duration", "step_split", "step_share"];
  const $ = (id) => document.getElementById(id);
  /* gen counts the pages shown: an answer for an earlier one is dropped. interval is the
   * job's sampling interval (its latest sample), chosen the user's pick not yet in effect;
   * pending: some rule is still InProgress (the final verdicts come after the job's end). */
  const S = {name: null, detail: null, view: null, focus: null, timers: [], gen: 0, missing: false,
    interval: null, chosen: null, pending: false, allRules: false, rules: []};
  const base = () => "/api/jobs/" + encodeURIComponent(S.name);
  const running = () => S.detail && S.detail.status === "Running";

  /* Poll fn every ms while fast() (default: the job runs), else every 5 x ms. */
  function every(ms, fn, fast) {
    const gen = S.gen;
    const tick = async () => {
      if (gen !== S.gen) return;
      const began = Date.now();
      if ($("live").checked || !S.detail) await fn();
      // A fixed rate, not a fixed pause: a slow answer must not delay the next poll too.
      const wait = Math.max(0, ((fast || running)() ? ms : ms * 5) - (Date.now() - began));
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

  async function loadSystem(gen) {
    const node = $("node").value;
    if (!node) { SYSTEM.forEach((id) => showChart(id, null)); return; }
    const data = await api(`${base()}/system?${query({node})}`);
    if (gen !== S.gen) return;
    SYSTEM.forEach((id) => showChart(id, data.charts[id], bands()));
    renderGpuMemory(data.gpus || []);
    $("interval-now").textContent = data.interval_ms ? `now every ${data.interval_ms} ms` : "";
    S.interval = data.interval_ms;
    showInterval();
    document.body.dataset.lastSample = String(data.last);
    document.body.dataset.intervalMs = String(data.interval_ms);
    (window.__drawn = window.__drawn || []).push([data.last, Date.now() / 1e3]);
  }

  /* The node's GPUs' memory at the latest sample shown: GB beside the %. */
  function renderGpuMemory(gpus) {
    const B = (v) => StepscopeCharts.human(v, "B"), known = gpus.filter((g) => g.mem_used !== null);
    $("gpu-memory").textContent = known.map((g) => `GPU ${g.index} memory used: ${B(g.mem_used)} `
      + `(${StepscopeCharts.human(g.mem_util, "%")}) of ${B(g.mem_total)} on ${$("node").value}`).join(" · ");
    $("gpu-memory").hidden = known.length === 0;
  }

  /* A GPU job's steps: the device's split leads, and one line when the host ran ahead. */
  function renderDevice(device, rank, phase) {
    $("device").hidden = !device;
    $("device-head").textContent = device ? `GPU time per step (${phase}, rank ${rank}):` : "";
    $("device-text").textContent = device ? device.text : "";
    $("ran-ahead").textContent = (device && device.ran_ahead) || "";
    $("ran-ahead").hidden = !(device && device.ran_ahead);
    showChart("step_device", device && device.chart ? device.chart : null);
  }

  async function loadSteps(gen) {
    const rank = $("rank").value || 0, phase = $("phase").value;
    const data = await api(`${base()}/steps?${query({rank, phase})}`);
    if (gen !== S.gen) return;
    document.body.dataset.stepCount = String(data.count);
    renderDevice(data.device, rank, phase);
    if (!data.count) {  // a phase with no steps says so, in place of empty charts
      const where = range().start !== null ? "in this time range" : "in this job";
      const note = {kind: "empty", title: "Step duration", empty: `No ${phase} steps of rank ${rank} ${where}.`};
      STEPS.forEach((id) => showChart(id, id === "step_duration" ? note : null));
    } else STEPS.forEach((id) => showChart(id, data.charts[id], id === "step_share" ? undefined : bands()));
    document.body.dataset.lastStep = String(data.last_step);
  }

  /* The time every time chart shows unzoomed: the window asked for, else the job's
   * time (so far); a step chart then lines up with the samples of the same moment. */
  function setDomain() {
    if (!S.detail) return;
    const r = range(), end = r.end ?? (S.detail.end_time || S.detail.now);
    StepscopeCharts.setDomain(r.start ?? S.detail.start_time, end);
  }

  async function loadCharts() {
    const gen = S.gen;
    if (S.missing) return;
    setDomain();
    try {
      await Promise.all([loadSystem(gen), loadSteps(gen)]);
    } catch (err) { if (gen === S.gen) setConn(false, err.message); }
  }

  /* The interval control shows the job's interval, unless the user picked another one
   * that is not in the samples yet. */
  function showInterval() {
    const sel = $("interval"), now = S.interval === null || S.interval === undefined ? "" : String(S.interval);
    if (S.chosen !== null && S.chosen === now) S.chosen = null;
    if (S.chosen !== null) return;
    sel.value = [...sel.options].some((o) => o.value === now) ? now : "";
  }

  async function applyInterval() {
    const out = $("interval-status"), v = $("interval").value;
    if (v === "") {
      out.dataset.state = "error"; out.textContent = "choose an interval first"; return;
    }
    if (v === String(S.interval)) {
      S.chosen = null;
      out.dataset.state = "unchanged";
      out.textContent = `no change: the job already samples every ${$("interval").selectedOptions[0].text}`;
      return;
    }
    S.chosen = v;
    await request("interval", {interval_ms: Number(v)}, out);
    if (out.dataset.state !== "accepted") { S.chosen = null; showInterval(); }
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
    const gpus = Object.values(d.nodes).flatMap((n) => (n.gpus || []).map((g) =>
      `${g.name}${g.mem_total ? " (" + StepscopeCharts.human(g.mem_total, "B") + ")" : ""}`));
    $("job-gpus").textContent = gpus.length ? "GPUs: " + gpus.join(", ") : "";
    $("job-gpus").hidden = gpus.length === 0;
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

  /* A memory snapshot opens in PyTorch's viewer, a page of its own: the dashboard
     links it and loads nothing from it (the viewer reads the dropped file in the browser). */
  const viewerHint = () => h("span", {className: "muted"}, "Open it in PyTorch's memory viewer: download it, then drop it on ",
    h("a", {href: "https://pytorch.org/memory_viz", target: "_blank", rel: "noopener noreferrer",
      textContent: "pytorch.org/memory_viz"}), " (a local file: the viewer reads it in your browser)");

  /* A snapshot's figures, from its record: what it holds before it is opened. */
  const memoryFigures = (a) => `${a.segments} segments, ${(a.reserved_bytes / 2 ** 20).toFixed(1)} MiB reserved, ` +
    `${a.trace_events} allocator events${a.history_full ? " (history full: the oldest were dropped)" : ""}. `;

  function renderArtifacts(d) {
    const items = [];
    for (const a of d.artifacts || []) {
      const files = (a.files && a.files.length ? a.files : [a.path]).filter(Boolean);
      const label = `${a.kind} · rank ${a.rank} · steps ${a.start_step}-${a.end_step}`;
      items.push(h("li", {dataset: {kind: a.kind}},
        h("span", {textContent: label + (a.truncated ? " (truncated)" : "") + ": "}),
        ...files.map((f) => h("a", {className: "artifact", textContent: f.split("/").pop(),
          href: `${base()}/artifacts/${f.split("/").map(encodeURIComponent).join("/")}`})),
        files.length ? null : h("span", {className: "note", textContent: a.note || "no file kept"}),
        a.kind === "memory" && files.length ? h("span", {className: "viewer"}, memoryFigures(a), viewerHint()) : null));
    }
    $("artifacts").replaceChildren(...items);
    $("artifacts-empty").hidden = items.length > 0;
    DashKernels.load(base(), items.length); // beside each window's operators: its kernels
  }

  /* The job's header; when the job has just ended, its rules and charts at once. */
  async function loadDetail() {
    const gen = S.gen;
    try {
      const d = await api(base());
      if (gen !== S.gen) return;
      const ended = running() && d.status !== "Running";
      if (S.missing) { S.missing = false; $("job-view").classList.remove("missing"); $("job-missing").textContent = ""; }
      S.detail = d;
      renderHead(d);
      if (ended) { loadRules(); loadCharts(); }
    } catch (err) {
      if (gen !== S.gen) return;
      if (err.status === 404) showMissing(err.message); else setConn(false, err.message);
    }
  }

  async function loadRules() {
    const gen = S.gen;
    if (S.missing) return;
    try {
      const answer = await api(`${base()}/rules`), rules = answer.rules;
      if (gen !== S.gen) return;
      S.pending = rules.some((r) => r.status === "InProgress");
      $("rules").tBodies[0].replaceChildren(...rules.flatMap(ruleRows));
      $("rules-empty").hidden = rules.length > 0;
      showRules(rules);
      renderDiagnosis(answer);
      document.body.dataset.rulesLoads = String(Number(document.body.dataset.rulesLoads || 0) + 1);
    } catch (err) { if (gen === S.gen) setConn(false, err.message); }
  }

  /* Nothing of the previous job stays on the page. */
  function clearJob() {
    S.detail = null; S.view = null; S.focus = null; S.interval = null; S.chosen = null; S.pending = false;
    S.allRules = false; S.rules = []; $("rules-all").hidden = true; $("rules").hidden = false;
    for (const id of ["job-name", "crumb", "job-facts", "job-gpus", "device-head", "device-text",
      "ran-ahead", "gpu-memory", "job-missing", "diagnosis-summary", "range", "rules-fired",
      "interval-now", "interval-status", "profile-status", "stop-status"]) {
      $(id).textContent = ""; delete $(id).dataset.state;
    }
    $("job-status").textContent = ""; $("job-status").className = "status";
    for (const id of ["diagnosis", "artifacts", "node", "rank"]) $(id).replaceChildren();
    DashKernels.reset();
    $("rules").tBodies[0].replaceChildren();
    $("rules-empty").hidden = true; $("range-reset").hidden = true; $("live").checked = true;
    for (const id of ["job-gpus", "device", "ran-ahead", "gpu-memory"]) $(id).hidden = true;
    $("interval").value = "";
    $("job-view").classList.remove("missing");
    resetCharts();
  }

  /* A job that is not there (any more): say so, and show nothing of another one. */
  function showMissing(why) {
    clearJob();
    S.missing = true;
    $("job-view").classList.add("missing");
    $("job-name").textContent = "no such job";
    $("job-missing").textContent = why;
    document.title = "no such job · stepscope";
    setConn(true);
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

  /* The rules table shows the rules that fired; the others (no issue, could not judge)
   * until the user asks for all of them. */
  const fired = (r) => r.status === "IssuesFound";

  function showRules(rules) {
    const n = rules.filter(fired).length, quiet = rules.length - n, all = S.allRules;
    for (const tr of $("rules").tBodies[0].rows) tr.hidden = !all && tr.classList.contains("quiet");
    $("rules").hidden = !all && n === 0;
    $("rules-fired").textContent = rules.length ? `${n} of ${rules.length} rules found issues.` : "";
    const btn = $("rules-all");
    btn.hidden = quiet === 0;
    btn.textContent = all ? "Show only the rules that found issues" : `Show all ${rules.length} rules (${quiet} more)`;
    btn.setAttribute("aria-expanded", String(all));
    S.rules = rules;
  }

  function ruleRows(r) {
    const status = r.verdict ? `${r.status} (${r.verdict})` : r.status;
    const quiet = fired(r) ? "" : " quiet";
    const row = h("tr", {className: "rule " + (r.verdict || r.status) + quiet},
      h("td", {textContent: r.rule}), h("td", {textContent: status}),
      h("td", {className: "num", textContent: r.triggers == null ? "" : StepscopeCharts.number(r.triggers)}),
      h("td", {textContent: r.message || r.reason || ""}));
    const findings = (r.findings || []).slice(0, 10).map((f) => h("tr", {className: "finding" + quiet},
      h("td", {}), h("td", {textContent: "severity " + StepscopeCharts.number(f.severity ?? 0)}), h("td", {}),
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
    const gen = S.gen, url = base();  // another job's page must not show this answer
    out.dataset.state = "sending"; out.textContent = "sending...";
    let name;
    try {
      name = (await api(`${url}/${path}`, {json: body})).request;
    } catch (err) {
      if (gen !== S.gen) return;
      out.dataset.state = "error"; out.textContent = "refused: " + err.message; return;
    }
    if (gen !== S.gen) return;
    out.dataset.state = "pending"; out.dataset.request = name;
    out.textContent = "requested; waiting for the job to take it...";
    const until = Date.now() + ACK_WAIT_MS;
    while (Date.now() < until && gen === S.gen) {
      await new Promise((r) => setTimeout(r, ACK_MS));
      try {
        const st = await api(`${url}/control/${encodeURIComponent(name)}`);
        if (gen !== S.gen) return;
        if (!st.pending) {
          out.dataset.state = st.ack.accepted ? "accepted" : "rejected";
          out.textContent = (st.ack.accepted ? "done: " : "rejected: ") + (st.ack.detail || "");
          return;
        }
      } catch (err) {
        if (gen !== S.gen) return;
        // the server answered (e.g. 422: the job's answer is damaged): not a lost connection
        if (err.status) { out.dataset.state = "error"; out.textContent = err.message; return; }
        setConn(false, err.message);
      }
    }
    if (gen !== S.gen) return;
    out.dataset.state = "timeout";
    out.textContent = "no answer yet: it applies at the job's next step boundary";
  }

  function profileBody() {
    const num = (id) => ($(id).value === "" ? null : Number($(id).value));
    const t = $("p-start-time").value.trim();
    return {detailed: $("p-detailed").checked, python: $("p-python").value || null,
      timer: $("p-timer").value, dataloader: $("p-dataloader").checked, memory: $("p-memory").checked,
      start_step: num("p-start-step"), num_steps: num("p-num-steps"),
      start_time: t === "" ? null : (t === "now" ? "now" : Number(t)), duration: num("p-duration")};
  }

  $("interval").addEventListener("change", () => { S.chosen = $("interval").value; });
  $("interval-apply").addEventListener("click", applyInterval);
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
  $("rules-all").addEventListener("click", () => { S.allRules = !S.allRules; showRules(S.rules); });
  for (const id of ["node", "rank", "phase", "span"]) $(id).addEventListener("change", () => { resetCharts(); loadCharts(); });

  pages.job = {
    async enter(name) {
      S.gen++; S.name = name; S.missing = false;
      clearJob();
      $("report-link").href = `${base()}/report.html`;
      $("report-link").setAttribute("download", name + "-report.html");
      await loadDetail();
      every(CHART_MS, loadCharts);
      every(DETAIL_MS, loadDetail);
      // A finding within seconds (cached by file signature), and the final verdicts
      // as soon as they are written after the job's end.
      every(DETAIL_MS, loadRules, () => running() || S.pending);
    },
    /* An address that names no job at all (it does not decode): nothing is asked. */
    missing(raw, why) {
      S.gen++; S.name = null;
      showMissing(why);
    },
    leave() { S.gen++; S.timers.forEach(clearTimeout); S.timers = []; S.name = null; },
  };
})();
