/* Review page: today's due items one at a time, keyboard-first (Enter checks, Enter again moves on;
   A-D answer a quiz question; after a right answer H says it was hard, E too easy; a bug drill's file is edited in a textarea, Ctrl+Enter checks).
   On the progress page: the mastery-by-concept chart. */
"use strict";
(function () {
  const fill = (s, v) => Object.entries(v).reduce((a, [k, x]) => a.replaceAll(`{${k}}`, x), s);
  // one date format per language, as the CLI writes it: 2026-12-03 03:56 / 2026年12月3日 03:56 (local time)
  const day = (iso) => {
    if (!iso) return "—";
    const d = new Date(iso), two = (n) => String(n).padStart(2, "0");
    const time = `${two(d.getHours())}:${two(d.getMinutes())}`;
    return CLIENT.lang === "zh" ? `${d.getFullYear()}年${d.getMonth() + 1}月${d.getDate()}日 ${time}`
                                : `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${time}`;
  };

  /* -- the progress page's chart ---------------------------------------------------------- */
  const chart = document.getElementById("mastery");
  if (chart) drawMastery(chart);

  async function drawMastery(box) {
    const res = await api("GET", "/api/review/mastery");
    if (!res.ok || !res.data.concepts.length) return;
    const t = res.data.t;
    const list = el("ol", { class: "plain mastery-list", id: "mastery-list" });
    for (const c of res.data.concepts) {
      const pct = c.mastery === null ? null : Math.round(c.mastery * 100);
      const meter = el("meter", { min: "0", max: "1", low: "0.5", high: "0.85", optimum: "1",
                                  value: String(c.mastery === null ? 0 : c.mastery),
                                  "aria-label": `${c.title}: ${pct === null ? t.mastery_none : pct + "%"}` });
      list.append(el("li", { "data-concept": c.concept },
        el("span", { class: "mastery-name", text: `${c.title} ` }), meter,
        el("span", { class: "mastery-value", text: ` ${pct === null ? t.mastery_none : pct + "%"} · ` }),
        el("span", { class: "dim", text: fill(t.items, { seen: c.seen, items: c.items }) + " · " }),
        el("a", { href: c.practise, text: t.practise })));
    }
    box.append(el("h2", { text: t.mastery }), el("p", { class: "dim", text: t.mastery_intro }), list);
    box.hidden = false;
  }

  /* -- the review page ---------------------------------------------------------------------- */
  const itemBox = document.getElementById("review-item");
  if (!itemBox) return;
  const R = CLIENT.review;
  const counts = document.getElementById("review-counts");
  const counter = document.getElementById("review-counter");
  const heading = document.getElementById("review-heading");
  const body = document.getElementById("review-body");
  const hintBox = document.getElementById("review-hint");
  const hintBtn = document.getElementById("review-hint-btn");
  const checkBtn = document.getElementById("review-check");
  const nextBtn = document.getElementById("review-next");
  const feedback = document.getElementById("review-feedback");
  const done = document.getElementById("review-done");
  let items = [], index = 0, started = 0, answered = false, right = 0, choice = null;

  const L = CLIENT.l || {};
  // "1 day", "2 days", "0.5 days" (English plural rules; Chinese has one form)
  const plural = new Intl.PluralRules(CLIENT.lang === "zh" ? "zh-CN" : "en");
  const daysText = (n) => fill(L[`days_${plural.select(n) === "one" && String(n) === "1" ? "one" : "other"}`] || "{n} days", { n });

  function showCounts(c) {
    // the menu's badge follows the session (it stayed at 12 with 0 due: issue 22)
    const link = document.getElementById("nav-review");
    let badge = document.getElementById("review-due");
    if (link && c.due && !badge) { badge = el("span", { class: "badge", id: "review-due" }); link.append(" ", badge); }
    if (badge) { badge.textContent = String(c.due || 0); badge.hidden = !c.due; }
    const offer = document.getElementById("review-offer");
    if (offer) offer.hidden = Boolean(c.due);  // nothing due: the next exercise, a cloze round
    if (!c.items) { counts.textContent = R.empty; return; }
    counts.textContent = c.due ? `${fill(R.due, { n: c.due })} · ${fill(R.next, { when: day(c.next) })}`
                       : c.next ? fill(R.none_scheduled, { n: c.items, when: day(c.next) }) : R.none;
  }

  function codeView(it) {
    const pre = el("pre", { class: "code review-code" });
    const inputs = [];
    it.lines.forEach((text, i) => {
      const lineNo = i + 1;
      const row = el("span", { class: lineNo === it.line ? "line focus-line" : "line", "data-line": String(lineNo) });
      let cuts = [];
      if (it.form === "cloze" && lineNo === it.line) cuts = it.masked.map((m) => [m.col, m.end_col, m.key]);
      if (it.form === "blank" && lineNo === it.line) {
        const at = text.indexOf("_____");
        if (at >= 0) cuts = [[at, at + 5, "blank"]];
      }
      if (!cuts.length && it.lines_html) {  // highlighted (the line with inputs stays plain text)
        row.innerHTML = it.lines_html[i] || "";
        pre.append(row);
        return;
      }
      let pos = 0;
      for (const [a, b, key] of cuts) {
        row.append(text.slice(pos, a));
        const n = inputs.length + 1;
        const input = el("input", { type: "text", spellcheck: "false", autocomplete: "off", "data-key": key,
                                    size: String(it.form === "blank" ? 40 : Math.max(4, b - a + 2)),
                                    "aria-label": it.form === "blank" ? fill(R.fill_label, { n: it.blank }) : fill(R.token_label, { n }) });
        input.addEventListener("keydown", (e) => { if (e.key === "Enter") { e.preventDefault(); check(); } });
        inputs.push(input);
        row.append(input);
        pos = b;
      }
      row.append(text.slice(pos));
      pre.append(row);
    });
    return { pre, inputs };
  }

  function show(i) {
    index = i; answered = false; choice = null; rateButtons = null;
    feedback.replaceChildren();
    hintBox.hidden = true;
    nextBtn.hidden = true;
    checkBtn.hidden = false;
    checkBtn.disabled = false;
    const it = items[i];
    counter.textContent = `${fill(R.counter, { i: i + 1, n: items.length })} · ${R["kind_" + it.kind]}`;
    heading.textContent = it.title;
    body.replaceChildren();
    let focus = null;
    if (it.form === "quiz") {
      body.append(el("div", { class: "q-text prose", html: it.question_html }));
      const ol = el("ol", { class: "options" });
      it.options_html.forEach((html, j) => {
        const btn = el("button", { type: "button", class: "option", "data-choice": String(j), "aria-pressed": "false" },
          el("span", { class: "letter", "aria-hidden": "true", text: "ABCDEFGH"[j] }), el("span", { class: "o-text", html }));
        btn.addEventListener("click", () => { choice = j; check(); });
        ol.append(el("li", {}, btn, el("div", { class: "why", hidden: "" })));
      });
      body.append(ol);
      checkBtn.hidden = true;
      focus = ol.querySelector("button");
      hintBtn.hidden = true;
    } else if (it.form === "bug") {
      if (it.statement_html) body.append(el("div", { class: "prose", html: it.statement_html }));
      const area = el("textarea", { class: "code bug-file", spellcheck: "false", autocomplete: "off", wrap: "off",
                                    rows: String(Math.min(40, it.source.split("\n").length + 1)),
                                    "aria-label": R.bug_label, id: "review-file" });
      area.value = it.source;
      area.setAttribute("aria-describedby", "review-file-keys");
      area.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); check(); }
        else if (e.key === "Escape") { e.preventDefault(); checkBtn.focus(); }  // no keyboard trap
        else if (e.key === "Tab" && !e.shiftKey && !e.altKey && !e.ctrlKey && !e.metaKey) {  // indent
          e.preventDefault();
          area.setRangeText("    ", area.selectionStart, area.selectionEnd, "end");
        }
      });
      body.append(el("label", { for: "review-file", class: "dim", text: R.bug_label }), area,
                  el("p", { class: "dim keys", id: "review-file-keys", text: L.review_keys || "" }));
      focus = area;
      hintBtn.hidden = !it.has_hint;
    } else {
      if (it.todo) body.append(el("p", { class: "todo", text: `TODO ${it.blank}: ${it.todo}` }));
      if (it.variant === "fix") body.append(el("p", { class: "fix-variant", text: fill(R.fix_variant, { n: it.blank }) }));
      const { pre, inputs } = codeView(it);
      if (it.prefill && inputs[0]) inputs[0].value = it.prefill;
      body.append(pre);
      focus = inputs[0];
      hintBtn.hidden = !it.has_hint;
    }
    itemBox.hidden = false;
    started = performance.now();
    if (focus) focus.focus();
  }

  async function check() {
    if (answered) return;
    const it = items[index];
    let answer;
    if (it.form === "quiz") {
      if (choice === null) return;
      answer = choice;
    } else if (it.form === "bug") {
      answer = body.querySelector("textarea").value;
    } else if (it.form === "cloze") {
      answer = {};
      body.querySelectorAll("input[data-key]").forEach((inp) => { answer[inp.dataset.key] = inp.value; });
    } else {
      answer = body.querySelector("input[data-key]").value;
    }
    answered = true;
    const seconds = (performance.now() - started) / 1000;
    checkBtn.disabled = true;
    body.querySelectorAll("input, textarea, button.option").forEach((x) => { x.disabled = true; });
    feedback.replaceChildren(el("p", { text: R.checking }));
    const res = await apiQueued("POST", "/api/review/answer", { item: it.item, pack: it.pack, answer, seconds },
                                () => { feedback.replaceChildren(el("p", { text: T.busy })); });
    if (!res.ok) {
      answered = false;
      checkBtn.disabled = false;
      body.querySelectorAll("input, textarea, button.option").forEach((x) => { x.disabled = false; });
      feedback.replaceChildren(el("p", { class: "review-result wrong", text: errorText(res) }));
      return;
    }
    const { result, schedule } = res.data;
    right += result.correct ? 1 : 0;
    const out = [el("p", { class: `review-result ${result.correct ? "right" : "wrong"}`, text: result.correct ? R.right : R.wrong })];
    if (it.form === "quiz") {
      body.querySelectorAll("button.option").forEach((b, j) => {
        const o = result.options[j];
        b.classList.toggle("right", o.correct);
        b.classList.toggle("wrong", j === answer && !o.correct);
        b.setAttribute("aria-pressed", String(j === answer));
        const why = b.parentElement.querySelector(".why");
        why.innerHTML = o.why_html; why.hidden = false;
      });
      if (result.predict_html) out.push(el("div", { class: "prose predict-review", html: result.predict_html }));  // a predict item's run and why
      if (result.chart_html) out.push(el("div", { html: result.chart_html }));  // its chart, with the numbers as a table
    } else if (it.form === "cloze") {
      const inputs = [...body.querySelectorAll("input[data-key]")];
      result.results.forEach((r, j) => { if (inputs[j]) inputs[j].classList.add(r.correct ? "ok" : "bad"); });
      if (!result.correct) out.push(el("p", { text: fill(R.expected, { expected: result.expected }) }));
    } else if (it.form === "bug") {
      body.querySelector("textarea").classList.add(result.correct ? "ok" : "bad");
      if (result.feedback_html) out.push(el("div", { class: "blank-fb prose", html: result.feedback_html }));
      if (!result.correct && result.expected == null) out.push(el("p", { text: R.bug_withheld }));  // not solved: no fix shown
      else if (!result.correct) out.push(el("p", { class: "bug-fix-label", text: L.reference_fix || R.bug_fix }),
                                         el("p", { class: "dim", text: L.reference_legend || "" }), diffView(result.expected));
      else if (result.story_html) out.push(el("h3", { text: R.bug_story }), el("div", { class: "prose bug-story", html: result.story_html }));
    } else {
      body.querySelector("input[data-key]").classList.add(result.correct ? "ok" : "bad");
      if (!result.correct) {
        out.push(el("p", { text: result.expected == null ? R.withheld : fill(R.expected, { expected: result.expected }) }));
        if (result.repeated) out.push(el("p", { text: R.repeated }));
        if (result.feedback_html) out.push(el("div", { class: "blank-fb prose", html: result.feedback_html }));
      }
    }
    if (schedule) {
      out.push(el("p", { class: "dim review-rated", id: "review-rated", text: ratedText(schedule) }));
      if (result.correct) out.push(rateGroup(it, schedule.rating));
    } else out.push(el("p", { class: "dim review-rated", text: R.not_saved }));  // the store could not be written
    feedback.replaceChildren(...out);
    if (res.data.counts) showCounts(res.data.counts);
    checkBtn.hidden = true;
    hintBtn.hidden = true;
    nextBtn.hidden = false;
    nextBtn.focus();
  }

  function ratedText(schedule) {
    const days = Math.max(0, Math.round(schedule.interval_days * 10) / 10);
    return fill(L.rated || R.rated, { rating: R["rating_" + schedule.rating], days: daysText(days), date: day(schedule.due) });
  }

  /* after a right answer: "that was hard" / "too easy" re-rate the same review (pressed again: back
     to good); H and E do the same from the keyboard, Enter still moves on. ``given``: the rating
     the answer got (good, or hard after a hint: that button starts pressed) */
  let rateButtons = null, rating = null;
  function rateGroup(it, given) {
    rating = given;
    const group = el("div", { class: "review-rate", role: "group", "aria-labelledby": "review-rate-q" },
      el("span", { id: "review-rate-q", text: R.rate_question + " " }));
    rateButtons = {};
    for (const r of ["hard", "easy"]) {
      const b = el("button", { type: "button", "data-rating": r, "aria-pressed": String(given === r),
                               text: R["rate_" + r] });
      b.addEventListener("click", () => rerate(it, rating === r ? "good" : r));
      rateButtons[r] = b;
      group.append(b, " ");
    }
    group.append(el("p", { class: "dim keys", id: "review-rate-keys", text: R.rate_keys }));
    return group;
  }

  async function rerate(it, r) {
    const res = await api("POST", "/api/review/rate", { item: it.item, pack: it.pack, rating: r });
    const rated = document.getElementById("review-rated");
    if (!res.ok || !res.data.schedule) {
      if (rated) rated.textContent = fill(R.rate_failed, { error: res.ok ? R.not_saved : errorText(res) });
      return;
    }
    rating = r;
    for (const [k, b] of Object.entries(rateButtons)) b.setAttribute("aria-pressed", String(k === r));
    if (rated) rated.textContent = ratedText(res.data.schedule);
    if (res.data.counts) showCounts(res.data.counts);
  }

  /* a unified diff, coloured line by line: the reference fix against the buggy file */
  function diffView(text) {
    const pre = el("pre", { class: "diff bug-fix", tabindex: "0", role: "region", "aria-label": L.reference_fix || "diff" });
    (text || "").split("\n").forEach((line, i) => {
      const kind = line.startsWith("@@") ? "hunk" : (line.startsWith("---") || line.startsWith("+++")) ? "meta"
                 : line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : "ctx";
      if (i) pre.append("\n");
      // the engine labels the new side "yours.py": here it is the reference fix
      const shown = line.startsWith("+++") && L.reference_label ? `+++ ${L.reference_label}` : line;
      pre.append(el("span", { class: `diff-${kind}`, text: shown }));
    });
    return pre;
  }

  function finish() {
    itemBox.hidden = true;
    done.textContent = fill(R.done, { n: items.length, right });
    done.hidden = false;
    done.focus();
  }

  checkBtn.addEventListener("click", check);
  nextBtn.addEventListener("click", () => (index + 1 < items.length ? show(index + 1) : finish()));
  hintBtn.addEventListener("click", async () => {
    const it = items[index];
    const res = await api("POST", "/api/review/hint", { item: it.item, pack: it.pack });  // the server records it
    if (!res.ok) {
      hintBox.textContent = errorText(res);
      hintBox.hidden = false;
      return;
    }
    const hints = res.data.hints;
    hintBox.textContent = it.form === "cloze" ? hints.map((c, j) => fill(R.starts_with, { n: j + 1, c })).join(" · ")
                                              : hints[0];
    hintBox.hidden = false;
    const input = body.querySelector("input[data-key], textarea");
    if (input) input.focus();
  });
  document.addEventListener("keydown", (e) => {
    const it = items[index];
    if (!it || itemBox.hidden || e.ctrlKey || e.metaKey || e.altKey) return;
    if (it.form === "quiz" && !answered) {
      const j = "abcdefgh".indexOf(e.key.toLowerCase());
      if (j >= 0 && j < it.options_html.length && e.key.length === 1) { e.preventDefault(); choice = j; check(); }
    } else if (answered && rateButtons && !/^(INPUT|TEXTAREA)$/.test(e.target.tagName)) {
      const r = { h: "hard", e: "easy" }[e.key.toLowerCase()];
      if (r && e.key.length === 1) { e.preventDefault(); rateButtons[r].click(); }
    }
  });

  (async function load() {
    const q = new URLSearchParams();
    if (CLIENT.concept) q.set("concept", CLIENT.concept);
    if (CLIENT.limit) q.set("limit", CLIENT.limit);
    const res = await api("GET", `/api/review/queue${q.toString() ? "?" + q : ""}`);
    if (!res.ok) { counts.textContent = errorText(res); return; }
    items = res.data.items;
    showCounts(res.data.counts);
    if (items.length) show(0);
  })();
})();
