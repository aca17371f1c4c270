/* Toy GRPO, DPO and PPO pages: start a run, stream its points (server-sent events) and draw every run
   on <canvas>. CLIENT.toy (the DPO and PPO pages) names its API, target line, labels and, for PPO,
   its charts ({canvas, keys: [[key, dashed]], range: [lo, hi] or null, target}); without it: GRPO. */
"use strict";
(function () {
  const COLORS = ["#2f6db5", "#d1495b", "#2e9e5b", "#e08e0b", "#7b4fb3", "#0f8b8d", "#8c564b", "#c2185b"];
  const status = document.getElementById("run-status");
  const legend = document.getElementById("legend");
  const seedInput = document.getElementById("seed");
  const itersInput = document.getElementById("iterations");
  const runBtn = document.getElementById("run-btn");
  const empty = document.getElementById("chart-empty");
  const TOY = CLIENT.toy || {};
  const API = TOY.api || "/api/toy-grpo";
  const TARGET = TOY.target || 0.70; // exercise 6: train until P("a") > 0.7 (toy-dpo: 0.9)
  const CHARTS = TOY.charts || [
    { canvas: "chart-p", keys: [["p_target", false]], range: [0, 1], target: TARGET },
    { canvas: "chart-loss", keys: [["loss", false]], range: null },
  ];
  const runs = []; // {id, seed, iterations, color, points: [{iteration, p_target, loss, ...}], result, status}

  // Run stays disabled while a run trains or waits: one more would only queue behind it
  function busy() { return runs.some((r) => r.status === "queued" || r.status === "running"); }
  function updateButton() { runBtn.disabled = busy(); }

  // round tick values ("nice numbers": 1, 2 or 5 times a power of ten) covering [lo, hi]
  function ticks(lo, hi, n = 4) {
    const raw = (hi - lo) / n, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= raw) || 10 * mag;
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(Math.abs(v) < step * 1e-9 ? 0 : v);
    return { values: out, digits: Math.max(0, -Math.floor(Math.log10(step))) };
  }

  function addRun(summary) {
    const run = { id: summary.id, seed: summary.seed, iterations: summary.iterations,
                  color: COLORS[runs.length % COLORS.length], points: [], result: summary.result || null,
                  status: summary.status };
    (summary.points || []).forEach((p) => run.points.push(p));
    runs.push(run);
    return run;
  }

  function follow(run) {
    const es = new EventSource(`${API}/runs/${run.id}/events`);
    es.addEventListener("start", () => { run.status = "running"; status.textContent = `${T.running} ${T.seed} ${run.seed}`; });
    es.addEventListener("point", (ev) => {
      const p = JSON.parse(ev.data);
      if (!run.points.some((q) => q.iteration === p.iteration)) run.points.push(p);
      status.textContent = `${T.running} ${T.seed} ${run.seed}: ${p.iteration}/${run.iterations}`;
      draw();
    });
    es.addEventListener("done", (ev) => {
      run.result = JSON.parse(ev.data); run.status = "done"; es.close(); updateButton();
      status.textContent = doneText(run);
      draw();
    });
    es.addEventListener("failed", (ev) => {
      run.status = "error"; status.textContent = `${T.error}${T.colon}${JSON.parse(ev.data).message}`; es.close();
      updateButton();
    });
    es.addEventListener("error", () => {
      if (run.status !== "queued" && run.status !== "running") es.close();
      if (es.readyState === EventSource.CLOSED && busy()) { run.status = "error"; updateButton(); }
    });
  }

  function doneText(run) {
    const r = run.result;
    if (!r || r.p_target_initial === undefined) return "";
    const digits = r.p_target_initial < 0.01 ? 4 : 2; // toy PPO's P("aaaa") starts near 0.0002
    return (TOY.done || T.run_done).replace("{seed}", run.seed).replace("{p0}", r.p_target_initial.toFixed(digits))
      .replace("{p1}", r.p_target_final.toFixed(2)).replace("{n}", r.iterations)
      .replace("{score}", r.score_final === undefined ? "" : r.score_final.toFixed(2));
  }

  async function start() {
    if (busy()) return;
    runBtn.disabled = true;
    const seed = Math.max(0, parseInt(seedInput.value || "0", 10));
    const iterations = Math.min(200, Math.max(1, parseInt(itersInput.value || "40", 10)));
    const res = await api("POST", `${API}/runs`, TOY.count_key ? { seed, [TOY.count_key]: iterations } : { seed, iterations });
    if (!res.ok) { status.textContent = errorText(res); updateButton(); return; }
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

  function chart(spec) {
    const canvas = document.getElementById(spec.canvas), keys = spec.keys, fixedRange = spec.range;
    const { ctx, w, h } = setup(canvas);
    const m = { l: 48, r: 12, t: 10, b: 30 };
    const maxIter = Math.max(10, ...runs.map((r) => r.iterations || 0), runs.length ? 0 : parseInt(itersInput.value || "0", 10) || 0);
    let lo = fixedRange ? fixedRange[0] : 0, hi = fixedRange ? fixedRange[1] : 1;
    if (!fixedRange) {
      const vals = runs.flatMap((r) => r.points.flatMap((p) => keys.map(([key]) => p[key]))).filter(Number.isFinite);
      lo = vals.length ? Math.min(...vals) : -1; hi = vals.length ? Math.max(...vals) : 1;
      if (hi - lo < 1e-6) { hi += 0.5; lo -= 0.5; }
      const pad = (hi - lo) * 0.08; lo -= pad; hi += pad;
    }
    const t = ticks(lo, hi);
    if (!fixedRange) { lo = Math.min(lo, t.values[0]); hi = Math.max(hi, t.values[t.values.length - 1]); }
    const x = (it) => m.l + (w - m.l - m.r) * it / maxIter;
    const y = (v) => m.t + (h - m.t - m.b) * (1 - (v - lo) / (hi - lo));
    ctx.font = "11px system-ui, sans-serif"; ctx.fillStyle = "#5d6776"; ctx.strokeStyle = "#e3e7ec"; ctx.lineWidth = 1;
    for (const v of t.values) {
      ctx.beginPath(); ctx.moveTo(m.l, y(v)); ctx.lineTo(w - m.r, y(v)); ctx.stroke();
      ctx.textAlign = "right"; ctx.fillText(v.toFixed(t.digits), m.l - 6, y(v) + 4);
    }
    if (spec.target !== undefined) { // the exercise's target, dashed
      ctx.save(); ctx.strokeStyle = "#a74d05"; ctx.setLineDash([6, 4]); ctx.lineWidth = 1.5;
      ctx.beginPath(); ctx.moveTo(m.l, y(spec.target)); ctx.lineTo(w - m.r, y(spec.target)); ctx.stroke(); ctx.restore();
      ctx.fillStyle = "#a74d05"; ctx.textAlign = "left";
      ctx.fillText(spec.target_label || TOY.target_label || T.toy_target, m.l + 6, y(spec.target) - 5);
      ctx.fillStyle = "#5d6776";
      canvas.dataset.target = String(spec.target);
    }
    const step = maxIter <= 50 ? 10 : maxIter <= 100 ? 20 : 50;
    ctx.textAlign = "center";
    for (let it = 0; it <= maxIter; it += step) ctx.fillText(String(it), x(it), h - m.b + 16);
    ctx.fillText(TOY.x_label || T.iteration, (m.l + w - m.r) / 2, h - 3);
    ctx.strokeStyle = "#9aa5b1"; ctx.beginPath(); ctx.moveTo(m.l, m.t); ctx.lineTo(m.l, h - m.b); ctx.lineTo(w - m.r, h - m.b); ctx.stroke();
    let count = 0;
    for (const run of runs) for (const [key, dashed] of keys) {
      const pts = run.points.slice().sort((a, b) => a.iteration - b.iteration);
      if (key === "p_target" && run.result && run.result.p_target_initial !== undefined) {
        pts.unshift({ iteration: 0, p_target: run.result.p_target_initial });
      }
      ctx.save(); if (dashed) ctx.setLineDash([5, 3]);
      ctx.strokeStyle = run.color; ctx.fillStyle = run.color; ctx.lineWidth = 2; ctx.beginPath();
      pts.forEach((p, i) => { if (i) ctx.lineTo(x(p.iteration), y(p[key])); else ctx.moveTo(x(p.iteration), y(p[key])); });
      ctx.stroke(); ctx.restore(); ctx.fillStyle = run.color;
      if (pts.length) { const q = pts[pts.length - 1]; ctx.beginPath(); ctx.arc(x(q.iteration), y(q[key]), 3, 0, 2 * Math.PI); ctx.fill(); }
      if (key === keys[0][0]) count += run.points.length;
    }
    canvas.dataset.points = String(count);
    canvas.dataset.runs = String(runs.length);
  }

  function draw() {
    CHARTS.forEach(chart);
    empty.hidden = runs.length > 0;
    legend.replaceChildren(...runs.map((r) => el("li", { "data-run": r.id },
      el("span", { class: "swatch", style: `background:${r.color}` }),
      r.result ? doneText(r) : `${T.seed} ${r.seed}`)));
  }

  document.getElementById("run-btn").addEventListener("click", start);
  document.getElementById("clear-btn").addEventListener("click", () => {
    for (let i = runs.length - 1; i >= 0; i--) if (runs[i].status !== "queued" && runs[i].status !== "running") runs.splice(i, 1);
    status.textContent = ""; draw();
  });
  window.addEventListener("resize", draw);
  (CLIENT.runs || []).forEach((s) => { const run = addRun(s); if (s.status === "queued" || s.status === "running") follow(run); });
  if (runs.length) seedInput.value = Math.max(...runs.map((r) => r.seed)) + 1;
  updateButton();
  draw();
})();
