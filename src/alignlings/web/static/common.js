/* Shared by every page: the data the server put in the page, and a small JSON fetch helper. */
"use strict";
const CLIENT = JSON.parse(document.getElementById("client-data").textContent);
const T = CLIENT.t;

/* fetch JSON; never throws: {ok, status, data} (data.detail holds the server's message). */
async function api(method, url, body) {
  const sep = url.includes("?") ? "&" : "?";
  const init = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
  if (method !== "GET" && method !== "HEAD") init.headers["Content-Type"] = "application/json";  // the server requires it
  if (body !== undefined) init.body = JSON.stringify(body);
  try {
    const res = await fetch(`${url}${sep}lang=${CLIENT.lang}`, init);
    let data = null;
    try { data = await res.json(); } catch (e) { data = { detail: res.statusText }; }
    return { ok: res.ok, status: res.status, data, retryAfter: Number(res.headers.get("Retry-After") || 2) };
  } catch (e) {
    return { ok: false, status: 0, data: { detail: T.network } };
  }
}

/* like api(), but a 429 (the grading queue is full) is retried after the server's Retry-After,
   a few times, calling onWait() meanwhile: a busy classroom server delays a check, never drops it. */
async function apiQueued(method, url, body, onWait, tries = 8) {
  for (let i = 0; ; i++) {
    const res = await api(method, url, body);
    if (res.status !== 429 || i >= tries) return res;
    if (onWait) onWait();
    await new Promise((r) => setTimeout(r, Math.min(10, Math.max(0.5, res.retryAfter)) * 1000));
  }
}

function errorText(res) {
  if (res.status === 429) return T.busy;
  const d = res.data && res.data.detail;
  /* a refusal written for the learner (a locked track's reason): the sentence alone, no "Error 403:" */
  if (res.status === 403 && typeof d === "string" && d) return d;
  if (Array.isArray(d)) return d.map((e) => e.msg).join("; ");
  return `${T.error} ${res.status || ""}${T.colon}${d || ""}`;
}

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (k === "class") node.className = v;
    else if (k === "html") node.innerHTML = v;
    else if (k === "text") node.textContent = v;
    else node.setAttribute(k, v);
  }
  for (const c of children) node.append(c);
  return node;
}

/* While a check of `exercise` runs, say how far the server's background computation of the
   reference values is, if the check has to wait for it (web/references.py): a line after `anchor`.
   Returns the function that stops it (call it when the check is back). */
function referenceProgress(exercise, anchor) {
  let stopped = false, timer = null, note = null;
  async function poll() {
    const res = await api("GET", `/api/references?exercise=${encodeURIComponent(exercise)}`);
    if (stopped || !res.ok || !res.data.enabled) return;
    if (!res.data.ready) {
      if (!note) { note = el("p", { class: "check-wait", id: "check-wait", role: "status" }); anchor.after(note); }
      note.textContent = res.data.message;
      timer = setTimeout(poll, 800);
    } else if (note) {
      note.textContent = T.checking;
    }
  }
  timer = setTimeout(poll, 300);  // a check that is quick never shows it
  return () => { stopped = true; clearTimeout(timer); if (note) note.remove(); };
}

/* While a check of `exercise` runs: how long it has taken and a "Stop" button, after `anchor` (the
   check's own button). Stop asks the server to end it (POST /api/exercises/ID/stop); the check then
   comes back at once as stopped, and nothing is recorded. Returns the function that removes them. */
function checkRunning(exercise, anchor) {
  const started = Date.now();
  const elapsed = el("span", { class: "check-elapsed", role: "timer" });
  const stop = el("button", { type: "button", class: "stop-btn", id: "stop-btn", title: T.stop_check_label,
                              "aria-label": T.stop_check_label }, T.stop_check);
  const box = el("span", { class: "check-running" }, elapsed, stop);
  const tick = () => { elapsed.textContent = T.check_elapsed.replace("{seconds}", String(Math.floor((Date.now() - started) / 1000))); };
  tick();
  const timer = setInterval(tick, 1000);
  stop.addEventListener("click", async () => {
    stop.disabled = true;
    await api("POST", `/api/exercises/${exercise}/stop`);
  });
  anchor.after(box);
  return () => { clearInterval(timer); box.remove(); };
}

/* A small picture beside a failing case's numbers: for each differing element (up to 5, from the
   verdict's diff), the expected value (blue circle) and the learner's (red cross), joined by a line.
   Null when the diff has no numbers. `label` is the picture's accessible name. */
function valuesPlot(diff, label) {
  if (!diff) return null;
  let pts = (diff.first || []).filter((f) => typeof f.expected === "number" && typeof f.got === "number");
  if (!pts.length && typeof diff.expected === "number" && typeof diff.got === "number") pts = [{ index: [], expected: diff.expected, got: diff.got }];
  pts = pts.filter((p) => Number.isFinite(p.expected) && Number.isFinite(p.got));
  if (!pts.length) return null;
  const W = 40 + 36 * pts.length, H = 70, ns = "http://www.w3.org/2000/svg";
  const vals = pts.flatMap((p) => [p.expected, p.got]);
  let lo = Math.min(...vals, 0), hi = Math.max(...vals, 0);
  if (hi - lo < 1e-12) { hi += 1; lo -= 1; }
  const y = (v) => 8 + (H - 22) * (1 - (v - lo) / (hi - lo));
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  svg.setAttribute("width", String(W));
  svg.setAttribute("height", String(H));
  svg.setAttribute("class", "values-plot");
  svg.setAttribute("role", "img");
  svg.setAttribute("aria-label", label);
  const add = (tag, attrs, text) => {
    const n = document.createElementNS(ns, tag);
    for (const [k, v] of Object.entries(attrs)) n.setAttribute(k, String(v));
    if (text !== undefined) n.textContent = text;
    svg.append(n);
    return n;
  };
  add("title", {}, label);
  add("line", { x1: 30, x2: W - 4, y1: y(0), y2: y(0), stroke: "#c9d1da" });
  add("text", { x: 26, y: y(hi) + 4, "text-anchor": "end", "font-size": 9, fill: "#5d6776" }, Number(hi.toPrecision(3)));
  add("text", { x: 26, y: y(lo), "text-anchor": "end", "font-size": 9, fill: "#5d6776" }, Number(lo.toPrecision(3)));
  pts.forEach((p, i) => {
    const x = 48 + 36 * i;
    add("line", { x1: x, x2: x, y1: y(p.expected), y2: y(p.got), stroke: "#9aa5b1", "stroke-dasharray": "2 2" });
    add("circle", { cx: x, cy: y(p.expected), r: 4, fill: "#2f6db5", class: "expected" });
    const g = y(p.got);
    add("path", { d: `M${x - 4} ${g - 4}L${x + 4} ${g + 4}M${x + 4} ${g - 4}L${x - 4} ${g + 4}`, stroke: "#b3261e",
                  "stroke-width": 2, class: "got" });
    add("text", { x, y: H - 3, "text-anchor": "middle", "font-size": 9, fill: "#5d6776" },
        p.index && p.index.length ? `[${p.index.join(",")}]` : "");
  });
  return svg;
}
