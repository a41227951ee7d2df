// uwf serve: live updates. The server says `change` (with the store's version) on
// /api/events whenever the store file changes; the page is fetched again and its <main>
// swapped in place, so no reload is needed. Scroll positions of panels and typed text are
// kept. A thread's buttons and a workflow's start form POST to the write API with the token
// of the URL (`?token=`, kept in sessionStorage) and say what happened in one line. A page
// that moves with the clock (`data-tick`) is also fetched again every few seconds.
(function () {
  "use strict";
  var live = document.getElementById("live");
  var version = document.body.getAttribute("data-version");
  var busy = false, again = false;
  window.uwfFetched = Date.now();

  // The token of `uwf serve`'s URL line (`?token=`), kept for the tab's other pages.
  var token = new URLSearchParams(location.search).get("token");
  try {
    if (token) { sessionStorage.setItem("uwf-token", token); }
    else { token = sessionStorage.getItem("uwf-token"); }
  } catch (e) { /* no storage: the URL's token only */ }
  var result = document.getElementById("action-result");

  function say(text, ok) {
    result.hidden = false;
    result.textContent = text;
    result.className = "action-result " + (ok ? "ok" : "err");
  }

  // POSTs `path` with the token; says what the answer was, in one line.
  function act(path, body, what) {
    if (!token) { say(what + ": no token (open the URL uwf serve printed)", false); return; }
    var headers = { "X-Uwf-Token": token };
    if (body !== null) { headers["Content-Type"] = "application/json"; }
    say(what + "…", true);
    fetch(path, { method: "POST", headers: headers, body: body === null ? undefined : JSON.stringify(body) })
      .then(function (r) {
        return r.text().then(function (text) {
          var v = null;
          try { v = JSON.parse(text); } catch (e) { /* not JSON */ }
          if (r.ok) {
            var said = v && v.status ? "status " + v.status
              : v && v.cancelled ? "cancelled"
              : v && v.started ? "a step started"
              : v && v.thread ? "thread " + v.thread : text.trim();
            say(what + ": " + said, true);
            if (v && v.thread && path.indexOf("/api/workflows/") === 0) {
              result.appendChild(document.createTextNode(" "));
              var a = document.createElement("a");
              a.href = "/threads/" + encodeURIComponent(v.thread);
              a.textContent = "open";
              result.appendChild(a);
            }
          } else {
            var msg = v && v.error ? (v.error.message || JSON.stringify(v.error)) : text.trim();
            say(what + " failed (" + r.status + "): " + msg, false);
          }
        });
      })
      .catch(function (e) { say(what + " failed: " + e, false); });
  }

  document.addEventListener("click", function (e) {
    var b = e.target.closest ? e.target.closest("button[data-act]") : null;
    if (b) {
      var box = b.closest("[data-thread]");
      var t = box.getAttribute("data-thread");
      act("/api/threads/" + encodeURIComponent(t) + "/" + b.getAttribute("data-act"), null, b.textContent);
      return;
    }
    // Links keep the token, so that a view that needs it (not on loopback) stays readable.
    var a = e.target.closest ? e.target.closest("a[href^='/']") : null;
    if (a && token && !a.href.match(/[?&]token=/)) {
      var u = new URL(a.href);
      u.searchParams.set("token", token);
      a.href = u.toString();
    }
  });
  document.addEventListener("submit", function (e) {
    var f = e.target;
    if (f.id !== "start-thread") { return; }
    e.preventDefault();
    var body = { prompt: f.elements.prompt.value };
    if (f.elements.cwd.value) { body.cwd = f.elements.cwd.value; }
    act("/api/workflows/" + encodeURIComponent(f.getAttribute("data-workflow")) + "/threads", body, "Start");
  });

  function refresh() {
    if (busy) { again = true; return; }
    busy = true;
    window.uwfFetched = Date.now();
    var h = { "Accept": "text/html" };
    if (token) { h["X-Uwf-Token"] = token; }
    fetch(location.href, { cache: "no-store", headers: h })
      .then(function (r) { return r.ok ? r.text() : Promise.reject(r.status); })
      .then(function (text) {
        var doc = new DOMParser().parseFromString(text, "text/html");
        var fresh = doc.querySelector("main");
        var old = document.querySelector("main");
        if (!fresh || !old) { return; }
        var scroll = {}, typed = {};
        old.querySelectorAll("[id]").forEach(function (e) {
          if (e.scrollTop) { scroll[e.id] = e.scrollTop; }
          if (e.tagName === "INPUT" && e.value) { typed[e.id] = e.value; }
        });
        old.replaceWith(fresh);
        Object.keys(scroll).forEach(function (id) {
          var e = document.getElementById(id);
          if (e) { e.scrollTop = scroll[id]; }
        });
        Object.keys(typed).forEach(function (id) {
          var e = document.getElementById(id);
          if (e) { e.value = typed[id]; }
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

  // A page whose content moves with the clock (the runner's dashboard: elapsed times, the
  // hour's window) says how often to fetch it again when nothing changed: `data-tick` seconds.
  setInterval(function () {
    var t = document.querySelector("main [data-tick]");
    var every = t ? parseInt(t.getAttribute("data-tick"), 10) * 1000 : 0;
    if (every > 0 && Date.now() - (window.uwfFetched || 0) >= every) { refresh(); }
  }, 1000);

  if (!window.EventSource) { return; }
  var es = new EventSource("/api/events" + (token ? "?token=" + encodeURIComponent(token) : ""));
  es.addEventListener("change", function (e) {
    if (e.data !== version) { version = e.data; refresh(); }
  });
  es.onopen = function () { live.textContent = "live"; live.className = "live on"; };
  es.onerror = function () { live.textContent = "reconnecting"; live.className = "live"; };
})();
