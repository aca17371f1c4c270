/* Quiz page: one question at a time; answering shows right/wrong and why, for every option. */
"use strict";
(function () {
  const articles = [...document.querySelectorAll("article.question")];
  articles.forEach((art, i) => {
    art.querySelectorAll("button.option").forEach((btn) => btn.addEventListener("click", () => answer(art, btn)));
    const next = art.querySelector("button.next");
    if (next) next.addEventListener("click", () => show(i + 1));
    const prev = art.querySelector("button.prev");
    if (prev) prev.addEventListener("click", () => show(i - 1));
  });

  function show(i) {
    articles.forEach((a, j) => { a.hidden = j !== i; });
    const first = articles[i].querySelector("button.option:not(:disabled)") || articles[i].querySelector("button");
    if (first) first.focus();
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
    const d = res.data;
    options.forEach((b, i) => {
      const o = d.options[i];
      b.classList.toggle("right", o.correct);
      b.classList.toggle("wrong", i === d.choice && !o.correct);
      const why = b.parentElement.querySelector(".why");
      why.innerHTML = o.why_html;
      why.classList.toggle("right", o.correct);
      why.hidden = false;
    });
    result.className = `q-result ${d.correct ? "right" : "wrong"}`;
    result.textContent = d.correct ? T.right : T.wrong;
    const next = art.querySelector("button.next");
    if (next) { next.hidden = false; next.focus(); }
    if (d.score) {
      const done = document.getElementById("quiz-done");
      done.textContent = T.quiz_done.replace("{right}", d.score.right).replace("{total}", d.score.total);
      done.hidden = false;
    }
  }
})();
