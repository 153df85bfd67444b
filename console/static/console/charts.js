/* Live charts: every element with data-series="<canvas id>" adds one point to that chart when it
   appears (page load or an htmx swap). data-rate turns successive counter values into a per-second
   rate. The numbers are also in the tables next to the charts, for screen readers and no-JS. */
(function () {
  "use strict";
  var charts = {};
  var previous = {};
  var MAX_POINTS = 120;

  function chartFor(id) {
    if (charts[id]) return charts[id];
    var canvas = document.getElementById(id);
    if (!canvas || !window.Chart) return null;
    charts[id] = new window.Chart(canvas, {
      type: "line",
      data: { labels: [], datasets: [{
        label: canvas.dataset.label || "", data: [], borderColor: "#2f55d4",
        backgroundColor: "rgba(47, 85, 212, .12)", fill: true, tension: 0.25, pointRadius: 2 }] },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        scales: { y: { beginAtZero: true, ticks: { precision: 0 } } },
        plugins: { legend: { display: false } }
      }
    });
    return charts[id];
  }

  function sample(el) {
    var id = el.dataset.series;
    var chart = chartFor(id);
    if (!chart) return;
    var value = Number(el.dataset.value);
    var at = Number(el.dataset.at);
    var point = value;
    if (el.dataset.rate) {
      var prev = previous[id];
      previous[id] = { value: value, at: at };
      if (!prev || at <= prev.at) return;
      point = Math.max(0, (value - prev.value) * 1000 / (at - prev.at));
    }
    chart.data.labels.push(new Date(at).toISOString().substring(11, 19));
    chart.data.datasets[0].data.push(Math.round(point * 100) / 100);
    if (chart.data.labels.length > MAX_POINTS) {
      chart.data.labels.shift();
      chart.data.datasets[0].data.shift();
    }
    chart.update();
  }

  function scan(root) {
    if (root.dataset && root.dataset.series) sample(root);
    if (root.querySelectorAll) root.querySelectorAll("[data-series]").forEach(sample);
  }

  /* Stored series: <canvas data-points="<id of a json_script with {labels, values}>">. */
  function drawStored(canvas) {
    var source = document.getElementById(canvas.dataset.points);
    var chart = chartFor(canvas.id);
    if (!source || !chart) return;
    var data = JSON.parse(source.textContent);
    chart.data.labels = data.labels;
    chart.data.datasets[0].data = data.values;
    chart.data.datasets[0].pointRadius = data.values.length > 60 ? 0 : 2;
    chart.update();
  }

  document.addEventListener("htmx:afterSettle", function (event) { scan(event.detail.elt); });
  document.addEventListener("DOMContentLoaded", function () {
    document.querySelectorAll("canvas[data-points]").forEach(drawStored);
    scan(document);
  });
})();
