// Progressive enhancement: the overview's health table refreshes itself
// every five seconds. Everything works without it.
(function () {
  "use strict";
  var table = document.getElementById("health");
  if (!table || !window.fetch || !window.DOMParser) {
    return;
  }
  setInterval(function () {
    fetch(window.location.href, { headers: { Accept: "text/html" }, credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html").getElementById("health");
        var now = document.getElementById("health");
        if (fresh && now) { now.replaceWith(fresh); }
      })
      .catch(function () {});
  }, 5000);
})();
