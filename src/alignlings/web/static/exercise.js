/* Exercise page: inline blanks (Tab / Enter move on, Ctrl+Enter checks), check, hints, reveal.
   The verdict comes in the page's terms (web/verdict.py): TODO numbers and displayed line numbers. */
"use strict";
(function () {
  const inputs = [...document.querySelectorAll("input.blank")]
    .sort((a, b) => a.dataset.index - b.dataset.index);
  const checkBtn = document.getElementById("check-btn");
  const hintBtn = document.getElementById("hint-btn");
  const revealBtn = document.getElementById("reveal-btn");
  const verdictBox = document.getElementById("verdict");
  const allCasesBtn = document.getElementById("all-cases-btn");
  const storageKey = `alignlings:fills:${CLIENT.exercise}`;
  let showAll = false;
  let lastCases = [];

  // grows with its text; never narrower than the placeholder "TODO n"
  function fit(input) { input.style.width = `${Math.max(10, input.value.length + 2)}ch`; }

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
  revealBtn.addEventListener("click", () => {
    const box = document.getElementById("reveal-confirm");
    box.hidden = false;
    document.getElementById("reveal-yes").focus();
  });
  document.getElementById("reveal-no").addEventListener("click", () => {
    document.getElementById("reveal-confirm").hidden = true;
    revealBtn.focus();
  });
  document.getElementById("reveal-yes").addEventListener("click", reveal);
  allCasesBtn.addEventListener("click", () => { showAll = !showAll; renderCases(); });
  document.querySelectorAll("button.blank-hint").forEach((btn) => btn.addEventListener("click", () => blankHint(btn)));

  function fbRow(index) { return document.querySelector(`.blank-fb[data-index="${index}"]`); }
  function markOf(index) { return document.querySelector(`.mark[data-index="${index}"]`); }
  function fill(template, values) {
    return Object.entries(values).reduce((s, [k, v]) => s.replaceAll(`{${k}}`, v), template);
  }

  function clearMark(index) {
    const input = document.getElementById(`blank-${index}`);
    input.classList.remove("ok", "bad", "unknown");
    input.removeAttribute("aria-invalid");
    markOf(index).textContent = "";
    markOf(index).className = "mark";
    const row = fbRow(index);
    row.hidden = true;
    row.textContent = "";
  }

  function fmt(v) { return typeof v === "number" ? Number(v.toPrecision(5)).toString() : String(v); }
  // numbers under a blank: a scalar reads "expected 0.65898, got 0.65872"; elements keep their index
  function diffLine(diff) {
    if (!diff) return "";
    const parts = [];
    if (diff.reason === "shape") {
      parts.push(fill(T.expected_got, { expected: `${T.shape} ${JSON.stringify(diff.expected_shape)}`, got: JSON.stringify(diff.got_shape) }));
    } else if (Array.isArray(diff.first) && diff.first.length) {
      parts.push(diff.first.slice(0, 3).map((f) => {
        const text = fill(T.expected_got, { expected: fmt(f.expected), got: fmt(f.got) });
        return f.index && f.index.length ? `[${f.index.join(",")}] ${text}` : text;
      }).join(CLIENT.lang === "zh" ? "；" : "; "));
    } else if (diff.expected !== undefined && diff.got !== undefined) {
      parts.push(fill(T.expected_got, { expected: fmt(diff.expected), got: fmt(diff.got) }));
    }
    return parts.join(" · ");
  }
  // the engine's message repeats the case name ("case 'x': ..." / "用例「x」：..."): it is shown already
  function caseMessage(c) {
    for (const name of [c.title, c.name]) {
      if (!name) continue;
      for (const prefix of [`case '${name}': `, `用例「${name}」：`, `case '${name}' `, `用例「${name}」`]) {
        if (c.message.startsWith(prefix)) return c.message.slice(prefix.length);
      }
    }
    return c.message;
  }

  function markBlank(b) {
    const input = document.getElementById(`blank-${b.index}`);
    if (!input) return;
    const mark = markOf(b.index), row = fbRow(b.index);
    input.classList.remove("ok", "bad", "unknown");
    row.className = "blank-fb";
    row.textContent = "";
    if (b.passed === true) {
      input.classList.add("ok"); input.removeAttribute("aria-invalid");
      mark.className = "mark ok"; mark.textContent = "✓"; row.hidden = true;
    } else {
      input.classList.add(b.passed === false ? "bad" : "unknown");
      if (b.passed === false) input.setAttribute("aria-invalid", "true");
      mark.className = "mark bad"; mark.textContent = b.passed === false ? "✗" : "?";
      // what is wrong (the misconception) first, the numbers after it
      row.append(el("span", { class: "msg", html: b.message_html || "" }));
      if (!b.message_html && b.message) row.lastChild.textContent = b.message;
      const d = diffLine(b.diff);
      if (d) row.append(el("span", { class: "diff", text: d }));
      // beside the numbers: a small picture of the learner's values against the expected ones
      const plot = valuesPlot(b.diff, fill(document.getElementById("cases").dataset.plotLabel || "{case}",
                                           { case: `TODO ${b.index}` }));
      if (plot) row.append(plot);
      if (b.misconception) row.dataset.misconception = b.misconception;
      row.hidden = !b.message && !d;
    }
  }

  function caseItem(c) {
    return el("li", { class: c.passed ? "ok" : (c.not_run ? "not-run" : "bad") },
      el("span", { "aria-hidden": "true", text: c.passed ? "✓ " : (c.not_run ? "○ " : "✗ ") }),
      el("strong", { text: c.title || c.name }), " ",
      el("span", { class: "kind", text: CLIENT.lang === "zh" ? `（${T[`kind_${c.kind}`] || c.kind}）` : `(${T[`kind_${c.kind}`] || c.kind})` }),
      c.passed ? "" : el("span", { class: "case-msg", html: ` ${c.message_html ? caseMessageHtml(c) : ""}` }));
  }
  function caseMessageHtml(c) {
    const text = caseMessage(c);
    if (text !== c.message) { const span = document.createElement("span"); span.textContent = text; return span.innerHTML; }
    return c.message_html;
  }

  function renderCases() {
    const cases = document.getElementById("cases");
    const failed = lastCases.filter((c) => !c.passed);
    const shown = showAll || !failed.length ? lastCases : [failed[0]];
    cases.replaceChildren(...shown.map(caseItem));
    const right = lastCases.length - failed.length;
    document.getElementById("cases-count").textContent = lastCases.length
      ? fill(T.cases_passed, { right, total: lastCases.length }) : "";
    document.getElementById("cases-title").textContent = !showAll && failed.length ? T.first_failing : T.cases;
    allCasesBtn.hidden = !(failed.length && lastCases.length > 1);
    allCasesBtn.textContent = showAll ? T.hide_cases : fill(T.show_all_cases, { n: lastCases.length });
    allCasesBtn.setAttribute("aria-expanded", String(showAll));
  }

  function showVerdict(v) {
    v.blanks.forEach(markBlank);
    verdictBox.hidden = false;
    verdictBox.className = `verdict ${v.passed ? "passed" : "failed"}`;
    document.getElementById("verdict-head").textContent = v.passed ? T.passed : T.failed;
    // a misconception says what is wrong before any number does
    const wrong = v.blanks.filter((b) => b.passed === false && b.misconception);
    document.getElementById("verdict-wrong").hidden = !wrong.length;
    document.getElementById("wrong-list").replaceChildren(...wrong.map((b) =>
      el("li", {}, el("strong", { text: `TODO ${b.index}${T.colon}` }), el("span", { html: b.message_html || "" }))));
    const err = document.getElementById("verdict-error");
    err.hidden = !v.error;
    err.textContent = v.error ? v.error.message : "";
    lastCases = v.cases || [];
    showAll = false;
    renderCases();
    const out = (v.stdout || "").trim();
    document.getElementById("stdout-box").hidden = !out;
    document.getElementById("stdout").textContent = out;
    const next = document.getElementById("next-exercise");
    next.hidden = !(v.passed && next.getAttribute("href"));
    if (v.passed) {
      document.getElementById("solved-badge").hidden = false;
      try { localStorage.removeItem(storageKey); } catch (e) { /* ignore */ }
    }
    scrollToVerdict();
  }

  function scrollToVerdict() {
    const r = verdictBox.getBoundingClientRect();
    if (r.top < 0 || r.top > window.innerHeight - 80) {
      verdictBox.scrollIntoView({ behavior: "smooth", block: "start" });
    }
  }

  let busy = false;
  async function check() {
    if (busy) return;
    busy = true;
    checkBtn.disabled = true;
    checkBtn.textContent = T.checking;
    const stopWait = referenceProgress(CLIENT.exercise, checkBtn.closest(".actions") || checkBtn);
    const stopRunning = checkRunning(CLIENT.exercise, checkBtn);
    const res = await apiQueued("POST", `/api/exercises/${CLIENT.exercise}/check`, { fills: inputs.map((x) => x.value) },
      () => { checkBtn.textContent = T.busy_retrying; });
    stopRunning();
    stopWait();
    busy = false;
    checkBtn.disabled = false;
    checkBtn.textContent = T.check;
    if (res.ok) { showVerdict(res.data); return; }
    alertBox(errorText(res));
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

  function showBlankHints(index, htmls) {
    const box = document.querySelector(`.blank-hints[data-index="${index}"]`);
    if (!box) return;
    box.replaceChildren(...htmls.map((h, i) => el("span", { class: "bh", html: `${T.hint} ${i + 1}${T.colon}${h}` })));
    box.hidden = !htmls.length;
  }

  async function blankHint(btn) {
    const index = Number(btn.dataset.index);
    const res = await api("POST", `/api/exercises/${CLIENT.exercise}/hint`, { blank: index });
    if (!res.ok) { alertBox(errorText(res)); return; }
    const shown = (CLIENT.blank_hints[index] = CLIENT.blank_hints[index] || []);
    if (shown.length < res.data.index) shown.push(res.data.html);
    showBlankHints(index, shown);
    if (res.data.last) { btn.disabled = true; btn.title = T.no_more_hints; }
  }

  async function reveal() {
    document.getElementById("reveal-confirm").hidden = true;
    const res = await api("POST", `/api/exercises/${CLIENT.exercise}/solution`);
    if (!res.ok) { alertBox(errorText(res)); return; }
    document.getElementById("solution-code").innerHTML = res.data.html;
    document.getElementById("explanation").innerHTML = res.data.explanation_html;
    const box = document.getElementById("solution");
    box.hidden = false;
    box.scrollIntoView({ behavior: "smooth", block: "start" });
    box.focus({ preventScroll: true });
  }

  function alertBox(text) {
    verdictBox.hidden = false;
    verdictBox.className = "verdict failed";
    document.getElementById("verdict-head").textContent = text;
    document.getElementById("verdict-wrong").hidden = true;
    document.getElementById("verdict-error").hidden = true;
    lastCases = [];
    renderCases();
    scrollToVerdict();
  }

  // the last check's marks come back with its fills (only where the box still holds that fill)
  (CLIENT.marks || []).forEach((m) => {
    const input = document.getElementById(`blank-${m.index}`);
    if (input && m.fill && input.value === m.fill && m.passed !== null && m.passed !== undefined) markBlank(m);
  });
  Object.entries(CLIENT.blank_hints || {}).forEach(([index, htmls]) => showBlankHints(index, htmls));
  // the first empty blank (else the first) gets the focus, without scrolling the statement away
  const first = inputs.find((x) => !x.value) || inputs[0];
  if (first) first.focus({ preventScroll: true });

  // a statement wider than a phone (long inline formulas) scrolls sideways: then the keyboard can reach it
  const statement = document.getElementById("statement");
  function statementFocusable() {
    if (!statement) return;
    if (statement.scrollWidth > statement.clientWidth + 1) statement.setAttribute("tabindex", "0");
    else statement.removeAttribute("tabindex");
  }
  statementFocusable();
  window.addEventListener("resize", statementFocusable);
})();
