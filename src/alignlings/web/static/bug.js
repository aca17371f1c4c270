/* Spot-the-bug drill page: the whole file in an editor with line numbers, the diff of the learner's
   change against buggy.py, Check (the engine's verdict with its "bug" entry), hints, the story. */
"use strict";
(function () {
  const S = CLIENT.s;
  const editor = document.getElementById("bug-editor");
  const gutter = document.getElementById("bug-gutter");
  const $ = (id) => document.getElementById(id);

  function renumber() {
    const n = editor.value.split("\n").length;
    gutter.textContent = Array.from({ length: n }, (_, i) => String(i + 1)).join("\n");
    gutter.scrollTop = editor.scrollTop;
  }
  editor.addEventListener("input", renumber);
  editor.addEventListener("scroll", () => { gutter.scrollTop = editor.scrollTop; });
  editor.addEventListener("keydown", (e) => {
    if (e.key === "Escape") {  // the way out of the editor (WCAG 2.1.2: no keyboard trap)
      e.preventDefault();
      $("check-btn").focus();
    } else if (e.key === "Tab" && !e.altKey && !e.ctrlKey && !e.metaKey) {  // indent / dedent four spaces
      e.preventDefault();
      const s = editor.selectionStart;
      if (e.shiftKey) {
        const lineStart = editor.value.lastIndexOf("\n", s - 1) + 1;
        const lead = editor.value.slice(lineStart, lineStart + 4).match(/^ */)[0].length;
        if (lead) editor.setRangeText("", lineStart, lineStart + lead, "end");
        editor.setSelectionRange(Math.max(lineStart, s - lead), Math.max(lineStart, s - lead));
      } else {
        editor.setRangeText("    ", s, editor.selectionEnd, "end");
      }
      editor.dispatchEvent(new Event("input"));
    } else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      check();
    }
  });

  /* drafts: every edit is kept in this browser (per drill) until it is checked; a reload brings it
     back, and leaving with unchecked changes asks first */
  const draftKey = `alignlings:bug-draft:${CLIENT.exercise}`;
  let saved = editor.value;  // what the server has: the last checked file (or buggy.py)
  const dirty = () => editor.value !== saved;
  try {
    const draft = localStorage.getItem(draftKey);
    if (draft !== null && draft !== saved) {
      editor.value = draft;
      $("draft-note").hidden = false;
    } else if (draft !== null) {
      localStorage.removeItem(draftKey);
    }
  } catch (e) { /* no storage: nothing to restore */ }
  editor.addEventListener("input", () => {
    try {
      if (dirty()) localStorage.setItem(draftKey, editor.value); else localStorage.removeItem(draftKey);
    } catch (e) { /* storage full or off: the leave warning still protects the edit */ }
  });
  window.addEventListener("beforeunload", (e) => {
    if (!dirty()) return;
    e.preventDefault();
    e.returnValue = "";  // the browser asks "leave the page?" (its own words)
  });
  function markSaved(code) {
    saved = code;
    try { if (!dirty()) localStorage.removeItem(draftKey); } catch (e) { /* ignore */ }
  }
  renumber();

  async function showDiff() {
    const res = await api("POST", `/api/bug/${CLIENT.exercise}/diff`, { code: editor.value });
    if (!res.ok) { $("bug-changes").textContent = errorText(res); return; }
    $("bug-changes").textContent = res.data.changes;
    $("bug-diff").innerHTML = res.data.html || "";
  }

  function showVerdict(v) {
    const box = $("verdict");
    box.hidden = false;
    box.classList.toggle("passed", !!v.passed);
    box.classList.toggle("failed", !v.passed);
    $("verdict-head").replaceChildren(icon(v.passed ? "ok" : "bad"), v.passed ? T.passed : S.not_yet);
    const notes = $("bug-notes");
    notes.replaceChildren();
    const bug = v.bug || {};
    for (const cls of ["changes", "message", "hint"]) {
      if (!bug[cls] || bug[`${cls}_html`] === "") continue;  // "" : it repeats what changed
      const li = el("li", { class: `bug-${cls}` });
      if (cls === "hint") li.append(icon("hint"));
      li.append(el("span", { class: "note-text", html: bug[`${cls}_html`] || "" }));
      if (!bug[`${cls}_html`]) li.lastChild.textContent = bug[cls];
      notes.append(li);
    }
    if (bug.wrong_fix) notes.querySelector(".bug-message")?.setAttribute("data-wrong-fix", bug.wrong_fix);
    const err = $("verdict-error");
    err.hidden = !v.error;
    err.textContent = v.error ? `${v.error.kind}: ${v.error.message}` : "";
    const cases = $("cases");
    cases.replaceChildren(...(v.cases || []).map((c) => {
      const kind = c.kind_label || T[`kind_${c.kind}`] || c.kind;
      const li = el("li", { class: c.passed ? "ok" : "bad", "data-kind": c.kind },
        icon(c.passed ? "ok" : "bad"),
        el("span", { class: "kind", text: CLIENT.lang === "zh" ? `【${kind}】` : `[${kind}] ` }));
      if (c.passed) li.append(c.title || (c.label && c.label[CLIENT.lang]) || c.name);
      else li.append(el("span", { class: "case-msg", html: c.message_html || "" }));
      if (!c.passed && !c.message_html) li.lastChild.textContent = c.message;
      return li;
    }));
    $("stdout-box").hidden = !v.stdout;
    $("stdout").textContent = v.stdout || "";
    if (bug.diff !== undefined) showDiff();
    const next = $("next-exercise");
    if (next) next.hidden = !v.passed;
    if (v.passed) {
      $("solved-badge").hidden = false;
      api("GET", `/api/bug/${CLIENT.exercise}/story`).then((res) => {
        if (!res.ok) return;
        $("story-body").innerHTML = res.data.html;
        $("story").hidden = false;
      });
    }
    box.focus();
  }

  /* inline SVG icons: they draw the same with or without an emoji font */
  function icon(name) {
    const paths = { ok: "M3 8.5l3.2 3.2L13 4.8", bad: "M4 4l8 8M12 4l-8 8",
                    hint: "M7 2.5a4.5 4.5 0 1 0 0 9a4.5 4.5 0 1 0 0-9zM10.3 10.3L14 14" };
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 16 16");
    svg.setAttribute("class", `icon icon-${name}`);
    svg.setAttribute("aria-hidden", "true");
    svg.setAttribute("focusable", "false");
    const path = document.createElementNS(ns, "path");
    path.setAttribute("d", paths[name]);
    svg.append(path);
    return svg;
  }

  async function check() {
    const btn = $("check-btn");
    btn.disabled = true;
    const code = editor.value;
    btn.textContent = T.checking;
    const stopWait = referenceProgress(CLIENT.exercise, btn.closest(".actions") || btn);
    const stopRunning = checkRunning(CLIENT.exercise, btn);
    const res = await apiQueued("POST", `/api/exercises/${CLIENT.exercise}/check`, { code },
                                () => { $("verdict-head").textContent = T.busy; });
    stopRunning();
    stopWait();
    btn.textContent = T.check;
    btn.disabled = false;
    if (!res.ok) {
      $("verdict").hidden = false;
      $("verdict-head").textContent = errorText(res);
      $("verdict").classList.add("failed");
      return;
    }
    markSaved(code);  // the server keeps the checked file: no longer a draft
    $("draft-note").hidden = true;
    showVerdict(res.data);
  }

  async function hint() {
    const res = await api("POST", `/api/exercises/${CLIENT.exercise}/hint`, {});
    if (!res.ok) return;
    $("hints").hidden = false;
    const list = $("hint-list");
    if (list.children.length < res.data.index) list.append(el("li", { html: res.data.html }));
    $("hint-count").textContent = String(res.data.index);
    if (res.data.last) $("hint-btn").disabled = true;
  }

  $("check-btn").addEventListener("click", check);
  $("diff-btn").addEventListener("click", showDiff);
  $("hint-btn").addEventListener("click", hint);
  $("reset-btn").addEventListener("click", () => {
    if (!window.confirm(S.reset_ask)) return;
    editor.value = CLIENT.buggy;
    editor.dispatchEvent(new Event("input"));
    showDiff();
  });
  showDiff();
})();
