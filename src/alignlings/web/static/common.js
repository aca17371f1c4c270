/* Shared by every page: the data the server put in the page, and a small JSON fetch helper. */
"use strict";
const CLIENT = JSON.parse(document.getElementById("client-data").textContent);
const T = CLIENT.t;

/* fetch JSON; never throws: {ok, status, data} (data.detail holds the server's message). */
async function api(method, url, body) {
  const sep = url.includes("?") ? "&" : "?";
  const init = { method, headers: { "Accept": "application/json" }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  try {
    const res = await fetch(`${url}${sep}lang=${CLIENT.lang}`, init);
    let data = null;
    try { data = await res.json(); } catch (e) { data = { detail: res.statusText }; }
    return { ok: res.ok, status: res.status, data };
  } catch (e) {
    return { ok: false, status: 0, data: { detail: T.network } };
  }
}

function errorText(res) {
  if (res.status === 429) return T.busy;
  const d = res.data && res.data.detail;
  if (Array.isArray(d)) return d.map((e) => e.msg).join("; ");
  return `${T.error} ${res.status || ""}: ${d || ""}`;
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
