/* stepscope report: draw every chart from the inline JSON once the page is parsed. */
(function () {
  "use strict";
  const t0 = performance.now();
  const data = JSON.parse(document.getElementById("stepscope-data").textContent);
  let failed = 0;
  // one time axis: every time chart shows the job's time unzoomed, and follows a zoom
  if (data.domain) StepscopeCharts.setDomain(data.domain[0], data.domain[1]);
  for (const el of document.querySelectorAll("[data-chart]")) {
    const spec = data.charts[el.dataset.chart];
    try {
      StepscopeCharts.draw(el, Object.assign({id: el.dataset.chart}, spec));
    } catch (err) {
      failed++;
      console.error("stepscope: chart " + el.dataset.chart + " failed:", err);
    }
  }
  // Printing: open the collapsed tables and fit the charts to the paper's width.
  window.addEventListener("beforeprint", () => {
    for (const d of document.querySelectorAll("details")) d.open = true;
  });
  window.stepscopeReport = {charts: Object.keys(data.charts).length, failed,
    drawMs: performance.now() - t0, startedAt: t0, readyAt: performance.now(),
    registry: StepscopeCharts.registry};
  document.documentElement.dataset.ready = "1";
})();
