/* Toy GRPO page: start a run, stream its points (server-sent events) and draw every run on <canvas>. */
"use strict";
(function () {
  const COLORS = ["#2f6db5", "#d1495b", "#2e9e5b", "#e08e0b", "#7b4fb3", "#0f8b8d", "#8c564b", "#c2185b"];
  const pCanvas = document.getElementById("chart-p");
  const lossCanvas = document.getElementById("chart-loss");
  const status = document.getElementById("run-status");
  const legend = document.getElementById("legend");
  const seedInput = document.getElementById("seed");
  const itersInput = document.getElementById("iterations");
  const runs = []; // {id, seed, iterations, color, points: [{iteration, p_target, loss}], result, status}

  function addRun(summary) {
    const run = { id: summary.id, seed: summary.seed, iterations: summary.iterations,
                  color: COLORS[runs.length % COLORS.length], points: [], result: summary.result || null,
                  status: summary.status };
    (summary.points || []).forEach((p) => run.points.push(p));
    runs.push(run);
    return run;
  }

  function follow(run) {
    const es = new EventSource(`/api/toy-grpo/runs/${run.id}/events`);
    es.addEventListener("start", () => { run.status = "running"; status.textContent = `${T.running} ${T.seed} ${run.seed}`; });
    es.addEventListener("point", (ev) => {
      const p = JSON.parse(ev.data);
      if (!run.points.some((q) => q.iteration === p.iteration)) run.points.push(p);
      status.textContent = `${T.running} ${T.seed} ${run.seed}: ${p.iteration}/${run.iterations}`;
      draw();
    });
    es.addEventListener("done", (ev) => {
      run.result = JSON.parse(ev.data); run.status = "done"; es.close();
      status.textContent = doneText(run);
      draw();
    });
    es.addEventListener("failed", (ev) => {
      run.status = "error"; status.textContent = `${T.error}: ${JSON.parse(ev.data).message}`; es.close();
    });
    es.addEventListener("error", () => { if (run.status !== "queued" && run.status !== "running") es.close(); });
  }

  function doneText(run) {
    const r = run.result;
    if (!r || r.p_target_initial === undefined) return "";
    return T.run_done.replace("{seed}", run.seed).replace("{p0}", r.p_target_initial.toFixed(2))
      .replace("{p1}", r.p_target_final.toFixed(2)).replace("{n}", r.iterations);
  }

  async function start() {
    const seed = Math.max(0, parseInt(seedInput.value || "0", 10));
    const iterations = Math.min(200, Math.max(1, parseInt(itersInput.value || "40", 10)));
    const res = await api("POST", "/api/toy-grpo/runs", { seed, iterations });
    if (!res.ok) { status.textContent = errorText(res); return; }
    const run = addRun({ id: res.data.id, seed, iterations, status: "queued" });
    status.textContent = T.preparing;
    seedInput.value = seed + 1; // the next run overlays another seed
    follow(run);
    draw();
  }

  function setup(canvas) {
    const dpr = window.devicePixelRatio || 1;
    const w = canvas.clientWidth || canvas.width, h = Math.round(w * 300 / 640);
    if (canvas.width !== Math.round(w * dpr)) { canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr); }
    const ctx = canvas.getContext("2d");
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    return { ctx, w, h };
  }

  function chart(canvas, key, fixedRange) {
    const { ctx, w, h } = setup(canvas);
    const m = { l: 48, r: 12, t: 10, b: 30 };
    const maxIter = Math.max(10, ...runs.map((r) => r.iterations || 0));
    let lo = 0, hi = 1;
    if (!fixedRange) {
      const vals = runs.flatMap((r) => r.points.map((p) => p[key])).filter(Number.isFinite);
      lo = vals.length ? Math.min(...vals) : -1; hi = vals.length ? Math.max(...vals) : 1;
      if (hi - lo < 1e-6) { hi += 0.5; lo -= 0.5; }
      const pad = (hi - lo) * 0.08; lo -= pad; hi += pad;
    }
    const x = (it) => m.l + (w - m.l - m.r) * it / maxIter;
    const y = (v) => m.t + (h - m.t - m.b) * (1 - (v - lo) / (hi - lo));
    ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#5d6776"; ctx.strokeStyle = "#e3e7ec"; ctx.lineWidth = 1;
    for (let k = 0; k <= 4; k++) {
      const v = lo + (hi - lo) * k / 4;
      ctx.beginPath(); ctx.moveTo(m.l, y(v)); ctx.lineTo(w - m.r, y(v)); ctx.stroke();
      ctx.textAlign = "right"; ctx.fillText(v.toFixed(2), m.l - 6, y(v) + 4);
    }
    const step = maxIter <= 50 ? 10 : maxIter <= 100 ? 20 : 50;
    ctx.textAlign = "center";
    for (let it = 0; it <= maxIter; it += step) ctx.fillText(String(it), x(it), h - m.b + 16);
    ctx.fillText(T.iteration, (m.l + w - m.r) / 2, h - 3);
    ctx.strokeStyle = "#9aa5b1"; ctx.beginPath(); ctx.moveTo(m.l, m.t); ctx.lineTo(m.l, h - m.b); ctx.lineTo(w - m.r, h - m.b); ctx.stroke();
    let count = 0;
    for (const run of runs) {
      const pts = run.points.slice().sort((a, b) => a.iteration - b.iteration);
      if (key === "p_target" && run.result && run.result.p_target_initial !== undefined) {
        pts.unshift({ iteration: 0, p_target: run.result.p_target_initial });
      }
      ctx.strokeStyle = run.color; ctx.fillStyle = run.color; ctx.lineWidth = 2; ctx.beginPath();
      pts.forEach((p, i) => { if (i) ctx.lineTo(x(p.iteration), y(p[key])); else ctx.moveTo(x(p.iteration), y(p[key])); });
      ctx.stroke();
      if (pts.length) { const q = pts[pts.length - 1]; ctx.beginPath(); ctx.arc(x(q.iteration), y(q[key]), 3, 0, 2 * Math.PI); ctx.fill(); }
      count += run.points.length;
    }
    canvas.dataset.points = String(count);
    canvas.dataset.runs = String(runs.length);
  }

  function draw() {
    chart(pCanvas, "p_target", true);
    chart(lossCanvas, "loss", false);
    legend.replaceChildren(...runs.map((r) => el("li", { "data-run": r.id },
      el("span", { class: "swatch", style: `background:${r.color}` }),
      r.result ? doneText(r) : `${T.seed} ${r.seed}`)));
  }

  document.getElementById("run-btn").addEventListener("click", start);
  document.getElementById("clear-btn").addEventListener("click", () => { runs.length = 0; status.textContent = ""; draw(); });
  window.addEventListener("resize", draw);
  (CLIENT.runs || []).forEach((s) => { const run = addRun(s); if (s.status === "queued" || s.status === "running") follow(run); });
  if (runs.length) seedInput.value = Math.max(...runs.map((r) => r.seed)) + 1;
  draw();
})();
