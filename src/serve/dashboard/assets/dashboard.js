// kvtier dashboard: polls the admin API every few seconds and draws uPlot charts.
// Every figure comes from GET /admin/stats/overview (the source `kvtier stats` prints), the
// block table from GET /admin/blocks?stored=1 (what `kvtier ls` / `inspect` read);
// each element carries the raw value in data-value, formatted for people in its text.
(function () {
  'use strict';
  var POLL_MS = 3000;
  var COLORS = { hit: '#3ddc97', miss: '#ff8a5b', out: '#7aa2ff', cost: '#ffd166', nocache: '#8a93a6', req: '#c792ea' };
  var CLASS_COLORS = ['#3ddc97', '#7aa2ff', '#ffd166', '#ff8a5b', '#c792ea', '#56d4dd'];

  var token = null;
  var charts = {};
  var timer = null;
  var busy = false;

  function readToken() {
    var m = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (m) {
      sessionStorage.setItem('kvtier-admin-token', decodeURIComponent(m[1]));
      history.replaceState(null, '', location.pathname + location.search);
    }
    return sessionStorage.getItem('kvtier-admin-token');
  }

  function api(path) {
    return fetch(path, { headers: { authorization: 'Bearer ' + token }, cache: 'no-store' }).then(function (res) {
      return res.json().then(function (body) {
        if (!res.ok) {
          var err = new Error((body && body.error && body.error.message) || 'HTTP ' + res.status);
          err.status = res.status;
          throw err;
        }
        return body;
      });
    });
  }

  // ── formatting ────────────────────────────────────────────────────────
  function pct(v) { return v === null || v === undefined ? '–' : (v * 100).toFixed(1) + '%'; }
  function int(v) { return Math.round(v).toLocaleString('en-US'); }
  function compact(v) {
    var a = Math.abs(v);
    if (a >= 1e9) return (v / 1e9).toFixed(2) + 'B';
    if (a >= 1e6) return (v / 1e6).toFixed(2) + 'M';
    if (a >= 1e4) return (v / 1e3).toFixed(1) + 'k';
    return int(v);
  }
  function usd(v) {
    if (v === null || v === undefined) return '–';
    var a = Math.abs(v);
    if (a === 0) return '$0';
    if (a >= 100) return '$' + v.toLocaleString('en-US', { maximumFractionDigits: 0 });
    if (a >= 1) return '$' + v.toFixed(2);
    if (a >= 0.01) return '$' + v.toFixed(4);
    return '$' + v.toPrecision(3);
  }
  function bytes(v) {
    var units = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
    var i = 0;
    while (Math.abs(v) >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? String(Math.round(v)) : v.toFixed(v >= 100 ? 0 : v >= 10 ? 1 : 2)) + ' ' + units[i];
  }
  function hours(v) { return v < 0.1 ? (v * 60).toFixed(1) + ' min' : v.toFixed(2) + ' h'; }

  var FORMATS = {
    'hitRate.byTokens': pct, 'hitRate.byRequests': pct, 'requests': int,
    'cost.usd': usd, 'cost.withoutCacheUsd': usd, 'cost.savedUsd': usd, 'cost.savedFraction': pct,
    'tokens.hit': compact, 'tokens.miss': compact, 'tokens.output': compact,
    'storage.bytes': bytes, 'storage.blocks': int, 'storage.tails.blocks': int, 'storage.tails.bytes': bytes,
    'gc.expired.blocks': int, 'gc.evicted.blocks': int, 'gc.purged.blocks': int,
    'engine.revenuePerEngineHourUsd': usd, 'engine.gpuHourUsd': usd, 'engine.grossMargin': pct,
    'engine.upHours': hours, 'engine.utilization': pct,
    'pricing.hitPerMillion': usd, 'pricing.missPerMillion': usd, 'pricing.outputPerMillion': usd,
    'pricing.gpuHourUsd': usd, 'pricing.gpusPerEngine': String,
  };

  function pick(obj, path) {
    return path.split('.').reduce(function (o, k) { return o === null || o === undefined ? undefined : o[k]; }, obj);
  }

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) { return { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' }[c]; });
  }

  // ── figures ───────────────────────────────────────────────────────────
  function renderOverview(o) {
    var nodes = document.querySelectorAll('[data-figure]');
    for (var i = 0; i < nodes.length; i++) {
      var name = nodes[i].getAttribute('data-figure');
      var value = pick(o, name);
      var format = FORMATS[name] || String;
      nodes[i].setAttribute('data-value', value === null || value === undefined ? '' : String(value));
      nodes[i].textContent = value === null || value === undefined ? '–' : format(value);
      nodes[i].classList.toggle('negative', typeof value === 'number' && value < 0);
    }
    var total = o.tokens.hit + o.tokens.miss + o.tokens.output;
    var bar = document.getElementById('token-bar').children;
    bar[0].style.width = total ? (100 * o.tokens.hit / total) + '%' : '0';
    bar[1].style.width = total ? (100 * o.tokens.miss / total) + '%' : '0';
    bar[2].style.width = total ? (100 * o.tokens.output / total) + '%' : '0';

    var classRows = Object.keys(o.storage.byClass).sort().map(function (name) {
      var c = o.storage.byClass[name];
      var share = o.storage.bytes > 0 ? c.bytes / o.storage.bytes : 0;
      return '<tr><td><span class="tag">' + esc(name) + '</span></td><td>' + int(c.blocks) + '</td><td>' + bytes(c.bytes) +
        '</td><td><div class="meter"><i style="width:' + (share * 100).toFixed(1) + '%"></i></div></td></tr>';
    });
    document.querySelector('#classes tbody').innerHTML = classRows.join('') || '<tr><td colspan="4" class="muted">no blocks stored yet</td></tr>';

    var tenantRows = o.tenants.map(function (t) {
      return '<tr data-tenant="' + esc(t.tenant) + '"><td>' + esc(t.tenant) + '</td><td>' + int(t.requests) + '</td><td>' + pct(t.hitRate) +
        '</td><td>' + compact(t.hitTokens) + ' / ' + compact(t.missTokens) + ' / ' + compact(t.outputTokens) +
        '</td><td>' + usd(t.costUsd) + '</td><td>' + bytes(t.storedBytes) + '</td></tr>';
    });
    document.querySelector('#tenants tbody').innerHTML = tenantRows.join('') || '<tr><td colspan="6" class="muted">no requests yet</td></tr>';
  }

  // ── recent blocks (GET /admin/blocks?stored=1: the index entry plus the file's envelope and header) ──
  var BLOCK_ROWS = 12;

  function ago(ms) {
    var s = Math.max(0, (Date.now() - ms) / 1000);
    if (s < 60) return Math.round(s) + ' s ago';
    if (s < 3600) return Math.round(s / 60) + ' min ago';
    if (s < 86400) return (s / 3600).toFixed(1) + ' h ago';
    return (s / 86400).toFixed(1) + ' d ago';
  }

  function renderBlocks(listing) {
    var rows = listing.blocks.map(function (b) {
      var st = b.stored || {};
      var enc = st.encryption ? st.encryption.algorithm + ' · key ' + st.encryption.keyId : st.present === false ? '–' : 'none';
      var codec = st.codec || (st.present === false ? 'not on storage' : st.encryption ? 'sealed' : '–');
      var bytesShown = st.fileBytes !== undefined ? st.fileBytes : b.sizeBytes;
      var ratio = st.payloadBytes ? ' <span class="muted">(' + (100 * st.storedPayloadBytes / st.payloadBytes).toFixed(0) + '% of raw)</span>' : '';
      // The index's kind (made with the entry), else the file's (an entry from before kinds were recorded).
      var kind = b.kind === 'tail' || st.kind === 'tail' ? 'tail' : 'block';
      return '<tr data-key="' + esc(b.key) + '" data-kind="' + kind + '" data-codec="' + esc(st.codec || '') + '" data-encryption="' + esc(st.encryption ? st.encryption.algorithm : 'none') +
        '" data-key-id="' + esc(st.encryption ? st.encryption.keyId : '') + '"' + (st.problem ? ' title="' + esc(st.problem.code + ': ' + st.problem.message) + '"' : '') + '>' +
        '<td><code>' + esc(b.key.slice(0, 12)) + '…</code>' + (kind === 'tail' ? ' <span class="tag kind">unit tail</span>' : '') + '</td><td><span class="tag">' + esc(b.trafficClass) + '</span></td><td>' + esc(b.tenant) +
        '</td><td>' + (st.tokenCount !== undefined ? int(st.tokenCount) : '–') + '</td><td>' + bytes(bytesShown) + ratio +
        '</td><td><span class="tag codec">' + esc(codec) + '</span></td><td>' + (st.encryption ? '<span class="tag sealed">' + esc(enc) + '</span>' : esc(enc)) +
        '</td><td class="muted">' + ago(b.lastUseAt) + '</td></tr>';
    });
    document.querySelector('#blocks tbody').innerHTML = rows.join('') || '<tr><td colspan="8" class="muted">no blocks stored yet</td></tr>';
    document.getElementById('blocks').setAttribute('data-matched', String(listing.matched));
  }

  // The block table is extra: a node whose block store cannot open still shows its figures.
  function refreshBlocks() {
    return api('/admin/blocks?limit=' + BLOCK_ROWS + '&stored=1').then(renderBlocks, function (error) {
      if (error.status === 401 || error.status === 403) throw error;
      document.querySelector('#blocks tbody').innerHTML = '<tr><td colspan="8" class="muted">' + esc(error.message) + '</td></tr>';
    });
  }

  // ── charts ────────────────────────────────────────────────────────────
  // The x axis spans the window asked for (GET /admin/stats/history's since/until), whatever data it has.
  var xWindow = null;

  function pad2(n) { return (n < 10 ? '0' : '') + n; }
  var DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
  // Time labels by the tick spacing (seconds): clock time within a day, the day added at midnight
  // or when ticks are a day or more apart; never uPlot's default mixed formats.
  function timeLabels(u, splits, axisIdx, space, incr) {
    return splits.map(function (t) {
      var d = new Date(t * 1000);
      var clock = pad2(d.getHours()) + ':' + pad2(d.getMinutes());
      var day = DAYS[d.getDay()] + ' ' + d.getDate();
      if (incr >= 86400) return day;
      if (d.getHours() === 0 && d.getMinutes() === 0 && incr >= 3600) return day;
      return clock;
    });
  }

  function axis(format, integer) {
    return {
      incrs: integer ? [1, 2, 5, 10, 20, 50, 100, 200, 500, 1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 1e6, 1e7] : undefined,
      stroke: '#8a93a6',
      grid: { stroke: 'rgba(138,147,166,0.12)', width: 1 },
      ticks: { stroke: 'rgba(138,147,166,0.25)', width: 1 },
      values: format ? function (u, vals) { return vals.map(format); } : undefined,
      size: 64,
    };
  }

  function timeAxis() {
    var a = axis(null);
    a.values = timeLabels;
    a.space = 70; // at least this many px between labels: "Wed 3" and "12:00" never touch
    a.incrs = [60, 300, 600, 900, 1800, 3600, 7200, 3 * 3600, 6 * 3600, 12 * 3600, 86400, 2 * 86400, 7 * 86400];
    a.size = 40;
    return a;
  }

  // An interval with no traffic is a gap (null): a value with no neighbour is drawn as a point,
  // so a burst is one visible point and two bursts are not joined by a line.
  function isolatedPoints(u, seriesIdx) {
    var ys = u.data[seriesIdx] || [];
    var idxs = [];
    for (var i = 0; i < ys.length; i++) {
      if (ys[i] === null || ys[i] === undefined) continue;
      var prev = i > 0 ? ys[i - 1] : null;
      var next = i + 1 < ys.length ? ys[i + 1] : null;
      if ((prev === null || prev === undefined) && (next === null || next === undefined)) idxs.push(i);
    }
    return idxs;
  }

  function line(label, color, format, fill) {
    return {
      label: label, stroke: color, width: 2, spanGaps: false,
      fill: fill ? color + '22' : undefined,
      points: { show: true, size: 8, fill: color, filter: isolatedPoints },
      value: function (u, v) { return v === null || v === undefined ? '–' : format(v); },
    };
  }

  function bars(label, color, format) {
    return {
      label: label, stroke: color, fill: color + 'aa', width: 0,
      paths: uPlot.paths.bars({ size: [0.7, 24] }),
      points: { show: false },
      value: function (u, v) { return v === null || v === undefined ? '–' : format(v); },
    };
  }

  function makeChart(id, series, yFormat, yRange, integer) {
    var el = document.getElementById(id);
    var opts = {
      width: Math.max(280, el.clientWidth),
      height: 210,
      cursor: { drag: { x: false, y: false } },
      legend: { live: true },
      // One interval has one x value: give the scale a width around it.
      scales: {
        x: { time: true, range: function (u, min, max) { return xWindow ? [xWindow[0], xWindow[1]] : min === max ? [min - 60, max + 60] : [min, max]; } },
        y: yRange ? { range: yRange } : { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : integer ? 4 : 1]; } },
      },
      axes: [timeAxis(), axis(yFormat, integer)],
      series: [{}].concat(series),
    };
    var data = [[]].concat(series.map(function () { return []; }));
    charts[id] = new uPlot(opts, data, el);
    el.setAttribute('data-points', '0');
  }

  function classSeriesKey(series) { return Object.keys(series.storedBytesByClass).sort().join(','); }
  var storageClasses = null;

  function ensureStorageChart(series) {
    var key = classSeriesKey(series);
    if (storageClasses === key) return;
    if (charts['chart-storage']) { charts['chart-storage'].destroy(); document.getElementById('chart-storage').innerHTML = ''; }
    storageClasses = key;
    var names = key ? key.split(',') : [];
    var lines = [line('all', '#e6e9ef', bytes, true)].concat(names.map(function (name, i) { return line(name, CLASS_COLORS[i % CLASS_COLORS.length], bytes, false); }));
    makeChart('chart-storage', lines, bytes);
  }

  function setData(id, data) {
    charts[id].setData(data);
    var el = document.getElementById(id);
    el.setAttribute('data-points', String(data[0].length));
    var x = charts[id].scales.x;
    el.setAttribute('data-x-range', x.min + ',' + x.max);
  }

  function renderSeries(s, since, until) {
    // The last interval is the one in progress: it ends after `until`, so the window ends with it
    // (same span) or its point would sit outside the plot and be clipped away.
    var end = Math.max(until / 1000, s.t.length ? s.t[s.t.length - 1] : 0);
    // Half-open at its start: `end` is the last interval's end, a multiple of the interval (4 min for 24 h),
    // so at 20:57 the 24 h window ran from 21:00 to 21:00 and both ends were labelled "21:00" (the timeline
    // test failed so in a run just before 21:00). A tick exactly one span before `end` belongs to the window before.
    xWindow = [end - (until - since) / 1000 + 0.25, end];
    setData('chart-hitrate', [s.t, s.hitRateTokens, s.hitRateRequests]);
    setData('chart-tokens', [s.t, s.hitTokens, s.missTokens, s.outputTokens]);
    setData('chart-cost', [s.t, s.costUsd, s.withoutCacheUsd]);
    ensureStorageChart(s);
    var names = storageClasses ? storageClasses.split(',') : [];
    setData('chart-storage', [s.t, s.storedBytes].concat(names.map(function (n) { return s.storedBytesByClass[n]; })));
    setData('chart-gc', [s.t, s.expiredBlocks, s.evictedBlocks]);
  }

  function initCharts() {
    makeChart('chart-hitrate', [line('by tokens', COLORS.hit, pct, true), line('by requests', COLORS.req, pct, false)], pct, [0, 1]);
    makeChart('chart-tokens', [line('hit', COLORS.hit, compact, true), line('miss', COLORS.miss, compact, true), line('output', COLORS.out, compact, false)], compact);
    makeChart('chart-cost', [line('billed', COLORS.cost, usd, true), line('with no cache', COLORS.nocache, usd, false)], usd);
    makeChart('chart-gc', [bars('expired', COLORS.miss, int), bars('evicted', COLORS.req, int)], int, null, true);
    window.addEventListener('resize', function () {
      Object.keys(charts).forEach(function (id) {
        var el = document.getElementById(id);
        charts[id].setSize({ width: Math.max(280, el.clientWidth), height: 210 });
      });
    });
  }

  // ── loop ──────────────────────────────────────────────────────────────
  function setStatus(text, kind) {
    var el = document.getElementById('status');
    el.textContent = text;
    el.className = 'status ' + (kind || '');
  }

  // The what-if panel: one table per class; each cell carries its raw value (data-whatif="class|ttl|field", data-value).
  function renderWhatIf(w) {
    var host = document.getElementById('whatif');
    if (!host || !w) return;
    var html = '';
    function ttlText(ms) {
      if (ms === null || ms === undefined) return '–';
      if (ms % 86400000 === 0) return (ms / 86400000) + 'd';
      if (ms % 3600000 === 0) return (ms / 3600000) + 'h';
      if (ms % 60000 === 0) return (ms / 60000) + 'm';
      return (ms / 1000) + 's';
    }
    function cell(cls, ttl, field, raw, text) {
      return '<td data-whatif="' + esc(cls + '|' + ttl + '|' + field) + '" data-value="' + esc(String(raw)) + '">' + esc(text) + '</td>';
    }
    for (var i = 0; i < w.classes.length; i++) {
      var c = w.classes[i];
      html += '<h4>' + esc(c.trafficClass) + ' <small>TTL in force ' + esc(ttlText(c.currentTtlMs)) + ' · storage $' + esc(String(w.storageUsdPerGbMonth)) + '/GB-month</small></h4>';
      html += '<table class="table" data-class="' + esc(c.trafficClass) + '"><thead><tr><th>TTL</th><th>hit tokens</th><th>saved</th><th>storage byte-days</th><th>storage</th><th>net</th></tr></thead><tbody>';
      for (var j = 0; j < c.rows.length; j++) {
        var r = c.rows[j];
        var bound = r.exact ? '' : '≥ ';
        html += '<tr data-exact="' + r.exact + '"><td>' + esc(r.ttl === 'current' ? 'current (' + ttlText(r.ttlMs) + ')' : r.ttl) + '</td>' +
          cell(c.trafficClass, r.ttl, 'hitTokens', r.hitTokens, bound + int(r.hitTokens)) +
          cell(c.trafficClass, r.ttl, 'savedUsd', r.savedUsd, bound + usd(r.savedUsd)) +
          cell(c.trafficClass, r.ttl, 'storageByteDays', r.storageByteDays, int(r.storageByteDays)) +
          cell(c.trafficClass, r.ttl, 'storageUsd', r.storageUsd, usd(r.storageUsd)) +
          cell(c.trafficClass, r.ttl, 'netUsd', r.netUsd, usd(r.netUsd)) + '</tr>';
      }
      html += '</tbody></table>';
    }
    host.innerHTML = html || '<p>no hits recorded yet</p>';
  }

  function refresh() {
    if (busy) return;
    busy = true;
    var minutes = document.getElementById('window').value;
    Promise.all([api('/admin/stats/overview'), api('/admin/stats/history?minutes=' + minutes), refreshBlocks()])
      .then(function (results) {
        renderOverview(results[0].overview);
        renderWhatIf(results[0].whatIf);
        renderSeries(results[1].series, results[1].since, results[1].until);
        document.body.setAttribute('data-generated-at', String(results[0].generatedAt));
        setStatus('live · ' + new Date(results[0].generatedAt).toLocaleTimeString(), 'ok');
      })
      .catch(function (error) {
        if (error.status === 401 || error.status === 403) {
          stop();
          showLogin(error.message);
          return;
        }
        setStatus('retrying · ' + error.message, 'warn');
      })
      .then(function () { busy = false; });
  }

  function start() {
    document.getElementById('login').hidden = true;
    document.getElementById('main').hidden = false;
    refresh();
    timer = setInterval(refresh, POLL_MS);
  }

  function stop() {
    if (timer) clearInterval(timer);
    timer = null;
  }

  function showLogin(message) {
    sessionStorage.removeItem('kvtier-admin-token');
    document.getElementById('login').hidden = false;
    document.getElementById('login-error').textContent = message || '';
    setStatus('admin token needed', 'warn');
  }

  document.getElementById('login').addEventListener('submit', function (event) {
    event.preventDefault();
    token = document.getElementById('token').value.trim();
    if (!token) return;
    sessionStorage.setItem('kvtier-admin-token', token);
    start();
  });
  document.getElementById('window').addEventListener('change', refresh);

  // For tests and the curious: the live uPlot instances (scales, axis labels, data).
  window.kvtierCharts = charts;
  initCharts();
  token = readToken();
  if (token) start();
  else showLogin('');
})();
