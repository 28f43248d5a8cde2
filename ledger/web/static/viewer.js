/* ledger view: filters, live updates, the replay player and the charts. One library, uPlot, vendored under
   static/vendor/ and loaded only by the chart pages; nothing fetched but this server's own JSON. Data from the
   ledger is untrusted: it is only ever set as text (textContent, as uPlot sets its legend's labels) or as SVG
   attributes; the only markup inserted is the server's own escaped HTML fragments. */
(function () {
  "use strict";
  var body = document.body;
  var live = body.dataset.mode === "live";

  function $(id) { return document.getElementById(id); }

  function poll(url, every, onData) {
    var stopped = false;
    function tick() {
      if (stopped) return;
      fetch(url(), { cache: "no-store", headers: { "Accept": "application/json" } })
        .then(function (r) { return r.status === 200 ? r.json() : null; })
        .then(function (data) { if (data && onData(data) === false) stopped = true; })
        .catch(function () { /* the server may be restarting: try again later */ })
        .then(function () { if (!stopped) setTimeout(tick, every); });
    }
    setTimeout(tick, every);
  }

  /* -- cards page ------------------------------------------------------------------------------------------ */
  function cardsPage() {
    var form = $("filters"), table = $("cards"), tbody = $("card-rows");
    if (!form || !tbody) return;
    var server = form.dataset.server === "1";
    function apply() {
      if (server) return; /* the server filtered and sorted the whole ledger */
      var f = new FormData(form);
      var id = String(f.get("id") || "").trim().toLowerCase(), tag = f.get("tag"), game = f.get("game");
      var state = f.get("state"), from = f.get("from"), to = f.get("to"), sort = String(f.get("sort") || "date-desc");
      var rows = Array.prototype.slice.call(tbody.rows), shown = 0;
      rows.forEach(function (tr) {
        var d = tr.dataset, opened = (d.opened || "").slice(0, 10);
        var ok = (!id || d.card.toLowerCase().indexOf(id) === 0) &&
          (!tag || JSON.parse(d.tags).indexOf(tag) >= 0) &&
          (!game || JSON.parse(d.games).indexOf(game) >= 0) &&
          (!state || d.state === state) && (!from || opened >= from) && (!to || (opened && opened <= to));
        tr.hidden = !ok;
        if (ok) shown++;
      });
      var key = sort.split("-")[0], dir = sort.split("-")[1] === "asc" ? 1 : -1;
      rows.sort(function (a, b) {
        var x = key === "score" ? parseFloat(a.dataset.score) : a.dataset.opened;
        var y = key === "score" ? parseFloat(b.dataset.score) : b.dataset.opened;
        return x < y ? -dir : x > y ? dir : 0;
      });
      rows.forEach(function (tr) { tbody.appendChild(tr); });
      $("card-count").textContent = "(" + shown + " of " + rows.length + ")";
    }
    if (server) {
      form.addEventListener("change", function (e) { if (e.target.name) form.submit(); });
    } else {
      form.addEventListener("input", apply);
      form.addEventListener("submit", function (e) { e.preventDefault(); });
    }
    apply();
    var button = $("compare-selected");
    function picked() {
      return Array.prototype.map.call(tbody.querySelectorAll("input.pick:checked"), function (c) { return c.value; });
    }
    if (button) {
      tbody.addEventListener("change", function () { button.disabled = picked().length < 2; });
      button.addEventListener("click", function () {
        var q = new URLSearchParams();
        picked().forEach(function (c) { q.append("card", c); });
        location.href = "compare?" + q.toString();
      });
    }
    if (live) {
      /* the rows as this page lists them: its address's filters, sort and page */
      poll(function () {
        var q = new URLSearchParams(window.location.search);
        q.set("since", table.dataset.stamp);
        return "api/cards?" + q.toString();
      }, 2000, function (data) {
        var keep = picked();
        table.dataset.stamp = data.stamp;
        tbody.innerHTML = data.html; /* the server's escaped fragment */
        keep.forEach(function (c) {
          tbody.querySelectorAll("input.pick").forEach(function (box) { if (box.value === c) box.checked = true; });
        });
        if (button) button.disabled = picked().length < 2;
        apply();
      });
    }
  }

  /* -- card page: live updates ----------------------------------------------------------------------------- */
  function cardPage() {
    var box = $("card-body");
    if (!box || !live || !box.dataset.poll || box.dataset.open !== "true") return;
    poll(function () { return box.dataset.poll + "&since=" + encodeURIComponent(box.dataset.events); }, 1000,
      function (data) {
        box.innerHTML = data.html; /* the server's escaped fragment */
        box.dataset.events = data.events;
        box.dataset.open = data.open ? "true" : "false";
        return data.open; /* a closed card stops polling */
      });
  }

  /* -- replay page ----------------------------------------------------------------------------------------- */
  function replayPage() {
    var data = $("replay-data"), canvas = $("screen");
    if (!data || !canvas) return;
    var payload = JSON.parse(data.textContent), palette = payload.palette, frames = payload.frames;
    var steps = frames.steps, ctx = canvas.getContext("2d"), scale = parseInt(canvas.dataset.scale, 10);
    var scrub = $("scrub"), timeline = $("timeline"), cur = 0, timer = null;
    if (!steps.length) return;

    function draw(i) {
      var s = steps[i];
      if (!s.grid) { /* an empty frame (action after the end): keep the last picture, dimmed */
        ctx.fillStyle = "rgba(0,0,0,0.5)"; ctx.fillRect(0, 0, canvas.width, canvas.height); return;
      }
      if (canvas.width !== s.width * scale || canvas.height !== s.height * scale) {
        canvas.width = s.width * scale; canvas.height = s.height * scale;
      }
      for (var y = 0; y < s.height; y++) {
        for (var x = 0; x < s.width; x++) {
          ctx.fillStyle = palette[parseInt(s.grid.charAt(y * s.width + x), 16)];
          ctx.fillRect(x * scale, y * scale, scale, scale);
        }
      }
    }
    function show(i) {
      cur = Math.max(0, Math.min(steps.length - 1, i));
      var s = steps[cur];
      /* draw from the last step with a picture, so stepping back over an empty frame shows what the agent saw */
      var j = cur; while (j > 0 && !steps[j].grid) j--;
      if (j !== cur) draw(j);
      draw(cur);
      scrub.value = cur;
      canvas.dataset.step = s.n;
      $("s-n").textContent = s.n + " of " + (frames.total_steps - 1);
      $("s-action").textContent = s.action + (s.x !== null && s.x !== undefined ? " at (" + s.x + ", " + s.y + ")" : "");
      $("s-state").textContent = s.state;
      $("s-levels").textContent = String(s.levels_completed);
      var ms = stepMarks(cur);
      $("s-marks").textContent = ms.length ? ms.join(", ") : "-";
      $("s-version").textContent = "version " + s.version;
      var r = s.reasoning;
      $("s-reasoning-box").hidden = r === null || r === undefined;
      $("s-reasoning").textContent = r === null || r === undefined ? "" :
        (typeof r === "string" ? r : JSON.stringify(r, null, 1));
      var c = $("tl-cursor");
      if (c) c.setAttribute("x", String(pos(cur) - 1));
    }
    function pos(i) { return steps.length > 1 ? (i / (steps.length - 1)) * 996 + 2 : 500; }
    /* A step's marks: those the recording holds, and every entry into GAME_OVER or WIN the game's own state shows
       (the recording marks a play's first GAME_OVER only; a play that dies again after a level reset dies again). */
    function stepMarks(i) {
      var s = steps[i], out = s.marks.slice(), prev = i > 0 ? steps[i - 1].state : (frames.start ? null : "");
      ["GAME_OVER", "WIN"].forEach(function (st) {
        if (s.state === st && prev !== st && prev !== null && out.indexOf(st) < 0) out.push(st);
      });
      return out;
    }
    function markClass(m) {
      return m.indexOf("completed") >= 0 ? "k-level" : m.indexOf("reset") >= 0 ? "k-reset" :
        m === "GAME_OVER" ? "k-over" : m === "WIN" ? "k-win" : null;
    }
    function markTimeline() {
      var ns = "http://www.w3.org/2000/svg";
      steps.forEach(function (s, i) {
        var shown = stepMarks(i).filter(markClass);
        /* several marks on one step share its bar in bands, so none (a WIN under its level completed) is hidden */
        var h = 18 / (shown.length || 1);
        shown.forEach(function (m, k) {
          var r = document.createElementNS(ns, "rect");
          r.setAttribute("class", markClass(m)); r.setAttribute("x", String(pos(i) - 2));
          r.setAttribute("y", String(2 + k * h)); r.setAttribute("width", "4"); r.setAttribute("height", String(h));
          r.setAttribute("data-mark", m);
          var t = document.createElementNS(ns, "title"); t.textContent = "step " + s.n + ": " + m; r.appendChild(t);
          timeline.appendChild(r);
        });
      });
      var c = document.createElementNS(ns, "rect");
      c.setAttribute("id", "tl-cursor"); c.setAttribute("class", "cursor"); c.setAttribute("y", "0");
      c.setAttribute("width", "2"); c.setAttribute("height", "22");
      timeline.appendChild(c);
      timeline.addEventListener("click", function (e) {
        var box = timeline.getBoundingClientRect();
        show(Math.round(((e.clientX - box.left) / box.width) * (steps.length - 1)));
      });
    }
    function pause() { if (timer) { clearInterval(timer); timer = null; } $("play").textContent = "play"; }
    function play() {
      if (timer) { pause(); return; }
      if (cur >= steps.length - 1) show(0);
      $("play").textContent = "pause";
      timer = setInterval(function () {
        if (cur >= steps.length - 1) { pause(); return; }
        show(cur + 1);
      }, 1000 / parseFloat($("speed").value));
    }
    $("first").addEventListener("click", function () { pause(); show(0); });
    $("prev").addEventListener("click", function () { pause(); show(cur - 1); });
    $("next").addEventListener("click", function () { pause(); show(cur + 1); });
    $("last").addEventListener("click", function () { pause(); show(steps.length - 1); });
    $("play").addEventListener("click", play);
    $("speed").addEventListener("change", function () { if (timer) { pause(); play(); } });
    scrub.addEventListener("input", function () { pause(); show(parseInt(scrub.value, 10)); });
    document.addEventListener("keydown", function (e) {
      if (e.target && (e.target.tagName === "INPUT" || e.target.tagName === "SELECT")) return;
      if (e.key === "ArrowRight") { pause(); show(cur + 1); }
      else if (e.key === "ArrowLeft") { pause(); show(cur - 1); }
      else if (e.key === "Home") { pause(); show(0); }
      else if (e.key === "End") { pause(); show(steps.length - 1); }
      else if (e.key === " ") { e.preventDefault(); play(); }
    });
    markTimeline();
    show(0);
  }

  /* -- charts (uPlot): every number drawn is one of the page's JSON, unchanged --------------------------------- */
  var PALETTE = ["#1e6fd9", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2",
    "#7f7f7f", "#bcbd22", "#393b79", "#ad494a"];
  /* cards that share numbers would draw one line over another: each card's line has its own dash */
  var DASHES = [[], [10, 4], [3, 3], [12, 3, 3, 3]];
  function dash(i) { return DASHES[i % DASHES.length]; }
  function faint(hex) { return hex + "99"; } /* the colour at 60% strength: a point under a line still shows */
  function colour(i) { return PALETTE[i % PALETTE.length]; }
  function json(id) { var el = $(id); return el ? JSON.parse(el.textContent) : null; }
  function chartWidth(el) { return Math.max(320, Math.min(el.clientWidth || 900, 1100)); }
  function fixed2(u, v) { return v === null || v === undefined ? "-" : v.toFixed(2); }
  function whole(u, v) { return v === null || v === undefined ? "-" : String(v); }
  /* uPlot draws on a canvas and keeps the instance's data as given: the tests read it back from el.uplot */
  function draw(el, opts, data) {
    if (!window.uPlot) { el.textContent = "the chart library did not load"; return; }
    opts.width = chartWidth(el);
    el.uplot = new window.uPlot(opts, data, el);
  }

  function progressPage() {
    var payload = json("progress-data"), el = $("progress-chart");
    if (!payload || !el) return;
    var series = payload.series.filter(function (s) { return s.x.length; });
    if (!series.length) return;
    /* one x column for every series (uPlot's data is a table): each point a row of its own, null in the other
       series, whose lines span the gaps */
    var points = [];
    series.forEach(function (s, i) { s.x.forEach(function (x, j) { points.push([x, i, s.scores[j]]); }); });
    points.sort(function (a, b) { return a[0] - b[0] || a[1] - b[1]; });
    var data = [points.map(function (p) { return p[0]; })], drawn = [{ label: "opened" }];
    /* per tag: each card's score as a point (no line: single cards jump about), then its trend, the rolling
       median of its last cards, as a line labelled at its end */
    series.forEach(function (s, i) {
      data.push(points.map(function (p) { return p[1] === i ? p[2] : null; }));
      drawn.push({ label: s.tag, stroke: colour(i), width: 0, value: fixed2, paths: function () { return null; },
        points: { show: true, size: 8, width: 1.5, stroke: colour(i), fill: faint(colour(i)) } });
    });
    series.forEach(function (s, i) {
      var k = 0; /* the tag's points come in its own order (oldest first; the sort is stable) */
      data.push(points.map(function (p) { return p[1] === i ? s.trend[k++] : null; }));
      drawn.push({ label: s.tag + " (median of last " + payload.trend_cards + ")", stroke: colour(i), width: 2.5,
        dash: dash(i), spanGaps: true, value: fixed2, points: { show: false } });
    });
    var full = wantsFullFrame(), button = $("y-frame");
    var ys = [].concat.apply([], data.slice(1)).filter(function (v) { return v !== null; });
    var lo = Math.min.apply(null, ys), hi = Math.max.apply(null, ys);
    draw(el, {
      height: 380,
      scales: { x: { time: true }, y: { range: function () { return scoreRange(lo, hi, full); } } },
      /* room for a whole date-time label per tick: labels never overlap */
      axes: [{ space: 110 }, { label: "card score" }],
      series: drawn
    }, data);
    function frame(on) {
      full = on;
      el.dataset.frame = full ? "full" : "fitted";
      if (el.uplot) { var r = scoreRange(lo, hi, full); el.uplot.setScale("y", { min: r[0], max: r[1] }); }
      if (button) {
        button.textContent = full ? "fit the axis to the scores" : "show the whole 0-100 frame";
        button.setAttribute("aria-pressed", full ? "true" : "false");
      }
      /* the choice survives a reload and paging, and a link to the page carries it */
      var hash = full ? "#frame=full" : "";
      var q = new URLSearchParams(location.search); q.delete("frame");
      var search = q.toString() ? "?" + q.toString() : "";
      try { history.replaceState(null, "", location.pathname + search + hash); } catch (e) { /* an opaque origin */ }
      ["older-page", "newest-page"].forEach(function (id) { var a = $(id); if (a) a.hash = hash; });
    }
    if (button) { button.hidden = false; button.addEventListener("click", function () { frame(!full); }); }
    frame(full);
  }

  /* ?frame=full or #frame=full: the whole 0-100 frame rather than the scores' own range */
  function wantsFullFrame() {
    return new URLSearchParams(location.search).get("frame") === "full" || location.hash === "#frame=full";
  }

  /* The y range of a score chart. Fitted, it spans the scores with a margin, so scores of 1-4 fill the chart
     instead of lying flat along 0 on a 0-100 axis; it starts at 0 when the scores sit nearer to 0 than they
     spread, so a low score still reads as low. Full, it is the benchmark's whole 0-100. */
  function scoreRange(lo, hi, full) {
    if (full || !isFinite(lo) || !isFinite(hi)) return [0, Math.max(100, isFinite(hi) ? hi : 0)];
    var pad = Math.max((hi - lo) * 0.08, 0.5);
    var bottom = lo - pad < hi - lo ? 0 : lo - pad;
    var top = hi <= 100 ? Math.min(hi + pad, 100) : hi + pad;
    return [bottom, Math.max(top, bottom + 1)];
  }

  function comparePage() {
    var games = json("levels-data");
    if (!games) return;
    games.forEach(function (g, k) {
      var el = $("levels-chart-" + k);
      if (!el || !g.levels.length) return;
      /* per card its completed levels (a line), then the level it stopped on (a hollow mark, no line): a level
         never reached spent nothing and is not drawn at all */
      var data = [g.levels, g.baseline], series = [{ label: "level", value: whole },
        { label: "baseline", stroke: "#555", width: 2, dash: [6, 4], value: whole, points: { show: true, size: 6 } }];
      g.cards.forEach(function (c) { /* a card keeps its colour in every game's chart */
        data.push(c.actions);
        series.push({ label: c.letter + " " + c.card.slice(0, 8), stroke: colour(c.n), width: 2, dash: dash(c.n),
          value: whole, points: { show: true, size: 6, fill: colour(c.n) } });
        if (c.unfinished.some(function (v) { return v !== null; })) {
          data.push(c.unfinished);
          series.push({ label: c.letter + " not completed", stroke: colour(c.n), width: 0, value: whole,
            paths: function () { return null; }, points: { show: true, size: 9, width: 2, fill: "#fff" } });
        }
      });
      draw(el, {
        height: 260,
        scales: { x: { time: false }, y: { range: function (u, lo, hi) { return [0, Math.max(1, hi || 0)]; } } },
        axes: [{ label: "level", incrs: [1, 2, 5, 10, 20, 50], values: function (u, vs) {
          return vs.map(function (v) { return String(v); });
        } }, { label: "actions" }],
        series: series
      }, data);
    });
  }

  var page = body.dataset.page;
  if (page === "cards") cardsPage();
  else if (page === "card") cardPage();
  else if (page === "replay") replayPage();
  else if (page === "progress") progressPage();
  else if (page === "compare") comparePage();
})();
