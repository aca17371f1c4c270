/* The teacher page: rename, merge and remove learners, issue a new recovery code. Each action calls
   /api/teacher/learners/ID/... and reloads the page; a deletion first downloads the learner's history. */
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("client-data").textContent);
  const s = data.s || {};
  // due dates are kept and shown in UTC; add the teacher's own time zone beside them
  document.querySelectorAll("time.due[datetime]").forEach((t) => {
    const when = new Date(t.getAttribute("datetime"));
    if (Number.isNaN(when.getTime())) return;
    const local = when.toLocaleString(data.lang === "zh" ? "zh-CN" : "en-GB",
      { dateStyle: "medium", timeStyle: "short", timeZoneName: "short" });
    const span = el("span", { class: "due-local" });
    span.textContent = ` (${(t.dataset.yourTime || "{when}").replace("{when}", local)})`;
    t.after(span);
  });
  const status = document.getElementById("manage-status");
  if (!status) return;
  const say = (text) => { status.textContent = text; };
  const nameOf = (id) => {
    const li = document.querySelector(`li[data-learner="${CSS.escape(id)}"]`);
    return li ? li.dataset.name : id;
  };
  const fail = (res) => say(typeof (res.data && res.data.detail) === "string" ? res.data.detail : errorText(res));
  const post = (id, action, body) => api("POST", `/api/teacher/learners/${encodeURIComponent(id)}/${action}`, body);

  function download(name, obj) {
    const blob = new Blob([JSON.stringify(obj, null, 1)], { type: "application/json" });
    const a = el("a", { href: URL.createObjectURL(blob), download: name });
    document.body.append(a);
    a.click();
    a.remove();
  }

  document.querySelectorAll("form.manage-rename").forEach((form) => form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const res = await post(form.dataset.learner, "rename", { name: form.elements.name.value });
    if (res.ok) window.location.reload(); else fail(res);
  }));
  document.querySelectorAll("form.manage-merge").forEach((form) => form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const res = await post(form.dataset.learner, "merge", { into: form.elements.into.value });
    if (res.ok) window.location.reload(); else fail(res);
  }));
  document.querySelectorAll("button.manage-recovery").forEach((button) => button.addEventListener("click", async () => {
    const res = await post(button.dataset.learner, "recovery");
    if (res.ok) say((s.new_recovery_done || "{name}: {code}").replace("{name}", res.data.name).replace("{code}", res.data.recovery_code));
    else fail(res);
  }));
  document.querySelectorAll("button.manage-remove").forEach((button) => button.addEventListener("click", async () => {
    const id = button.dataset.learner;
    const history = button.dataset.history;
    if (history === "delete" && !window.confirm((s.confirm_delete || "{name}").replace("{name}", nameOf(id)))) return;
    const res = await post(id, "remove", { history });
    if (!res.ok) { fail(res); return; }
    download(`learner-${id}.json`, res.data.export);  // the history, saved before the page forgets it
    say(s.done || "");
    window.setTimeout(() => window.location.reload(), 300);
  }));

  /* The plan: lock a track until its requires are solved, give or delete an assignment. */
  const plan = document.getElementById("plan-status");
  const planFail = (res) => { plan.textContent = typeof (res.data && res.data.detail) === "string" ? res.data.detail : errorText(res); };
  document.querySelectorAll("button.track-lock").forEach((button) => button.addEventListener("click", async () => {
    const res = await api("POST", "/api/teacher/tracks/lock", { track: button.dataset.track, locked: button.dataset.locked === "true" });
    if (res.ok) window.location.reload(); else planFail(res);
  }));
  document.querySelectorAll("button.assignment-remove").forEach((button) => button.addEventListener("click", async () => {
    const res = await api("POST", `/api/teacher/assignments/${encodeURIComponent(button.dataset.assignment)}/remove`);
    if (res.ok) window.location.reload(); else planFail(res);
  }));
  const form = document.getElementById("assignment-form");
  if (form) form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const due = new Date(form.elements.due.value);  // datetime-local is the teacher's local time: send it as UTC
    const res = await api("POST", "/api/teacher/assignments", {
      title: form.elements.title.value,
      exercises: Array.from(form.elements.exercises.selectedOptions, (o) => o.value),
      due: Number.isNaN(due.getTime()) ? form.elements.due.value : due.toISOString(),
    });
    if (res.ok) window.location.reload(); else planFail(res);
  });
  document.querySelectorAll("button.interview-remove").forEach((button) => button.addEventListener("click", async () => {
    const res = await api("POST", `/api/teacher/interviews/${encodeURIComponent(button.dataset.interview)}/remove`);
    if (res.ok) window.location.reload(); else planFail(res);
  }));
  const ivForm = document.getElementById("class-interview-form");
  if (ivForm) ivForm.addEventListener("submit", async (e) => {
    e.preventDefault();
    const due = new Date(ivForm.elements.due.value);  // the teacher's local time, sent as UTC
    const body = { title: ivForm.elements.title.value, minutes: Number(ivForm.elements.minutes.value || 45),
                   due: Number.isNaN(due.getTime()) ? ivForm.elements.due.value : due.toISOString() };
    if (ivForm.elements.seed.value !== "") body.seed = Number(ivForm.elements.seed.value);
    const res = await api("POST", "/api/teacher/interviews", body);
    if (res.ok) window.location.reload(); else planFail(res);
  });
})();
