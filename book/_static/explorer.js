/* The Pareto-front explorer of the static book: the controls of servingmath.explorer.FrontierExplorer,
   drawn with Plotly, on data the library precomputed (tools/explorer_data.py). No kernel, no network:
   the data files are <script>s next to this one, loaded when a model is first chosen.

   Each <div class="sm-explorer" data-initial='{...}'> on a page becomes an explorer. For tests, the
   div's data-state attribute holds what is shown: the selection, the summary and the point counts. */
(function () {
  "use strict";

  var here = document.currentScript ? document.currentScript.src : "";
  var base = here.replace(/[^\/]*$/, "") + "explorer/";
  var loading = {};

  function loadModel(index, model) {
    var store = window.SERVINGMATH_EXPLORER_DATA || {};
    if (store[model]) return Promise.resolve(store[model]);
    if (!loading[model]) {
      loading[model] = new Promise(function (resolve, reject) {
        var tag = document.createElement("script");
        tag.src = base + index.files[model];
        tag.onload = function () { resolve(window.SERVINGMATH_EXPLORER_DATA[model]); };
        tag.onerror = function () { reject(new Error("could not load " + tag.src)); };
        document.head.appendChild(tag);
      });
    }
    return loading[model];
  }

  function element(tag, attributes, text) {
    var node = document.createElement(tag);
    Object.keys(attributes || {}).forEach(function (k) { node.setAttribute(k, attributes[k]); });
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function select(name, label, options, value) {
    var wrap = element("label", {"class": "sm-explorer-control"});
    wrap.appendChild(element("span", {}, label));
    var box = element("select", {"name": name});
    options.forEach(function (o) {
      var option = element("option", {"value": String(o)}, String(o));
      if (String(o) === String(value)) option.selected = true;
      box.appendChild(option);
    });
    wrap.appendChild(box);
    return {wrap: wrap, input: box};
  }

  function thin(list, n) {
    if (list.length <= n) return list;
    var out = [];
    for (var i = 0; i < n; i++) out.push(list[Math.round(i * (list.length - 1) / (n - 1))]);
    return out;
  }

  // Ticks at 1, 2, 5 per decade over up to three decades, at decades beyond, labelled as plain
  // numbers: what servingmath.plotting.log_axis does for the widget.
  function logTicks(lo, hi) {
    var decades = Math.log10(hi / lo), subs = decades <= 3 ? [1, 2, 5] : [1], ticks = [];
    for (var e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      subs.forEach(function (m) {
        var v = m * Math.pow(10, e);
        if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push(Number(v.toPrecision(6)));
      });
    }
    return {tickvals: ticks, ticktext: ticks.map(function (v) { return String(v); })};
  }

  function Explorer(container, index) {
    var initial = Object.assign({}, index.initial);
    try { Object.assign(initial, JSON.parse(container.getAttribute("data-initial") || "{}")); } catch (e) {}
    if (index.models.indexOf(initial.model) < 0) initial.model = index.initial.model;
    if (index.accelerators.indexOf(initial.accelerator) < 0) initial.accelerator = index.initial.accelerator;
    if (index.context_lens.indexOf(initial.context_len) < 0) initial.context_len = index.initial.context_len;
    this.index = index;
    this.container = container;
    container.classList.add("sm-explorer-live");
    var controls = element("div", {"class": "sm-explorer-controls"});
    this.inputs = {};
    var specs = [
      ["model", "model", index.models, initial.model],
      ["accelerator", "GPU", index.accelerators, initial.accelerator],
      ["weight_dtype", "weights", index.weight_dtypes, initial.weight_dtype],
      ["kv_dtype", "KV cache", index.kv_dtypes, initial.kv_dtype],
      ["tensor_parallel", "TP", index.tensor_parallel, initial.tensor_parallel],
      ["setting", "setting", index.settings.map(function (s) { return s.name; }), initial.setting],
    ];
    var self = this;
    specs.forEach(function (spec) {
      var control = select(spec[0], spec[1], spec[2], spec[3]);
      self.inputs[spec[0]] = control.input;
      controls.appendChild(control.wrap);
    });
    var slider = element("label", {"class": "sm-explorer-control sm-explorer-context"});
    slider.appendChild(element("span", {}, "context"));
    var range = element("input", {"type": "range", "name": "context_len", "min": "0",
                                  "max": String(index.context_lens.length - 1), "step": "1",
                                  "value": String(index.context_lens.indexOf(initial.context_len))});
    var shown = element("output", {}, String(initial.context_len));
    slider.appendChild(range);
    slider.appendChild(shown);
    controls.appendChild(slider);
    this.inputs.context_len = range;
    this.contextShown = shown;
    this.summary = element("div", {"class": "sm-explorer-summary", "aria-live": "polite"});
    this.plot = element("div", {"class": "sm-explorer-plot"});
    this.note = element("p", {"class": "sm-explorer-note"});
    container.appendChild(controls);
    container.appendChild(this.summary);
    container.appendChild(this.plot);
    container.appendChild(this.note);
    Object.keys(this.inputs).forEach(function (k) {
      self.inputs[k].addEventListener(k === "context_len" ? "input" : "change", function () { self.update(); });
    });
    this.updates = 0;
    this.update();
  }

  Explorer.prototype.selection = function () {
    var i = this.inputs;
    return {model: i.model.value, accelerator: i.accelerator.value, weight_dtype: i.weight_dtype.value,
            kv_dtype: i.kv_dtype.value, tensor_parallel: Number(i.tensor_parallel.value),
            context_len: this.index.context_lens[Number(i.context_len.value)], setting: i.setting.value};
  };

  Explorer.prototype.update = function () {
    var self = this, s = this.selection();
    this.contextShown.textContent = String(s.context_len);
    var setting = this.index.settings.filter(function (x) { return x.name === s.setting; })[0];
    this.note.textContent = "Setting: " + (setting ? setting.description : s.setting) +
      ". Precomputed by the servingmath library (tools/explorer_data.py); batch sizes " +
      this.index.batch_sizes[0] + " to " + this.index.batch_sizes[this.index.batch_sizes.length - 1] + ".";
    return loadModel(this.index, s.model).then(function (data) { self.draw(s, data); },
      function (error) { self.summary.textContent = String(error); });
  };

  Explorer.prototype.draw = function (s, data) {
    var index = this.index;
    var space = data[[s.model, s.accelerator, s.context_len, s.setting].join("|")];
    var config = [s.weight_dtype, s.kv_dtype, s.tensor_parallel].join("|");
    var valid = index.valid_tensor_parallel[s.model] || [];
    var lines;
    var traces = [];
    var front = [], selected = [];
    if (valid.indexOf(s.tensor_parallel) < 0) {
      lines = ["TP " + s.tensor_parallel + " cannot split " + s.model + " (allowed: " + valid.join(", ") + ")."];
    } else {
      lines = space.summary_head === null ? [space.summaries[config]]
        : [space.summary_head, space.summaries[config], space.summary_tail];
      var onFront = {};
      space.front.forEach(function (p) { onFront[p[0] + ":" + p[1]] = true; });
      var cloud = [];
      space.curves.forEach(function (curve, c) {
        curve.tpot_ms.forEach(function (x, b) {
          var point = [x, curve.throughput_per_gpu[b]];
          if (onFront[c + ":" + b]) front.push(point); else cloud.push(point);
        });
      });
      cloud = thin(cloud, 400);
      front.sort(function (a, b) { return a[0] - b[0]; });
      var k = space.configs.indexOf(config);
      if (k >= 0) {
        var curve = space.curves[k];
        selected = curve.tpot_ms.map(function (x, b) { return [x, curve.throughput_per_gpu[b], index.batch_sizes[b]]; });
      }
      var col = function (list, j) { return list.map(function (p) { return p[j]; }); };
      traces.push({x: col(cloud, 0), y: col(cloud, 1), mode: "markers", type: "scatter", name: "dominated",
                   marker: {size: 4, color: "rgba(160,160,160,0.5)"}, hoverinfo: "skip"});
      traces.push({x: col(front, 0), y: col(front, 1), mode: "lines+markers", type: "scatter", name: "Pareto front",
                   line: {shape: "hv", color: "#e15759", width: 1.5}, marker: {size: 6, color: "#e15759"},
                   hovertemplate: "TPOT %{x:.3g} ms<br>%{y:,.0f} tok/s per GPU<extra>front</extra>"});
      traces.push({x: col(selected, 0), y: col(selected, 1), customdata: col(selected, 2), mode: "lines",
                   type: "scatter", name: "selected configuration", line: {color: "#4e79a7", width: 3},
                   hovertemplate: "batch %{customdata}: TPOT %{x:.3g} ms<br>%{y:,.0f} tok/s per GPU<extra>selected</extra>"});
    }
    var slo = index.tpot_slo_ms;
    var frame = space && space.frame ? space.frame : [[0.05, 1000], [1, 100000]];
    var layout = {
      margin: {l: 70, r: 10, t: 30, b: 50}, height: 440,
      title: {text: "decode design space: data types × TP × batch 1-1024", font: {size: 13}},
      xaxis: Object.assign({type: "log", title: {text: "TPOT (ms, log scale)"}, tickmode: "array",
                            range: [Math.log10(frame[0][0]), Math.log10(frame[0][1])]},
                           logTicks(frame[0][0], frame[0][1])),
      yaxis: Object.assign({type: "log", title: {text: "output tokens/s per GPU (log scale)"}, tickmode: "array",
                            range: [Math.log10(frame[1][0]), Math.log10(frame[1][1])]},
                           logTicks(frame[1][0], frame[1][1])),
      legend: {x: 1, xanchor: "right", y: 0, yanchor: "bottom", bgcolor: "rgba(255,255,255,0.8)"},
      shapes: [{type: "line", xref: "x", yref: "paper", x0: slo, x1: slo, y0: 0, y1: 1,
                line: {color: "black", width: 1, dash: "dash"}}],
      annotations: [{x: Math.log10(slo), xref: "x", y: 1, yref: "paper", text: "TPOT SLO " + slo + " ms",
                     showarrow: false, xanchor: "left", yanchor: "top", font: {size: 11}}],
    };
    window.Plotly.react(this.plot, traces, layout, {displaylogo: false, responsive: true, displayModeBar: false});
    var summary = this.summary;
    summary.textContent = "";
    lines.join("\n").split("\n").forEach(function (line, i) {
      if (i) summary.appendChild(document.createElement("br"));
      summary.appendChild(document.createTextNode(line));
    });
    this.updates += 1;
    this.container.setAttribute("data-state", JSON.stringify({
      selection: s, summary: lines.join("\n"), front_points: front.length, selected_points: selected.length,
      front_first: front.length ? front[0] : null, updates: this.updates}));
  };

  function start() {
    var index = window.SERVINGMATH_EXPLORER_INDEX;
    var containers = document.querySelectorAll(".sm-explorer");
    if (!containers.length) return;
    if (!index || !window.Plotly) {
      containers.forEach(function (c) { c.textContent = "The explorer's data or Plotly did not load."; });
      return;
    }
    containers.forEach(function (c) {
      // the widget's still picture, shown where JavaScript does not run, gives way to the live explorer
      var output = c.parentElement;
      if (output) output.querySelectorAll(":scope > img").forEach(function (img) { img.style.display = "none"; });
      c.servingmathExplorer = new Explorer(c, index);
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
