// Progressive enhancement: the overview's health table refreshes itself
// every five seconds from the health page. Everything works without it.
(function () {
  "use strict";
  var table = document.getElementById("health");
  if (!table || !table.dataset.src || !window.fetch || !window.DOMParser) {
    return;
  }
  var src = table.dataset.src;
  setInterval(function () {
    fetch(src, { headers: { Accept: "text/html" }, credentials: "same-origin" })
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
