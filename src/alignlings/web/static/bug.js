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
    if (e.key === "Tab") {  // indent with four spaces instead of leaving the editor
      e.preventDefault();
      const s = editor.selectionStart;
      editor.setRangeText("    ", s, editor.selectionEnd, "end");
      renumber();
    } else if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      check();
    }
  });
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
    $("verdict-head").textContent = v.passed ? `✓ ${T.passed}` : `✗ ${S.not_yet}`;
    const notes = $("bug-notes");
    notes.replaceChildren();
    const bug = v.bug || {};
    for (const [cls, text] of [["changes", bug.changes], ["message", bug.message], ["hint", bug.hint]]) {
      if (text) notes.append(el("li", { class: `bug-${cls}`, text }));
    }
    if (bug.wrong_fix) notes.querySelector(".bug-message")?.setAttribute("data-wrong-fix", bug.wrong_fix);
    const err = $("verdict-error");
    err.hidden = !v.error;
    err.textContent = v.error ? `${v.error.kind}: ${v.error.message}` : "";
    const cases = $("cases");
    cases.replaceChildren(...(v.cases || []).map((c) =>
      el("li", { class: c.passed ? "ok" : "bad" }, `${c.passed ? "✓" : "✗"} [${c.kind}] `,
         c.passed ? ((c.label && c.label[CLIENT.lang]) || c.name) : c.message)));
    $("stdout-box").hidden = !v.stdout;
    $("stdout").textContent = v.stdout || "";
    if (bug.diff !== undefined) showDiff();
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

  async function check() {
    const btn = $("check-btn");
    btn.disabled = true;
    const res = await apiQueued("POST", `/api/exercises/${CLIENT.exercise}/check`, { code: editor.value },
                                () => { $("verdict-head").textContent = T.busy; });
    btn.disabled = false;
    if (!res.ok) {
      $("verdict").hidden = false;
      $("verdict-head").textContent = errorText(res);
      return;
    }
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
    renumber();
    showDiff();
  });
  showDiff();
})();
