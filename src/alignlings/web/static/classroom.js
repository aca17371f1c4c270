/* The join page of a classroom: name + class code -> the learner's cookie, then the home page. */
"use strict";
(function () {
  const form = document.getElementById("join-form");
  if (!form) return;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const error = document.getElementById("join-error");
    error.textContent = "";
    const res = await api("POST", "/api/join", {
      name: document.getElementById("join-name").value,
      code: document.getElementById("join-code").value,
    });
    if (res.ok) {
      window.location.assign(res.data.next || "/");
    } else {
      error.textContent = errorText(res);
    }
  });
})();
