/* Exercise page: inline blanks (Tab / Enter move on, Ctrl+Enter checks), check, hints, reveal. */
"use strict";
(function () {
  const inputs = [...document.querySelectorAll("input.blank")]
    .sort((a, b) => a.dataset.index - b.dataset.index);
  const checkBtn = document.getElementById("check-btn");
  const hintBtn = document.getElementById("hint-btn");
  const revealBtn = document.getElementById("reveal-btn");
  const verdictBox = document.getElementById("verdict");
  const storageKey = `alignlings:fills:${CLIENT.exercise}`;

  function fit(input) { input.style.width = `${Math.max(16, input.value.length + 2)}ch`; }

  // restore an unsaved draft (the server pre-fills the last checked attempt)
  try {
    const draft = JSON.parse(localStorage.getItem(storageKey) || "null");
    if (Array.isArray(draft) && draft.length === inputs.length) {
      inputs.forEach((inp, i) => { if (draft[i]) inp.value = draft[i]; });
    }
  } catch (e) { /* no storage: fine */ }
  inputs.forEach(fit);

  inputs.forEach((input, i) => {
    input.addEventListener("input", () => {
      fit(input);
      clearMark(input.dataset.index);
      try { localStorage.setItem(storageKey, JSON.stringify(inputs.map((x) => x.value))); } catch (e) { /* ignore */ }
    });
    input.addEventListener("keydown", (ev) => {
      if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") return; // handled on document
      if (ev.key === "Tab" && !ev.altKey) {
        const j = ev.shiftKey ? i - 1 : i + 1;
        if (j >= 0 && j < inputs.length) { ev.preventDefault(); inputs[j].focus(); inputs[j].select(); }
        else if (j === inputs.length) { ev.preventDefault(); checkBtn.focus(); }
      } else if (ev.key === "Enter") {
        ev.preventDefault();
        if (i + 1 < inputs.length) inputs[i + 1].focus(); else check();
      }
    });
  });
  document.addEventListener("keydown", (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); check(); }
  });
  checkBtn.addEventListener("click", check);
  hintBtn.addEventListener("click", hint);
  revealBtn.addEventListener("click", reveal);

  function fbRow(index) { return document.querySelector(`.blank-fb[data-index="${index}"]`); }
  function markOf(index) { return document.querySelector(`.mark[data-index="${index}"]`); }

  function clearMark(index) {
    const input = document.getElementById(`blank-${index}`);
    input.classList.remove("ok", "bad");
    markOf(index).textContent = "";
    markOf(index).className = "mark";
    const row = fbRow(index);
    row.hidden = true;
    row.textContent = "";
  }

  function diffLine(diff) {
    if (!diff) return "";
    const parts = [];
    if (diff.reason === "shape") parts.push(`shape ${JSON.stringify(diff.got_shape)} ≠ ${JSON.stringify(diff.expected_shape)}`);
    if (diff.max_abs_diff !== undefined) parts.push(`max |diff| ${fmt(diff.max_abs_diff)}`);
    if (Array.isArray(diff.first) && diff.first.length) {
      parts.push(diff.first.slice(0, 3).map((f) => {
        const text = T.expected_got.replace("{expected}", fmt(f.expected)).replace("{got}", fmt(f.got));
        return f.index.length ? `[${f.index.join(",")}] ${text}` : text;
      }).join("; "));
    } else if (diff.expected !== undefined && diff.got !== undefined) {
      parts.push(T.expected_got.replace("{expected}", fmt(diff.expected)).replace("{got}", fmt(diff.got)));
    }
    return parts.join(" · ");
  }
  // the engine's message repeats the case name ("case 'x': ..." / "用例「x」：..."): it is shown already
  function caseMessage(c) {
    for (const prefix of [`case '${c.name}': `, `用例「${c.name}」：`]) {
      if (c.message.startsWith(prefix)) return c.message.slice(prefix.length);
    }
    return c.message;
  }
  function fmt(v) { return typeof v === "number" ? Number(v.toPrecision(5)).toString() : String(v); }

  function showVerdict(v) {
    for (const b of v.blanks) {
      const input = document.getElementById(`blank-${b.index}`);
      if (!input) continue;
      const mark = markOf(b.index), row = fbRow(b.index);
      input.classList.remove("ok", "bad");
      row.className = "blank-fb";
      row.textContent = "";
      if (b.passed === true) {
        input.classList.add("ok"); mark.className = "mark ok"; mark.textContent = "✓"; row.hidden = true;
      } else {
        input.classList.add(b.passed === false ? "bad" : "unknown");
        mark.className = "mark bad"; mark.textContent = b.passed === false ? "✗" : "?";
        row.append(el("span", { class: "msg", text: b.message || "" }));
        const d = diffLine(b.diff);
        if (d) row.append(el("span", { class: "diff", text: d }));
        if (b.misconception) row.dataset.misconception = b.misconception;
        row.hidden = !b.message && !d;
      }
    }
    verdictBox.hidden = false;
    verdictBox.className = `verdict ${v.passed ? "passed" : "failed"}`;
    document.getElementById("verdict-head").textContent = v.passed ? T.passed : T.failed;
    const err = document.getElementById("verdict-error");
    err.hidden = !v.error;
    err.textContent = v.error ? `${v.error.kind}: ${v.error.message}` : "";
    const cases = document.getElementById("cases");
    cases.replaceChildren(...v.cases.map((c) => el("li", { class: c.passed ? "ok" : "bad" },
      el("span", { text: c.passed ? "✓ " : "✗ " }), el("strong", { text: c.name }), " ",
      el("span", { class: "kind", text: `(${T[`kind_${c.kind}`] || c.kind})` }),
      c.passed ? "" : ` ${caseMessage(c)}`)));
    const out = (v.stdout || "").trim();
    document.getElementById("stdout-box").hidden = !out;
    document.getElementById("stdout").textContent = out;
    if (v.passed) {
      document.getElementById("solved-badge").hidden = false;
      try { localStorage.removeItem(storageKey); } catch (e) { /* ignore */ }
    }
  }

  let busy = false;
  async function check() {
    if (busy) return;
    busy = true;
    checkBtn.disabled = true;
    checkBtn.textContent = T.checking;
    const res = await apiQueued("POST", `/api/exercises/${CLIENT.exercise}/check`, { fills: inputs.map((x) => x.value) },
      () => { checkBtn.textContent = T.busy_retrying; });
    busy = false;
    checkBtn.disabled = false;
    checkBtn.textContent = T.check;
    if (res.ok) { showVerdict(res.data); return; }
    verdictBox.hidden = false;
    verdictBox.className = "verdict failed";
    document.getElementById("verdict-head").textContent = errorText(res);
    document.getElementById("cases").replaceChildren();
  }

  async function hint() {
    const res = await api("POST", `/api/exercises/${CLIENT.exercise}/hint`);
    if (!res.ok) { alertBox(errorText(res)); return; }
    const list = document.getElementById("hint-list");
    if (list.children.length < res.data.index) list.append(el("li", { html: res.data.html }));
    document.getElementById("hints").hidden = false;
    document.getElementById("hint-count").textContent = res.data.index;
    if (res.data.last) { hintBtn.disabled = true; hintBtn.title = T.no_more_hints; }
  }

  async function reveal() {
    const res = await api("POST", `/api/exercises/${CLIENT.exercise}/solution`);
    if (!res.ok) { alertBox(errorText(res)); return; }
    document.getElementById("solution-code").innerHTML = res.data.html;
    document.getElementById("explanation").innerHTML = res.data.explanation_html;
    document.getElementById("solution").hidden = false;
    document.getElementById("solution").scrollIntoView({ behavior: "smooth", block: "start" });
  }

  function alertBox(text) {
    verdictBox.hidden = false;
    verdictBox.className = "verdict failed";
    document.getElementById("verdict-head").textContent = text;
  }
})();
