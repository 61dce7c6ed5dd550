"use strict";
/* The Connectors view's charts, drawn in SVG by this file (served by the plugin: nothing from elsewhere).

   PyCharts.section(runs, colours, el) returns the charts of one connection's runs (the runs API's rows, newest
   first; colours: the API's colour per connector): records per run (bars; a failed, fenced or died attempt is a
   cross), records/s per run (records / the run's duration, a line per connector) and the lag each sink run left at
   its end (a line per sink). The x axis of each is its runs in time order, oldest left, at most the last
   PER_CONNECTOR runs of each connector; time labels are thinned so that none touches another (the date is written
   under the first label of each day). Each chart redraws to its box's width. */
const PyCharts = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const BAD = new Set(["failed", "fenced", "died"]);
  const PER_CONNECTOR = 20;
  const H = 150, TOP = 10, LEFT = 46, RIGHT = 12, AXIS = 34, GAP = 8;
  const has = v => v !== null && v !== undefined;
  const pad2 = n => String(n).padStart(2, "0");
  const clock = (d, secs) => pad2(d.getHours()) + ":" + pad2(d.getMinutes()) + (secs ? ":" + pad2(d.getSeconds()) : "");
  const day = d => d.toLocaleDateString([], { month: "short", day: "numeric" });
  const colourOf = (colours, name) => (colours || {})[name] || "#a0aec0";

  function compact(n) {
    const a = Math.abs(n);
    if (a >= 1e6) return (n / 1e6).toFixed(a >= 1e7 ? 0 : 1).replace(/\.0$/, "") + "M";
    if (a >= 1e3) return (n / 1e3).toFixed(a >= 1e4 ? 0 : 1).replace(/\.0$/, "") + "k";
    return a >= 10 || Number.isInteger(n) ? String(Math.round(n)) : n.toFixed(1);
  }

  function niceMax(v) {  // a round number at least v (1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8 times a power of ten)
    if (v <= 1) return 1;
    const e = Math.pow(10, Math.floor(Math.log10(v))), f = v / e;
    return [1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10].find(s => f <= s + 1e-9) * e;
  }

  /** Records per second of a run that ended well and says when it started and ended; else null. */
  function rate(r) {
    if (!has(r.records) || !r.started || !r.finished || BAD.has(r.state) || r.state === "running") return null;
    const seconds = (r.finished - r.started) / 1000;
    return seconds > 0 ? r.records / seconds : null;
  }

  function lastRuns(rows) {  // rows newest first -> oldest first, at most PER_CONNECTOR per connector
    const seen = {}, out = [];
    for (const r of rows) {
      if (!r.updated) continue;
      seen[r.connector] = (seen[r.connector] || 0) + 1;
      if (seen[r.connector] <= PER_CONNECTOR) out.push(r);
    }
    return out.reverse();
  }

  function specs(rows) {
    const runs = lastRuns(rows);
    return [
      { cls: "runs-chart", title: "Records per run", kind: "bars",
        empty: "No run has counted its records yet.",
        pts: runs.filter(r => has(r.records) || BAD.has(r.state))
          .map(r => ({ run: r, value: r.records || 0, bad: BAD.has(r.state), text: BAD.has(r.state) ? r.state : `${r.records} records` })) },
      { cls: "rate-chart", title: "Records/s per run (records ÷ the run's duration)", kind: "lines", mark: "rate-point",
        empty: "No run with records and a duration yet.",
        pts: runs.map(r => ({ run: r, value: rate(r) })).filter(p => p.value !== null)
          .map(p => Object.assign(p, { text: `${compact(p.value)} records/s (${p.run.records} in ${((p.run.finished - p.run.started) / 1000).toFixed(1)} s)` })) },
      { cls: "lag-chart", title: "Lag each sink run left at its end (records behind its target)", kind: "lines", mark: "lag-point",
        empty: "No sink run has recorded its lag yet (runs before this version did not).",
        pts: runs.filter(r => r.kind === "sink" && has(r.lag)).map(r => ({ run: r, value: r.lag, text: `lag ${r.lag}` })) },
    ];
  }

  function draw(box, spec, colours) {
    const W = Math.max(260, Math.floor(box.clientWidth)), pts = spec.pts, n = pts.length;
    const svg = document.createElementNS(NS, "svg");
    for (const [k, v] of Object.entries({ class: "chart-svg " + spec.cls, width: W, height: H + AXIS,
      viewBox: `0 0 ${W} ${H + AXIS}`, role: "img", "aria-label": spec.title + ", one colour per connector" })) svg.setAttribute(k, v);
    box.replaceChildren(svg);
    const add = (tag, attrs, text, parent) => {
      const e = document.createElementNS(NS, tag);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
      if (text !== undefined) e.textContent = text;
      (parent || svg).append(e);
      return e;
    };
    const tip = (mark, p) => add("title", {}, `${p.run.connector} (${p.run.kind || ""}), ${new Date(p.run.updated).toLocaleString()}: ${p.text}`, mark);
    const max = niceMax(Math.max(...pts.map(p => p.value || 0)));
    const slot = (W - LEFT - RIGHT) / n, xOf = i => LEFT + slot * (i + 0.5), yOf = v => TOP + (H - TOP) * (1 - v / max);
    for (const v of [max, max / 2, 0]) {
      add("line", { x1: LEFT, x2: W - RIGHT, y1: yOf(v), y2: yOf(v), stroke: v ? "#edf2f7" : "#a0aec0" });
      add("text", { x: LEFT - 6, y: yOf(v) + 4, "text-anchor": "end", class: "ylabel" }, compact(v));
    }
    if (spec.kind === "bars") {
      const bw = Math.max(3, Math.min(36, slot - 4));
      pts.forEach((p, i) => {
        const colour = colourOf(colours, p.run.connector);
        if (p.bad) {
          tip(add("text", { x: xOf(i), y: H - 3, "text-anchor": "middle", class: "attempt-mark", "data-connector": p.run.connector,
                            "data-state": p.run.state, style: `fill:${colour};font-weight:700;font-size:16px` }, "✕"), p);
        } else {
          const h = Math.max(1, (H - TOP) * p.value / max);
          tip(add("rect", { x: xOf(i) - bw / 2, y: H - h, width: bw, height: h, rx: 2, fill: colour, class: "bar",
                            "data-connector": p.run.connector, "data-value": p.value }), p);
        }
      });
    } else {
      const series = {};
      pts.forEach((p, i) => (series[p.run.connector] = series[p.run.connector] || []).push([xOf(i), yOf(p.value), p]));
      for (const [name, xy] of Object.entries(series)) {
        const colour = colourOf(colours, name);
        if (xy.length > 1) add("polyline", { points: xy.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" "), fill: "none",
                                             stroke: colour, "stroke-width": 2, class: "series", "data-connector": name });
        for (const [x, y, p] of xy) {
          tip(add("circle", { cx: x, cy: y, r: 3.5, fill: colour, stroke: "#fff", "stroke-width": 1, class: spec.mark,
                              "data-connector": name, "data-value": p.value, "data-started": p.run.started || "",
                              "data-updated": p.run.updated }), p);
        }
      }
    }
    timeLabels(add, pts.map(p => p.run.updated), xOf, W);
  }

  /** One time label per run where it fits: a label that would come closer than GAP px to the last one drawn, or
      say the same time again, is left out; seconds are shown when two runs fall in the same minute; the date under the first label of each day. */
  function timeLabels(add, times, xOf, W) {
    const minute = t => Math.floor(t / 60000);
    const secs = times.some((t, i) => i > 0 && minute(t) === minute(times[i - 1]));
    let right = -Infinity, dateRight = -Infinity, lastDay = null, lastText = null;
    const place = (text, x, y, after) => {
      const e = add("text", { x, y, "text-anchor": "middle", class: "tick" }, text);
      const w = e.getComputedTextLength(), cx = Math.min(Math.max(x, w / 2 + 2), W - w / 2 - 2);
      if (cx - w / 2 < after + GAP) { e.remove(); return null; }
      e.setAttribute("x", cx);
      return cx + w / 2;
    };
    times.forEach((t, i) => {
      const d = new Date(t), text = clock(d, secs);
      if (text === lastText && day(d) === lastDay) return;  // runs of the same second: labelled once
      const end = place(text, xOf(i), H + 14, right);
      if (end === null) return;
      right = end;
      lastText = text;
      if (day(d) !== lastDay) {
        const dateEnd = place(day(d), xOf(i), H + 28, dateRight);
        if (dateEnd !== null) { dateRight = dateEnd; lastDay = day(d); }
      }
    });
  }

  function section(rows, colours, el) {
    const all = specs(rows);
    const boxes = all.map(spec => {
      const plot = el("div", { class: "plot" });
      const fig = el("figure", { class: "chart " + spec.cls.replace("-chart", "-box") },
        el("figcaption", { class: "meta muted" }, spec.title), spec.pts.length ? plot : el("div", { class: "meta muted empty" }, spec.empty));
      return { spec, plot, fig };
    });
    const shown = [...new Set(all.flatMap(s => s.pts.map(p => p.run.connector)))].sort();
    const legend = el("ul", { class: "legend", "aria-label": "connectors" },
      shown.map(n => el("li", { class: "legend-item", "data-connector": n, "data-colour": colourOf(colours, n) },
        el("span", { class: "swatch", style: "background:" + colourOf(colours, n), "aria-hidden": "true" }), n)),
      all[0].pts.some(p => p.bad) ? el("li", { class: "legend-item legend-bad" }, el("span", { class: "mark" }, "✕"), "failed, fenced or died attempt (its connector's colour)") : null);
    const widths = new WeakMap();
    const observer = new ResizeObserver(entries => {
      for (const entry of entries) {
        const b = boxes.find(x => x.plot === entry.target), w = Math.floor(entry.contentRect.width);
        if (b && w > 0 && widths.get(b.plot) !== w) { widths.set(b.plot, w); draw(b.plot, b.spec, colours); }
      }
    });
    for (const b of boxes) if (b.spec.pts.length) observer.observe(b.plot);
    return el("div", { class: "charts-section" },
      el("div", { class: "charts" }, boxes.map(b => b.fig)), legend,
      el("div", { class: "meta muted" }, "Each chart: its runs in time order, oldest left (each connector's last " + PER_CONNECTOR + "); one colour per connector; hover a mark for its run."));
  }

  return { section, rate, BAD };
})();
