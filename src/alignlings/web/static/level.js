/* A level-4/5 page (web/levels.py): the whole file in an editor, kept per level (the last checked
   file comes from the server; unsaved typing is kept in this browser per exercise and level),
   checked at its level through the session; the verdict's cases and the named misconception. */
"use strict";
(function () {
  const LV = CLIENT.lv;
  const editor = document.getElementById("level-editor");
  const draftKey = `alignlings:level:${CLIENT.exercise}:${CLIENT.level}`;
  const saved = window.localStorage ? localStorage.getItem(draftKey) : null;
  if (saved !== null && saved !== editor.value) {
    editor.value = saved;
    document.getElementById("draft-note").hidden = false;
  }
  editor.addEventListener("input", () => { try { localStorage.setItem(draftKey, editor.value); } catch (e) { /* full */ } });
  editor.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); check(); }
    else if (e.key === "Escape") { e.preventDefault(); document.getElementById("check-btn").focus(); }
    else if (e.key === "Tab" && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey) {
      e.preventDefault();
      editor.setRangeText("    ", editor.selectionStart, editor.selectionEnd, "end");
    }
  });
  const btn = document.getElementById("check-btn");
  btn.addEventListener("click", check);

  async function check() {
    btn.disabled = true;
    const box = document.getElementById("verdict");
    const head = document.getElementById("verdict-head");
    const stop = referenceProgress(CLIENT.exercise, btn);
    const res = await apiQueued("POST", `/api/exercises/${CLIENT.exercise}/check`, { code: editor.value, level: CLIENT.level });
    stop();
    btn.disabled = false;
    box.hidden = false;
    const err = document.getElementById("verdict-error");
    const misc = document.getElementById("level-misconception");
    const cases = document.getElementById("cases");
    cases.replaceChildren();
    if (!res.ok) {
      head.textContent = "";
      err.hidden = false;
      err.textContent = errorText(res);
      return;
    }
    const v = res.data;
    try { localStorage.removeItem(draftKey); } catch (e) { /* none */ }  // checked: the server keeps it now
    head.textContent = (v.passed ? LV.passed : LV.failed).replace("{n}", String(v.level));
    head.className = "verdict-head " + (v.passed ? "ok" : "bad");
    err.hidden = !v.error;
    err.textContent = v.error ? v.error.message : "";
    misc.hidden = !v.misconception;
    misc.textContent = v.misconception ? v.misconception.message : "";
    for (const c of v.cases || []) {
      cases.append(el("li", { class: c.passed ? "ok" : "bad", "data-case": c.name },
                      el("span", { class: "mark", "aria-hidden": "true", text: c.passed ? "✓ " : "✗ " }),
                      el("span", { text: c.passed ? ((c.label && c.label[CLIENT.lang]) || c.name) : c.message })));
    }
    const out = document.getElementById("stdout-box");
    out.hidden = !v.stdout;
    document.getElementById("stdout").textContent = v.stdout || "";
    if (v.passed) {
      document.getElementById("solved-badge").hidden = false;
      const here = document.querySelector(`#level-switch a[data-level="${CLIENT.level}"]`);
      if (here && !here.textContent.endsWith("✓")) here.textContent += " ✓";
    }
    box.focus();
  }
})();
