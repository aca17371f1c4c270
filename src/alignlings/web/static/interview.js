/* Mock interview page: the clock counts down from the server's seconds_left; each item answers through
   /api/interview/answer (a choice is final; a file is graded and says whether it passes); Finish (or the
   clock reaching zero) ends it and reloads onto the report. */
"use strict";
(function () {
  const S = CLIENT.s;
  const clock = document.getElementById("interview-clock");
  if (clock) {
    const end = Date.now() + Number(clock.dataset.seconds) * 1000;
    const tick = () => {
      const left = Math.max(0, Math.round((end - Date.now()) / 1000));
      const m = Math.floor(left / 60), s = left % 60;
      clock.textContent = `${String(m).padStart(2, "0")}:${String(s).padStart(2, "0")}`;
      if (left <= 0) { clearInterval(timer); finish(); }
    };
    const timer = setInterval(tick, 1000);
    tick();
  }
  async function finish() {
    await api("POST", "/api/interview/finish");
    window.location.href = "/interview";
  }
  const finishBtn = document.getElementById("interview-finish");
  if (finishBtn) finishBtn.addEventListener("click", finish);
  document.querySelectorAll("article.interview-item").forEach((art) => {
    const btn = art.querySelector(".iv-submit");
    const status = art.querySelector(".iv-status");
    const index = Number(art.dataset.index);
    btn.addEventListener("click", async () => {
      let body;
      if (art.dataset.kind === "choice") {
        const chosen = art.querySelector("input[type=radio]:checked");
        if (!chosen) return;
        body = { index, choice: Number(chosen.value) };
      } else {
        body = { index, code: art.querySelector("textarea").value };
      }
      btn.disabled = true;
      status.textContent = "…";
      const res = await apiQueued("POST", "/api/interview/answer", body);
      if (!res.ok) { status.textContent = errorText(res); btn.disabled = false; return; }
      if (art.dataset.kind === "choice") {
        status.textContent = S.chosen;
        art.querySelector("fieldset").disabled = true;
      } else {
        status.textContent = res.data.summary;
        btn.disabled = false;
      }
    });
  });
  const form = document.getElementById("interview-start");
  async function start(body) {
    const status = document.getElementById("iv-start-status");
    const res = await api("POST", "/api/interview/start", body);
    if (!res.ok) { if (status) status.textContent = errorText(res); return; }
    window.location.href = "/interview";
  }
  if (form) form.addEventListener("submit", (e) => {
    e.preventDefault();
    const minutes = Number(form.minutes.value || 45);
    const body = { minutes };
    if (form.track.value) body.track = form.track.value;
    if (form.seed.value !== "") body.seed = Number(form.seed.value);
    start(body);
  });
  document.querySelectorAll(".iv-start-assigned").forEach((b) => b.addEventListener("click", () => start({ assignment: b.dataset.assignment })));
})();
