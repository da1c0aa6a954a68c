// Tell the server the browser's time zone once, so that times are shown in it. The pages work without
// this script: the zone can also be chosen on the settings page.
(function () {
  var body = document.body;
  if (!body || body.dataset.timezoneKnown === "yes" || !window.fetch || !window.Intl) return;
  var zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone) return;
  var form = new FormData();
  form.append("timezone", zone);
  form.append("csrf_token", body.dataset.csrf);
  form.append("reply", "none");
  fetch(body.dataset.timezoneUrl, { method: "POST", body: form, credentials: "same-origin" })
    .catch(function () {});
})();
