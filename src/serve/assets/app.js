// uwf serve: live updates. The server says `change` (with the store's version) on
// /api/events whenever the store file changes; the page is fetched again and its <main>
// swapped in place, so no reload is needed. Scroll positions of panels are kept.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var version = document.body.getAttribute("data-version");
  var busy = false, again = false;

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    fetch(location.href, { cache: "no-store", headers: { "Accept": "text/html" } })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.querySelector("main");
        var old = document.querySelector("main");
        if (!fresh || !old) { return; }
        var scroll = {};
        old.querySelectorAll("[id]").forEach(function (e) {
          if (e.scrollTop) { scroll[e.id] = e.scrollTop; }
        });
        old.replaceWith(fresh);
        Object.keys(scroll).forEach(function (id) {
          var e = document.getElementById(id);
          if (e) { e.scrollTop = scroll[id]; }
        });
        var v = doc.body.getAttribute("data-version");
        if (v !== null) { version = v; document.body.setAttribute("data-version", v); }
      })
      .catch(function () { /* the next change tries again */ })
      .then(function () {
        busy = false;
        if (again) { again = false; refresh(); }
      });
  }

  if (!window.EventSource) { return; }
  var es = new EventSource("/api/events");
  es.addEventListener("change", function (e) {
    if (e.data !== version) { version = e.data; refresh(); }
  });
  es.onopen = function () { live.textContent = "live"; live.className = "live on"; };
  es.onerror = function () { live.textContent = "reconnecting"; live.className = "live"; };
})();
