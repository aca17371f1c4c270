/* The join page of a classroom: name + class code (or a recovery code) -> the learner's cookie, then
   the page the learner asked for. A new learner first sees their recovery code. Refusals are the
   server's own words, in the page's language. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("client-data").textContent);
  const next = data.next || "/";

  function refusal(res) {
    const d = res.data && res.data.detail;
    if (typeof d === "string" && d) return d;  // plain words in the learner's language
    return (data.s && data.s.bad_request) || errorText(res);
  }

  async function send(form, body, errorId) {
    const error = document.getElementById(errorId);
    error.textContent = "";
    const res = await api("POST", "/api/join", Object.assign({ next: next }, body));
    if (!res.ok) {
      error.textContent = refusal(res);
      return;
    }
    if (res.data.recovery_code) {
      document.getElementById("recovery-code").textContent = res.data.recovery_code;
      document.getElementById("join-continue").setAttribute("href", res.data.next || next);
      document.getElementById("join-new").hidden = true;
      document.getElementById("join-recover").hidden = true;
      const done = document.getElementById("join-done");
      done.hidden = false;
      done.focus();
    } else {
      window.location.assign(res.data.next || next);
    }
  }

  const form = document.getElementById("join-form");
  if (form) {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      send(form, {
        name: document.getElementById("join-name").value,
        code: document.getElementById("join-code").value,
      }, "join-error");
    });
  }
  const recover = document.getElementById("recover-form");
  if (recover) {
    recover.addEventListener("submit", (event) => {
      event.preventDefault();
      send(recover, { recovery: document.getElementById("recover-code").value }, "recover-error");
    });
  }
})();
