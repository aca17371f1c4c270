/* Quiz page: one question at a time; answering shows right/wrong and why, for every option.
   Answers of the current round come back after a reload (from the progress store); Retake starts over. */
"use strict";
(function () {
  const articles = [...document.querySelectorAll("article.question")];
  const progress = document.getElementById("quiz-progress");
  const retakeBtn = document.getElementById("retake-btn");
  const done = document.getElementById("quiz-done");
  const wayOn = document.getElementById("quiz-way-on");
  const fill = (s, v) => Object.entries(v).reduce((a, [k, x]) => a.replaceAll(`{${k}}`, x), s);
  articles.forEach((art, i) => {
    art.querySelectorAll("button.option").forEach((btn) => btn.addEventListener("click", () => answer(art, btn)));
    const next = art.querySelector("button.next");
    if (next) next.addEventListener("click", () => show(i + 1));
    const prev = art.querySelector("button.prev");
    if (prev) prev.addEventListener("click", () => show(i - 1));
  });
  retakeBtn.addEventListener("click", retake);

  function show(i, focus = true) {
    articles.forEach((a, j) => { a.hidden = j !== i; });
    const first = articles[i].querySelector("button.option:not(:disabled)") || articles[i].querySelector("button.next, button");
    if (first && focus) first.focus();
  }

  function apply(art, d) {
    const options = [...art.querySelectorAll("button.option")];
    options.forEach((b, i) => {
      const o = d.options[i];
      b.disabled = true;
      b.classList.toggle("right", o.correct);
      b.classList.toggle("wrong", i === d.choice && !o.correct);
      if (i === d.choice) b.setAttribute("aria-label", `${T.your_answer}${T.colon}${b.innerText}`);
      const why = b.parentElement.querySelector(".why");
      why.innerHTML = o.why_html;
      why.classList.toggle("right", o.correct);
      why.hidden = false;
    });
    const result = art.querySelector(".q-result");
    result.hidden = false;
    result.className = `q-result ${d.correct ? "right" : "wrong"}`;
    result.textContent = d.correct ? T.right : T.wrong;
    const next = art.querySelector("button.next");
    if (next) next.hidden = false;
    art.dataset.answered = d.correct ? "right" : "wrong";
  }

  function summary(p) {
    progress.textContent = fill(T.quiz_progress, p);
    retakeBtn.hidden = p.answered === 0;
    if (p.answered === p.total) {
      const finished = document.getElementById("quiz").dataset.done || T.quiz_done;  // a bug-or-not drill says its own
      done.textContent = `${fill(finished, p)} ${p.right === p.total ? T.quiz_passed : ""}`.trim();
      done.hidden = false;
    } else {
      done.hidden = true;
    }
    if (wayOn) wayOn.hidden = p.answered !== p.total;  // after the last question: on to the next exercise
  }

  async function answer(art, btn) {
    const options = [...art.querySelectorAll("button.option")];
    options.forEach((b) => { b.disabled = true; });
    const res = await api("POST", `/api/quiz/${encodeURIComponent(art.dataset.qid)}`, { choice: Number(btn.dataset.choice) });
    const result = art.querySelector(".q-result");
    result.hidden = false;
    if (!res.ok) {
      options.forEach((b) => { b.disabled = false; });
      result.className = "q-result wrong";
      result.textContent = errorText(res);
      return;
    }
    apply(art, res.data);
    const next = art.querySelector("button.next");
    if (res.data.progress) summary(res.data.progress);
    if (next) next.focus();
    else if (wayOn && !wayOn.hidden) wayOn.querySelector("a").focus();
    else result.setAttribute("tabindex", "-1");
  }

  async function retake() {
    const exercises = [...new Set(articles.map((a) => a.dataset.exercise))];
    for (const ex of exercises) {
      const res = await api("POST", "/api/quiz-retake", { exercise: ex });
      if (!res.ok) { progress.textContent = errorText(res); return; }
    }
    articles.forEach((art) => {
      delete art.dataset.answered;
      art.querySelectorAll("button.option").forEach((b) => { b.disabled = false; b.classList.remove("right", "wrong"); b.removeAttribute("aria-label"); });
      art.querySelectorAll(".why").forEach((w) => { w.hidden = true; w.innerHTML = ""; });
      art.querySelector(".q-result").hidden = true;
      const next = art.querySelector("button.next");
      if (next) next.hidden = true;
    });
    summary({ answered: 0, right: 0, total: articles.length });
    show(0);
  }

  // the current round's answers, as stored
  const answered = CLIENT.answered || {};
  articles.forEach((art) => { if (answered[art.dataset.qid]) apply(art, answered[art.dataset.qid]); });
  const right = articles.filter((a) => a.dataset.answered === "right").length;
  const count = articles.filter((a) => a.dataset.answered).length;
  summary({ answered: count, right, total: articles.length });
  const firstOpen = articles.findIndex((a) => !a.dataset.answered);
  show(firstOpen === -1 ? articles.length - 1 : firstOpen, false);
})();
