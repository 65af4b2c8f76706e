// gpuarena pages: draw charts from the data tables the server renders (the tables stay as the
// no-JavaScript fallback) and highlight code; runs again after every htmx swap.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  function dateLabel(ms, span) {
    var iso = new Date(ms).toISOString();  // UTC, like the tables
    if (span < 2 * 86400e3) return iso.slice(11, span < 3600e3 ? 19 : 16);
    return iso.slice(0, 10);
  }

  function accent() {
    return getComputedStyle(document.documentElement).getPropertyValue("--accent").trim() || "#2f6fde";
  }

  function chartFrom(table) {
    if (table.dataset.charted || typeof Chart === "undefined") return;
    table.dataset.charted = "1";
    var rows = Array.prototype.slice.call(table.querySelectorAll("tbody tr[data-x]"));
    if (!rows.length) return;
    var box = document.createElement("div");
    box.className = "chart";
    var canvas = document.createElement("canvas");
    canvas.setAttribute("role", "img");
    canvas.setAttribute("aria-label", table.dataset.label || "chart");
    box.appendChild(canvas);
    table.parentNode.insertBefore(box, table);
    var common = {responsive: true, maintainAspectRatio: false, animation: false,
                  plugins: {legend: {display: false}}};
    if (table.dataset.chart === "bar") {
      new Chart(canvas, {
        type: "bar",
        data: {labels: rows.map(function (r) { return r.dataset.x; }),
               datasets: [{label: table.dataset.label, data: rows.map(function (r) { return +r.dataset.y; }),
                           backgroundColor: accent(), maxBarThickness: 64}]},
        options: Object.assign({}, common, {scales: {y: {beginAtZero: true, title: {display: true, text: "speedup (×)"}}}})
      });
      return;
    }
    var points = rows.map(function (r) { return {x: +r.dataset.x, y: +r.dataset.y}; });
    points.push({x: Math.max(Date.now(), points[points.length - 1].x), y: points[points.length - 1].y});
    var span = points[points.length - 1].x - points[0].x;
    new Chart(canvas, {
      type: "line",
      data: {datasets: [{label: table.dataset.label, data: points, stepped: "before", borderColor: accent(),
                         backgroundColor: accent(), pointRadius: 3}]},
      options: Object.assign({}, common, {scales: {
        x: {type: "linear", title: {display: true, text: "UTC"},
            ticks: {maxTicksLimit: 6, callback: function (v) { return dateLabel(v, span); }}},
        y: {title: {display: true, text: "best score"}}}})
    });
  }

  function countdown(el) {
    // "2d 03:04:05" to the time in data-countdown, updated every second; the server's text
    // (the date itself) stays without JavaScript
    var target = Date.parse(el.dataset.countdown);
    if (isNaN(target) || el.dataset.counting) return;
    el.dataset.counting = "1";
    function tick() {
      var left = Math.max(0, Math.floor((target - Date.now()) / 1000));
      var d = Math.floor(left / 86400), h = Math.floor(left % 86400 / 3600);
      var m = Math.floor(left % 3600 / 60), s = left % 60;
      function two(n) { return (n < 10 ? "0" : "") + n; }
      el.textContent = (d ? d + "d " : "") + two(h) + ":" + two(m) + ":" + two(s);
      if (left > 0) setTimeout(tick, 1000);
    }
    tick();
  }

  function init() {
    document.querySelectorAll("time[data-countdown]").forEach(countdown);
    document.querySelectorAll("table.chart-source").forEach(chartFrom);
    if (typeof hljs !== "undefined") {
      document.querySelectorAll("pre.code code:not([data-highlighted])").forEach(function (el) {
        hljs.highlightElement(el);
      });
    }
  }

  document.addEventListener("DOMContentLoaded", init);
  document.addEventListener("htmx:afterSettle", init);
})();
