/* MLM drill: masked tokens as inputs; Refresh draws new masks at the slider's ratio; Check grades. */
"use strict";
(function () {
  // the snippet tabs scroll in one row on a phone: bring the current one into view
  const current = document.querySelector("nav.tabs a.active");
  if (current && current.parentElement.scrollWidth > current.parentElement.clientWidth) {
    current.parentElement.scrollLeft = current.offsetLeft - current.parentElement.offsetLeft - 16;
  }
  const gate = document.getElementById("open-anyway");
  if (gate) { // the drill shows the solution of an exercise not solved yet: opening it is recorded
    gate.addEventListener("click", async () => {
      const res = await api("POST", `/api/cloze/${CLIENT.snippet}/open`);
      if (res.ok) location.reload();
    });
    return;
  }
  if (!CLIENT.draw) return; // its track is locked for this learner: the page says why, there is no drill
  let draw = CLIENT.draw; // {snippet, seed, ratio, maskable, masked: [keys], counter}
  const code = document.getElementById("cloze-code");
  const counter = document.getElementById("cloze-counter");
  const ratio = document.getElementById("ratio");
  const ratioValue = document.getElementById("ratio-value");
  const score = document.getElementById("cloze-score");
  const results = document.getElementById("cloze-results");
  const checkBtn = document.getElementById("cloze-check-btn");
  const WIDTH = 6; // ch, as the server draws them

  function inputs() { return [...code.querySelectorAll("input.mask")].sort((a, b) => a.dataset.n - b.dataset.n); }

  function wire() {
    const list = inputs();
    list.forEach((input, i) => {
      input.addEventListener("keydown", (ev) => {
        if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") return;
        if (ev.key === "Tab" && !ev.altKey) {
          const j = ev.shiftKey ? i - 1 : i + 1;
          if (j >= 0 && j < list.length) { ev.preventDefault(); list[j].focus(); }
        } else if (ev.key === "Enter") {
          ev.preventDefault();
          if (i + 1 < list.length) list[i + 1].focus(); else check();
        }
      });
      input.addEventListener("input", () => {
        input.classList.remove("ok", "bad");
        input.style.width = `${Math.max(WIDTH, input.value.length + 1)}ch`; // equal boxes that grow as you type
        const mark = code.querySelector(`.mark[data-key="${CSS.escape(input.dataset.key)}"]`);
        if (mark) { mark.className = "mark"; mark.textContent = ""; }
        const right = code.querySelector(`.right-token[data-key="${CSS.escape(input.dataset.key)}"]`);
        if (right) right.hidden = true;
      });
    });
    if (list.length) list[0].focus({ preventScroll: true });
  }

  async function refresh() {
    const res = await api("POST", `/api/cloze/${draw.snippet}`, { action: "draw", ratio: Number(ratio.value) });
    if (!res.ok) { score.hidden = false; score.textContent = errorText(res); return; }
    const { html, ...rest } = res.data;
    draw = rest;
    code.innerHTML = html;
    counter.textContent = draw.counter;
    counter.dataset.maskable = draw.maskable;
    counter.dataset.masked = draw.masked.length;
    score.hidden = true;
    results.replaceChildren();
    wire();
  }

  let busy = false;
  async function check() {
    if (busy) return;
    busy = true; checkBtn.disabled = true; checkBtn.textContent = T.checking;
    const answers = {};
    inputs().forEach((inp) => { answers[inp.dataset.key] = inp.value; });
    const res = await apiQueued("POST", `/api/cloze/${draw.snippet}`, { action: "check", masked: draw.masked, answers },
      () => { checkBtn.textContent = T.busy_retrying; });
    busy = false; checkBtn.disabled = false; checkBtn.textContent = T.check;
    score.hidden = false;
    if (!res.ok) { score.textContent = errorText(res); return; }
    score.textContent = res.data.score;
    const byKey = Object.fromEntries(res.data.results.map((r) => [r.key, r]));
    const items = [];
    inputs().forEach((inp) => {
      const r = byKey[inp.dataset.key];
      if (!r) return;
      inp.classList.remove("ok", "bad");
      inp.classList.add(r.correct ? "ok" : "bad");
      const mark = code.querySelector(`.mark[data-key="${CSS.escape(r.key)}"]`);
      if (mark) { mark.className = `mark ${r.correct ? "ok" : "bad"}`; mark.textContent = r.correct ? "✓" : "✗"; }
      inp.title = r.correct ? (r.how === "equivalent" ? `≡ ${r.token}` : "") : r.token;
      const right = code.querySelector(`.right-token[data-key="${CSS.escape(r.key)}"]`);
      if (right) { // the right token, in place, after checking
        right.hidden = r.correct && r.how === "exact";
        right.textContent = r.correct ? `≡ ${r.token}` : r.token;
        right.title = T.right_token;
      }
      items.push(el("li", { class: r.correct ? "ok" : "bad" },
        `[${inp.dataset.n}] ${r.correct ? "✓" : "✗"} ${r.answer || "∅"}${r.correct && r.how === "exact" ? "" : `  →  ${r.token}`}`));
    });
    results.replaceChildren(...items);
  }

  ratio.addEventListener("input", () => { ratioValue.textContent = `${Math.round(ratio.value * 100)}%`; });
  ratio.addEventListener("change", refresh);
  document.getElementById("refresh-btn").addEventListener("click", refresh);
  checkBtn.addEventListener("click", check);
  document.addEventListener("keydown", (ev) => {
    if ((ev.ctrlKey || ev.metaKey) && ev.key === "Enter") { ev.preventDefault(); check(); }
  });
  counter.dataset.maskable = draw.maskable;
  counter.dataset.masked = draw.masked.length;
  wire();
})();
