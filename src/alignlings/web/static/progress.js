/* Progress page: import a JSON export (the export is a plain download link). */
"use strict";
(function () {
  const file = document.getElementById("import-file");
  if (!file) return;  // a class's learner: import is off there, so the page has no button
  const status = document.getElementById("import-status");
  // a real, focusable button opens the (hidden) file chooser
  document.getElementById("import-btn").addEventListener("click", () => file.click());
  file.addEventListener("change", async () => {
    if (!file.files.length) return;
    let data;
    try { data = JSON.parse(await file.files[0].text()); } catch (e) { status.textContent = `${T.error}${T.colon}${e.message}`; return; }
    const res = await api("POST", "/api/progress/import", data);
    status.textContent = res.ok ? T.import_done : errorText(res);
    if (res.ok) setTimeout(() => location.reload(), 600);
  });
})();
