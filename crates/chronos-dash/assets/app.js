// chronos console: live counts (polled at most once a second, paused while the tab is hidden),
// the throughput chart, and select-all. Pages work without it; it only freshens them.
(() => {
  'use strict';
  const body = document.body;
  const page = body.dataset.page || '';
  const refresh = Math.max(1000, parseInt(body.dataset.refresh || '1000', 10) || 1000);
  const live = document.getElementById('live');
  const SVG = 'http://www.w3.org/2000/svg';

  const int = (n) => (n == null ? '–' : Number(n).toLocaleString('en-US'));
  const rate = (r) => {
    if (r == null) return '–';
    return r >= 10 ? Math.round(r).toLocaleString('en-US') + '/min' : r.toFixed(1) + '/min';
  };
  const age = (s) => {
    if (s == null) return '–';
    if (s < 60) return s + 's';
    if (s < 3600) return Math.floor(s / 60) + 'm ' + (s % 60) + 's';
    if (s < 86400) return Math.floor(s / 3600) + 'h ' + Math.floor((s % 3600) / 60) + 'm';
    return Math.floor(s / 86400) + 'd ' + Math.floor((s % 86400) / 3600) + 'h';
  };
  const bytes = (n) => {
    const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
    let i = 0;
    let v = n;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i += 1; }
    return i === 0 ? n + ' B' : v.toFixed(1) + ' ' + u[i];
  };
  const fmt = {
    state: (s) => String(s),
    processed_per_min: rate,
    failed_per_min: rate,
    oldest_pending_s: age,
  };
  const show = (field, value) => (fmt[field] || int)(value);

  async function getJSON(url) {
    const r = await fetch(url, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
    if (r.status === 401) {
      // Logged out (the console restarted, or the cookie was cleared): back to the login page.
      window.location.assign('/login?next=' + encodeURIComponent(window.location.pathname + window.location.search));
    }
    if (!r.ok) throw new Error(url + ': ' + r.status);
    return r.json();
  }

  function setLive(ok) {
    if (!live) return;
    live.textContent = ok ? 'live ' + new Date().toLocaleTimeString() : 'offline';
    live.classList.toggle('down', !ok);
  }

  // Runs fn now and every ms, never two at once, never twice within ms (a tab coming back
  // into view ticks at once), not while the tab is hidden.
  function every(ms, fn) {
    let busy = false;
    let last = 0;
    const tick = async () => {
      if (busy || document.hidden || Date.now() - last < ms - 50) return;
      busy = true;
      last = Date.now();
      try { await fn(); setLive(true); } catch (e) { setLive(false); } finally { busy = false; }
    };
    tick();
    setInterval(tick, ms);
    document.addEventListener('visibilitychange', () => { if (!document.hidden) tick(); });
  }

  function fill(scope, data) {
    scope.querySelectorAll('[data-f]').forEach((el) => {
      const f = el.dataset.f;
      if (f in data) {
        const text = show(f, data[f]);
        if (el.textContent !== text) el.textContent = text;
      }
    });
  }

  function overview() {
    const table = document.getElementById('queues');
    every(refresh, async () => {
      const d = await getJSON('/api/overview');
      // A queue appeared or went: the rows are the server's to render.
      const shown = table ? Array.from(table.querySelectorAll('tbody tr[data-q]'), (r) => r.dataset.q).sort().join('\n') : '';
      const now = d.queues.map((q) => q.name).sort().join('\n');
      if (now !== shown) { window.location.reload(); return; }
      for (const q of d.queues) {
        const row = table.querySelector('tr[data-q="' + CSS.escape(q.name) + '"]');
        if (row) fill(row, q);
      }
      const foot = table && table.querySelector('tfoot tr');
      if (foot) fill(foot, d.total);
      const totals = {
        pending: int(d.total.pending),
        active: int(d.total.active),
        processed_per_min: rate(d.total.processed_per_min),
        failed_per_min: rate(d.total.failed_per_min),
        servers: String(d.servers),
        schedules: String(d.schedules),
        leader: d.leader ? d.leader.id + ' (epoch ' + d.leader.epoch + ')' : 'none',
        memory: bytes(d.redis.used_memory) + (d.redis.maxmemory > 0 ? ' of ' + bytes(d.redis.maxmemory) : ''),
        clients: String(d.redis.connected_clients),
      };
      document.querySelectorAll('[data-total]').forEach((el) => {
        const v = totals[el.dataset.total];
        if (v == null) return;
        const target = el.querySelector('a') || el;
        if (target.textContent !== v) target.textContent = v;
      });
    });
  }

  function queuePage() {
    const name = body.dataset.arg;
    // The rows are read once, the tab counts live: once the count of the listed state moved
    // away from the one read with the rows, say so (the rows are older than the counts).
    const tab = document.querySelector('nav.tabs a.active[data-state]');
    const listed = tab ? tab.dataset.listed : null;
    const stale = document.getElementById('stale-rows');
    every(refresh, async () => {
      const q = await getJSON('/api/queues/' + encodeURIComponent(name));
      fill(document, q);
      if (tab && stale && listed != null) {
        const now = q[tab.dataset.state];
        if (now != null && String(now) !== listed) {
          stale.querySelector('[data-f="listed"]').textContent = int(Number(listed));
          stale.querySelector('[data-f="now"]').textContent = int(now);
          stale.hidden = false;
        }
      }
    });
    const all = document.getElementById('select-all');
    if (all) {
      all.addEventListener('change', () => {
        document.querySelectorAll('input.pick').forEach((c) => { c.checked = all.checked; });
      });
    }
  }

  function el(tag, attrs, text) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    if (text != null) e.textContent = text;
    return e;
  }

  function niceMax(v) {
    if (v <= 5) return 5;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    for (const m of [1, 2, 2.5, 5, 10]) if (m * p >= v) return m * p;
    return 10 * p;
  }

  function hhmm(ms) {
    const d = new Date(ms);
    return String(d.getHours()).padStart(2, '0') + ':' + String(d.getMinutes()).padStart(2, '0');
  }

  // A step's start as the axis shows it: the time of day for steps under a day, else the date.
  function when(ms, step) {
    if (step < 86400000) return hhmm(ms);
    const d = new Date(ms);
    return String(d.getUTCMonth() + 1).padStart(2, '0') + '-' + String(d.getUTCDate()).padStart(2, '0');
  }

  const SPANS = { hour: 'last hour', day: 'last day', week: 'last week', quarter: 'last 90 days' };
  const STEP_NAMES = { 60000: 'this minute', 900000: 'these 15 minutes', 86400000: 'today' };

  // Starts the chart a minute before the first activity of the hour (at most 15 minutes from
  // the end), so a young queue's minutes are not squeezed against the right edge.
  function trim(h) {
    let first = h.start_ms.findIndex((_, i) => h.processed[i] > 0 || h.failed[i] > 0);
    if (first < 0) first = 0;
    const from = Math.max(0, Math.min(first - 1, h.start_ms.length - 15));
    return {
      start_ms: h.start_ms.slice(from),
      processed: h.processed.slice(from),
      failed: h.failed.slice(from),
    };
  }

  function draw(box, all) {
    const step = all.step_ms || 60000;
    const h = step === 60000 ? trim(all) : all;
    const W = Math.max(320, box.clientWidth || 800);
    const H = 190;
    const L = 52;
    const R = 12;
    const T = 12;
    const B = 26;
    const n = h.start_ms.length;
    const max = niceMax(Math.max(0, ...h.processed, ...h.failed));
    const x = (i) => L + (n <= 1 ? 0 : (i * (W - L - R)) / (n - 1));
    const y = (v) => T + (1 - v / max) * (H - T - B);
    const svg = el('svg', { viewBox: '0 0 ' + W + ' ' + H, width: W, height: H, role: 'img', 'aria-label': 'tasks per step of ' + step / 60000 + ' minutes' });
    for (const f of [0, 0.5, 1]) {
      const v = max * f;
      svg.appendChild(el('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }));
      svg.appendChild(el('text', { x: L - 6, y: y(v) + 4, class: 'axis', 'text-anchor': 'end' }, int(Math.round(v))));
    }
    if (n > 0) {
      svg.appendChild(el('text', { x: L, y: H - 6, class: 'axis' }, when(h.start_ms[0], step)));
      svg.appendChild(el('text', { x: W - R, y: H - 6, class: 'axis', 'text-anchor': 'end' }, when(h.start_ms[n - 1], step)));
      const pts = (series) => series.map((v, i) => x(i).toFixed(1) + ',' + y(v).toFixed(1)).join(' ');
      const area = x(0).toFixed(1) + ',' + y(0) + ' ' + pts(h.processed) + ' ' + x(n - 1).toFixed(1) + ',' + y(0);
      svg.appendChild(el('polygon', { points: area, class: 'processed-area' }));
      svg.appendChild(el('polyline', { points: pts(h.processed), class: 'processed' }));
      svg.appendChild(el('polyline', { points: pts(h.failed), class: 'failed' }));
    }
    const sum = (a) => a.reduce((s, v) => s + v, 0);
    const legend = document.createElement('p');
    legend.className = 'legend';
    const key = (cls, label) => {
      const s = document.createElement('span');
      s.className = 'key ' + cls;
      s.textContent = label;
      return s;
    };
    legend.append(
      key('processed', 'processed ' + int(sum(h.processed))),
      key('failed', 'failed ' + int(sum(h.failed))),
    );
    // The step under way is not drawn (it would dip): its counts so far are said apart.
    if (all.partial) {
      const p = document.createElement('span');
      p.className = 'partial';
      p.id = 'chart-partial';
      p.textContent = (STEP_NAMES[step] || 'now') + ' so far: ' + int(all.partial.processed) + ' processed, ' + int(all.partial.failed) + ' failed';
      legend.append(p);
    }
    box.replaceChildren(svg, legend);
    box.dataset.drawn = String(n);
    box.dataset.step = String(step);
  }

  function chart() {
    const box = document.getElementById('chart');
    if (!box) return;
    const q = box.dataset.queue || '';
    let span = 'hour';
    const url = () => '/api/history?span=' + span + (q ? '&queue=' + encodeURIComponent(q) : '');
    const redraw = async () => draw(box, await getJSON(url()));
    // The spans, as buttons above the chart.
    const spans = document.createElement('nav');
    spans.className = 'chart-spans';
    spans.id = 'chart-spans';
    for (const [name, label] of Object.entries(SPANS)) {
      const b = document.createElement('button');
      b.type = 'button';
      b.className = 'small' + (name === span ? ' active' : '');
      b.dataset.span = name;
      b.textContent = label;
      b.addEventListener('click', () => {
        span = name;
        spans.querySelectorAll('button').forEach((x) => x.classList.toggle('active', x === b));
        redraw();
      });
      spans.append(b);
    }
    box.parentNode.insertBefore(spans, box);
    every(Math.max(10000, refresh * 10), redraw);
  }

  // Deleting cannot be undone: ask first.
  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-action="delete"], button[data-selection="delete"], button[data-bulk="delete"]');
    if (b && !window.confirm('Delete for good? This cannot be undone.')) ev.preventDefault();
  });

  // A bulk action's progress: counts and bar follow the job; the page reloads once it ended
  // (to show the final report and drop the cancel button).
  function jobPage() {
    const box = document.getElementById('job');
    if (!box || box.dataset.state !== 'running') return;
    const id = body.dataset.arg || '';
    const bar = document.getElementById('job-bar');
    every(refresh, async () => {
      const j = await getJSON('/api/jobs/' + encodeURIComponent(id));
      fill(box, j);
      if (bar) {
        bar.max = Math.max(1, j.expected_at_most, j.matched);
        bar.value = j.done;
      }
      if (j.state !== 'running') window.location.reload();
    });
  }

  // A task that may still change: its progress bar follows the reports, and the page reloads
  // once its state changed (to show the outcome and the actions it allows now).
  function taskPage() {
    const url = body.dataset.arg;
    const badge = document.getElementById('task-state');
    if (!url || !badge) return;
    const was = badge.dataset.state;
    if (!['pending', 'active', 'scheduled', 'retry'].includes(was)) return;
    const setText = (id, v) => {
      const e = document.getElementById(id);
      if (e && e.textContent !== v) e.textContent = v;
    };
    every(refresh, async () => {
      const t = await getJSON(url);
      if (t.state !== was) { window.location.reload(); return; }
      const p = t.progress;
      if (!p) return;
      if (!document.getElementById('progress-value')) { window.location.reload(); return; }
      const bar = document.getElementById('progress-bar');
      if (t.progress_percent != null) {
        // One decimal at most, as the server renders it.
        const pc = Math.round(t.progress_percent * 10) / 10;
        if (bar) bar.value = pc;
        setText('progress-percent', pc + '%');
      }
      setText('progress-note', p.value && typeof p.value.note === 'string' ? p.value.note : '');
      setText('progress-at', new Date(p.at_ms).toISOString().replace('T', ' ').slice(0, 19) + ' UTC');
      setText('progress-value', JSON.stringify(p.value));
    });
  }

  // The events page: new events of the queue go on top of its table as they are written.
  function eventsPage() {
    const table = document.getElementById('events');
    if (!table) return;
    const tbody = table.querySelector('tbody');
    const queue = table.dataset.queue;
    const cell = (text, cls) => {
      const td = document.createElement('td');
      if (cls) td.className = cls;
      td.textContent = text;
      return td;
    };
    every(refresh, async () => {
      const url = '/api/queues/' + encodeURIComponent(queue) + '/events?after=' +
        encodeURIComponent(table.dataset.after);
      const events = await getJSON(url);
      for (const e of events) {
        const tr = document.createElement('tr');
        tr.dataset.event = e.id;
        tr.dataset.type = e.type;
        tr.appendChild(cell(e.time, 'mono'));
        const badge = document.createElement('span');
        badge.className = 'badge';
        badge.textContent = e.type;
        const type = cell('');
        type.appendChild(badge);
        tr.appendChild(type);
        const task = cell('', 'mono');
        const link = document.createElement('a');
        link.href = e.task_href;
        link.textContent = e.task_id;
        task.appendChild(link);
        tr.appendChild(task);
        tr.appendChild(cell(e.kind, 'mono'));
        tr.appendChild(cell(e.detail));
        tbody.insertBefore(tr, tbody.firstChild);
        table.dataset.after = e.id;
      }
      while (tbody.children.length > 500) tbody.removeChild(tbody.lastChild);
      const none = document.getElementById('no-events');
      if (none && events.length) none.remove();
    });
  }

  if (page === 'overview') overview();
  if (page === 'events') eventsPage();
  if (page === 'job') jobPage();
  if (page === 'task') taskPage();
  if (page === 'queue') queuePage();
  if (page === 'overview' || page === 'queue') chart();
})();
