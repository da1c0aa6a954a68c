// Live refresh (docs/console.md). A page that carries the live control ([data-live-control]) fetches its own
// URL again every few seconds, when the person chose an interval (remembered in localStorage), and swaps
// each region marked data-live (matched by id) for the new page's. The control, the scroll position, open
// <details> and anything the person is editing stay as they are. Nothing is polled while the tab is hidden.
// Without this script the pages work as they are and say how old they are.
(function () {
  "use strict";
  var control = document.querySelector("[data-live-control]");
  if (!control || !window.fetch || !window.DOMParser) return;
  var select = control.querySelector("select");
  var KEY = "queuelog.live-seconds";
  var allowed = Array.prototype.map.call(select.options, function (o) { return o.value; });
  var stored = null;
  try { stored = window.localStorage.getItem(KEY); } catch (e) { /* storage refused: no memory */ }
  select.value = stored !== null && allowed.indexOf(stored) >= 0 ? stored : (control.dataset.liveDefault || "0");
  if (allowed.indexOf(select.value) < 0) select.value = "0";
  control.hidden = false;

  var timer = null;
  var busy = false;
  var stopped = false;

  function seconds() { return parseInt(select.value, 10) || 0; }

  function schedule() {
    if (timer) { clearTimeout(timer); timer = null; }
    if (stopped || busy || seconds() <= 0 || document.visibilityState === "hidden") return;
    timer = setTimeout(refresh, seconds() * 1000);
  }

  // A region the person is working in (focus inside, a changed field) is left alone until the next poll.
  function edited(region) {
    var active = document.activeElement;
    if (active && active !== document.body && region.contains(active)) return true;
    var fields = region.querySelectorAll("input, select, textarea");
    for (var i = 0; i < fields.length; i++) {
      var f = fields[i];
      if (f.type === "checkbox" || f.type === "radio") {
        if (f.checked !== f.defaultChecked) return true;
      } else if (f.tagName === "SELECT") {
        for (var j = 0; j < f.options.length; j++) {
          if (f.options[j].selected !== f.options[j].defaultSelected) return true;
        }
      } else if (f.type !== "hidden" && f.value !== f.defaultValue) {
        return true;
      }
    }
    return false;
  }

  // Open <details> keep their state: each is known by the nearest element with an id and its rank in it.
  function detailsKey(details, region) {
    var holder = details.parentElement.closest("[id]") || region;
    var all = holder.querySelectorAll("details");
    return holder.id + "#" + Array.prototype.indexOf.call(all, details);
  }

  function swap(doc) {
    var x = window.scrollX, y = window.scrollY;
    var regions = document.querySelectorAll("[data-live][id]");
    for (var i = 0; i < regions.length; i++) {
      var region = regions[i];
      var fresh = doc.getElementById(region.id);
      if (!fresh || edited(region)) continue;
      var open = {};
      region.querySelectorAll("details[open]").forEach(function (d) { open[detailsKey(d, region)] = true; });
      region.replaceChildren.apply(region, Array.prototype.slice.call(document.adoptNode(fresh).childNodes));
      region.querySelectorAll("details").forEach(function (d) {
        if (open[detailsKey(d, region)]) d.open = true;
      });
    }
    if (doc.title) document.title = doc.title;
    window.scrollTo(x, y);
  }

  function refresh() {
    timer = null;
    if (busy || stopped) return;
    busy = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Queuelog-Live": "1" } })
      .then(function (response) {
        var html = (response.headers.get("Content-Type") || "").indexOf("text/html") === 0;
        // Logged out (the login page answered instead) or the page is gone: stop, keep what is shown.
        if (response.redirected || !html || (response.status >= 400 && response.status < 500)) {
          stopped = true;
          control.dataset.liveStopped = "yes";
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (text) {
        if (text) swap(new DOMParser().parseFromString(text, "text/html"));
      })
      .catch(function () { /* the server is away: try again at the next tick */ })
      .then(function () { busy = false; schedule(); });
  }

  select.addEventListener("change", function () {
    try { window.localStorage.setItem(KEY, select.value); } catch (e) { /* not remembered */ }
    schedule();
  });
  document.addEventListener("visibilitychange", function () {
    if (document.visibilityState === "hidden") {
      if (timer) { clearTimeout(timer); timer = null; }
    } else if (seconds() > 0) {
      refresh();  // back in view: bring it up to date at once
    }
  });
  schedule();
})();
