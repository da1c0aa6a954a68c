// Tell the server the browser's time zone once, so that times are shown in it, and preselect it in a
// menu marked data-browser-zone (a new schedule's zone). The pages work without this script: the zone can
// also be chosen on the settings page, and the menu then stays at UTC.
(function () {
  var body = document.body;
  if (!body || !window.Intl) return;
  var zone;
  try { zone = Intl.DateTimeFormat().resolvedOptions().timeZone; } catch (e) { return; }
  if (!zone) return;
  var menus = document.querySelectorAll("select[data-browser-zone]");
  for (var i = 0; i < menus.length; i++) {
    for (var j = 0; j < menus[i].options.length; j++) {
      if (menus[i].options[j].value === zone) { menus[i].value = zone; break; }
    }
  }
  if (body.dataset.timezoneKnown === "yes" || !window.fetch) return;
  var form = new FormData();
  form.append("timezone", zone);
  form.append("csrf_token", body.dataset.csrf);
  form.append("reply", "none");
  fetch(body.dataset.timezoneUrl, { method: "POST", body: form, credentials: "same-origin" })
    .catch(function () {});
})();
