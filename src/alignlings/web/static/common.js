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
