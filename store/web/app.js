// proflink web view: traces, waterfalls and flame graphs over the embedded
// store's JSON API (same origin, read-only). Plain DOM, no dependencies:
// everything the page needs is compiled into the proflink binary.
'use strict';

const $ = (sel, root = document) => root.querySelector(sel);
const view = () => $('#view');

// ---- small helpers -------------------------------------------------------

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : v);
    }
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

async function api(path) {
  const res = await fetch(path);
  const text = await res.text();
  let body;
  try { body = JSON.parse(text); } catch { body = { error: text }; }
  if (!res.ok) throw new Error(body.error || `HTTP ${res.status}`);
  return body;
}

function fmtDuration(ns) {
  if (ns === null || ns === undefined) return '-';
  const scaled = (v, u) => (v < 10 ? v.toFixed(2) : v < 100 ? v.toFixed(1) : v.toFixed(0)) + u;
  if (ns >= 1e9) return scaled(ns / 1e9, 's');
  if (ns >= 1e6) return scaled(ns / 1e6, 'ms');
  if (ns >= 1e3) return scaled(ns / 1e3, 'us');
  return `${Math.round(ns)}ns`;
}

function fmtBytes(b) {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (b >= 1024 && i < units.length - 1) { b /= 1024; i++; }
  return (i ? b.toFixed(b < 10 ? 2 : 1) : String(b)) + ' ' + units[i];
}

// A value in a profile's unit, for people.
function fmtValue(v, unit) {
  if (unit === 'nanoseconds') return fmtDuration(v);
  if (unit === 'microseconds') return fmtDuration(v * 1e3);
  if (unit === 'milliseconds') return fmtDuration(v * 1e6);
  if (unit === 'seconds') return fmtDuration(v * 1e9);
  if (unit === 'bytes') return fmtBytes(v);
  if (unit === 'count') return `${v} samples`;
  return `${v}${unit ? ' ' + unit : ''}`;
}

// A span's or trace's time: {kind, value, unit} or null.
function fmtTime(t) {
  if (!t) return '-';
  if (t.kind === 'cpu') return fmtDuration(t.value);
  if (t.kind === 'wall') return `${fmtDuration(t.value)} wall`;
  return `${t.value} samples`;
}

function timeKey(t) { return t && (t.kind === 'cpu' || t.kind === 'wall') ? t.value : -1; }

function fmtClock(nsText) {
  const d = new Date(Number(BigInt(nsText) / 1000000n));
  return d.toLocaleTimeString([], { hour12: false });
}

function pct(a, b) { return b ? `${((100 * a) / b).toFixed(1)}%` : '-'; }

// Stable colour per service name.
function serviceColor(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
  return `hsl(${h % 360}, 55%, 58%)`;
}

function params(hash) {
  const q = hash.indexOf('?');
  return new URLSearchParams(q < 0 ? '' : hash.slice(q + 1));
}

function setHash(path, p) {
  const s = p.toString();
  location.hash = s ? `${path}?${s}` : path;
}

// ---- status strip ----------------------------------------------------------

async function refreshStatus() {
  try {
    const s = await api('/api/status');
    const ratio = s.link.spans ? (100 * s.link.linked) / s.link.spans : 0;
    $('#status').replaceChildren(
      el('span', null, 'spans/s ', el('b', { id: 'st-spans', text: s.spans_per_second.toFixed(1) })),
      ' · ',
      el('span', null, 'samples/s ', el('b', { id: 'st-samples', text: s.samples_per_second.toFixed(1) })),
      ' · ',
      el('span', null, 'linked ', el('b', { id: 'st-link', text: s.link.spans ? `${ratio.toFixed(1)}%` : '-' })),
      ' · ',
      el('span', null, 'store ', el('b', { id: 'st-size', text: fmtBytes(s.store_bytes) })),
    );
  } catch (e) {
    $('#status').textContent = `store: ${e.message}`;
  }
}

// ---- search ----------------------------------------------------------------

const SINCE = [['15m', 'last 15 min'], ['1h', 'last hour'], ['6h', 'last 6 h'], ['1d', 'last day'], ['0', 'all']];

async function showSearch(p) {
  // the three requests go out together
  const q = new URLSearchParams({ since: p.get('since') || '1h', limit: '100' });
  for (const k of ['service', 'root', 'tenant', 'until', 'min_duration', 'min_cpu', 'sort']) if (p.get(k)) q.set(k, p.get(k));
  if (p.get('errors') === '1') q.set('errors', '1');
  const tracesP = api(`/api/traces?${q}`);
  const linksP = api(`/api/links?since=${encodeURIComponent(p.get('since') || '1h')}`);
  tracesP.catch(() => {});
  linksP.catch(() => {});
  const services = await api('/api/services').catch(() => ({ services: [] }));
  const svc = el('select', { name: 'service' }, el('option', { value: '' }, 'any'));
  for (const s of services.services) svc.append(el('option', { value: s, selected: p.get('service') === s }, s));
  const since = el('select', { name: 'since' });
  for (const [v, label] of SINCE) since.append(el('option', { value: v, selected: (p.get('since') || '1h') === v }, label));
  const sort = el('select', { name: 'sort' },
    el('option', { value: 'duration', selected: p.get('sort') !== 'cpu' }, 'duration'),
    el('option', { value: 'cpu', selected: p.get('sort') === 'cpu' }, 'CPU / wall time'));
  const input = (name, ph) => el('input', { name, placeholder: ph, value: p.get(name) || '', size: 9 });
  const form = el('form', { class: 'filters', id: 'search-form' },
    el('label', null, 'service', svc),
    el('label', null, 'root operation', el('input', { name: 'root', value: p.get('root') || '', size: 18 })),
    el('label', null, 'tenant', input('tenant', 'any')),
    el('label', null, 'since', since),
    el('label', null, 'until (ago)', input('until', 'e.g. 5m')),
    el('label', null, 'min duration', input('min_duration', '100ms')),
    el('label', null, 'min CPU', input('min_cpu', '10ms')),
    el('label', { class: 'check' }, el('input', { type: 'checkbox', name: 'errors', checked: p.get('errors') === '1' }), 'errors only'),
    el('label', null, 'sort by', sort),
    el('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, k === 'errors' ? '1' : v);
    setHash('#/', q);
  });
  const results = el('div', { id: 'results' }, el('div', { class: 'empty' }, 'loading…'));
  const links = el('div', { class: 'links', id: 'links' });
  view().replaceChildren(el('h2', null, 'Traces'), form, results, links);

  try {
    const { traces } = await tracesP;
    results.replaceChildren(tracesTable(traces));
  } catch (e) {
    results.replaceChildren(el('div', { class: 'empty err' }, e.message));
  }
  try {
    const l = await linksP;
    links.replaceChildren(linksTable(l));
  } catch (e) {
    links.replaceChildren(el('div', { class: 'muted' }, `link ratio: ${e.message}`));
  }
}

function tracesTable(traces) {
  if (!traces.length) return el('div', { class: 'empty', id: 'no-traces' }, 'No traces match.');
  const body = el('tbody');
  for (const t of traces) {
    const tr = el('tr', { class: 'clickable trace-row', 'data-trace': t.trace_id },
      el('td', { class: 'mono' }, t.trace_id.slice(0, 16) + '…'),
      el('td', null, fmtClock(t.start_unix_nano)),
      el('td', { class: 'num duration' }, fmtDuration(t.duration_ns)),
      el('td', { class: 'num time' }, fmtTime(t.time)),
      el('td', { class: 'num' }, t.span_count),
      el('td', null, t.root_service || '-', t.tenant ? el('span', { class: 'muted tenant' }, ` (${t.tenant})`) : null),
      el('td', { class: 'name root' }, t.has_root ? t.root_name : '(root span not stored)',
        t.error_count ? el('span', { class: 'err' }, '  error') : null));
    tr.addEventListener('click', () => { location.hash = `#/trace/${t.trace_id}`; });
    body.append(tr);
  }
  return el('table', { id: 'traces' },
    el('thead', null, el('tr', null, el('th', null, 'trace'), el('th', null, 'start'),
      el('th', { class: 'num' }, 'duration'), el('th', { class: 'num' }, 'CPU / wall'),
      el('th', { class: 'num' }, 'spans'), el('th', null, 'service'), el('th', null, 'root operation'))),
    body);
}

function linksTable(l) {
  const body = el('tbody');
  for (const s of l.services) {
    const r = s.spans ? s.linked / s.spans : 0;
    const bar = el('span', { class: 'ratio' }, el('i'));
    bar.firstChild.style.width = `${(100 * r).toFixed(1)}%`;
    body.append(el('tr', { 'data-service': s.service }, el('td', null, s.service),
      el('td', { class: 'num' }, s.spans), el('td', { class: 'num' }, s.linked),
      el('td', null, bar, pct(s.linked, s.spans))));
  }
  return el('div', null, el('h3', null, 'Spans with profiles, per service'),
    el('table', { id: 'link-ratio' }, el('thead', null, el('tr', null, el('th', null, 'service'),
      el('th', { class: 'num' }, 'spans'), el('th', { class: 'num' }, 'with profile'), el('th', null, 'link ratio'))), body),
    el('div', { class: 'note' }, `over the spans of the ${l.traces} most recent traces`));
}

// ---- trace view ------------------------------------------------------------

async function showTrace(id, p) {
  view().replaceChildren(el('div', { class: 'empty' }, 'loading…'));
  let d;
  try {
    d = await api(`/api/traces/${id}?top=5`);
  } catch (e) {
    view().replaceChildren(el('div', { class: 'empty err' }, e.message));
    return;
  }
  const t = d.trace;
  const head = el('div', { id: 'trace-head' },
    el('h2', null, t.has_root ? t.root_name : 'trace', ' ', el('span', { class: 'muted mono' }, t.trace_id)),
    el('div', null, `${d.spans.length} spans · duration ${fmtDuration(t.duration_ns)} · `,
      el('span', { id: 'trace-time' }, t.time ? `${t.time.kind === 'cpu' ? 'CPU' : t.time.kind === 'wall' ? 'wall' : ''} ${fmtTime(t.time).replace(/ wall$/, '')}`.trim() : 'no samples'), t.error_count ? el('span', { class: 'err' }, ' · has errors') : null,
      ' · ', el('a', { href: `#/flame?trace=${t.trace_id}` }, 'flame graph of the trace')));
  const side = el('div', { id: 'side' }, el('div', { class: 'empty' }, 'Click a span for its details and flame graph.'));
  const started = performance.now();
  const wf = waterfall(d.spans, (span) => selectSpan(span, side, d));
  view().replaceChildren(head, el('div', { class: 'layout' }, wf, side));
  window.__proflink = Object.assign(window.__proflink || {}, { waterfallMs: performance.now() - started });
  const want = p.get('span');
  const first = want && d.spans.find((s) => s.span_id === want);
  if (first) selectSpan(first, side, d);
}

const ROW = 22; // waterfall row height, px

// The waterfall draws only the rows in view (plus a margin) and redraws on
// scroll, so a trace of 10,000 spans costs what a screenful does.
function waterfall(spans, onSelect) {
  let t0 = Infinity, t1 = 0;
  for (const s of spans) {
    const a = Number(BigInt(s.start_unix_nano)), b = Number(BigInt(s.end_unix_nano));
    s._start = a; s._end = b;
    if (a < t0) t0 = a;
    if (b > t1) t1 = b;
  }
  const total = Math.max(1, t1 - t0);
  const box = el('div', { class: 'wf', id: 'waterfall', 'data-rows': spans.length });
  box.style.height = `${Math.min(spans.length * ROW + 2, Math.max(320, window.innerHeight - 160))}px`;
  const spacer = el('div', { class: 'wf-spacer' });
  spacer.style.height = `${spans.length * ROW}px`;
  box.append(spacer);
  let selected = null;
  const row = (s, i) => {
    const r = el('div', { class: s.span_id === selected ? 'wf-row selected' : 'wf-row', 'data-span': s.span_id });
    r.style.top = `${i * ROW}px`;
    const name = el('div', { class: 'wf-name', title: s.name });
    name.style.paddingLeft = `${6 + Math.min(s.depth, 30) * 12}px`;
    name.append(s.name, el('span', { class: 'svc' }, s.service));
    const track = el('div', { class: 'wf-track' });
    const bar = el('div', { class: s.status_code === 2 ? 'wf-bar error' : 'wf-bar' });
    const left = (100 * (s._start - t0)) / total, width = (100 * (s._end - s._start)) / total;
    bar.style.left = `${left}%`;
    bar.style.width = `${width}%`;
    bar.style.background = serviceColor(s.service);
    // the span's own CPU (or wall) time, drawn inside its duration
    const own = timeKey(s.time);
    if (own > 0 && s.duration_ns > 0) {
      const inner = el('div', { class: 'wf-own', title: `${s.time.kind} ${fmtTime(s.time)}` });
      inner.style.width = `${Math.min(100, (100 * own) / s.duration_ns)}%`;
      bar.append(inner);
    }
    const label = el('div', { class: 'wf-label' }, fmtDuration(s.duration_ns), s.time ? ` · ${fmtTime(s.time)}` : '');
    if (left + width < 80) {
      label.style.left = `${left + width}%`;
      label.style.marginLeft = '4px';
    } else { // no room after the bar: before it, or inside at the right
      label.style.right = left > 20 ? `${100 - left}%` : '4px';
      label.style.marginRight = '4px';
      if (left <= 20) label.classList.add('inside');
    }
    track.append(bar, label);
    r.append(name, track);
    return r;
  };
  let drawnFrom = -1, drawnTo = -1;
  const draw = (force) => {
    const h = box.clientHeight || 640;
    const from = Math.max(0, Math.floor(box.scrollTop / ROW) - 20);
    const to = Math.min(spans.length, Math.ceil((box.scrollTop + h) / ROW) + 20);
    if (!force && from === drawnFrom && to === drawnTo) return;
    drawnFrom = from; drawnTo = to;
    const frag = document.createDocumentFragment();
    frag.append(spacer);
    for (let i = from; i < to; i++) frag.append(row(spans[i], i));
    box.replaceChildren(frag);
  };
  box.addEventListener('scroll', () => draw(false));
  box.addEventListener('click', (ev) => {
    const r = ev.target.closest('.wf-row');
    if (!r) return;
    selected = r.dataset.span;
    for (const x of box.querySelectorAll('.wf-row.selected')) x.classList.remove('selected');
    r.classList.add('selected');
    onSelect(spans.find((s) => s.span_id === selected));
  });
  // drawn once attached (clientHeight is known then)
  requestAnimationFrame(() => draw(true));
  draw(true);
  return box;
}

function detailsList(obj) {
  const dl = el('dl');
  for (const [k, v] of Object.entries(obj || {})) dl.append(el('dt', null, k), el('dd', null, typeof v === 'string' ? v : JSON.stringify(v)));
  return dl;
}

function selectSpan(s, side, d) {
  const fgBox = el('div', { id: 'span-flame' });
  const desc = el('input', { type: 'checkbox', id: 'with-descendants' });
  const events = (s.events || []).map((e) => el('li', null, e.name, ' ', el('span', { class: 'muted' }, JSON.stringify(e.attributes || {}))));
  const top = (s.top_functions || []).map((f) => el('li', null, f.name, ' ', el('span', { class: 'muted' },
    s.time && s.time.kind !== 'samples' ? fmtDuration(f.self) : `${f.self} samples`)));
  side.replaceChildren(el('div', { class: 'details', id: 'span-details' },
    el('h3', null, s.name, ' ', el('span', { class: 'muted' }, s.service)),
    el('dl', null,
      el('dt', null, 'span'), el('dd', { class: 'mono' }, s.span_id),
      el('dt', null, 'duration'), el('dd', null, fmtDuration(s.duration_ns)),
      el('dt', null, 'time'), el('dd', { id: 'span-time' }, fmtTime(s.time), s.time ? ` (${s.time.kind})` : ''),
      el('dt', null, 'samples'), el('dd', null, s.samples),
      el('dt', null, 'profile id'), el('dd', { class: 'mono' }, s.profile_id || '-'),
      el('dt', null, 'status'), el('dd', { class: s.status_code === 2 ? 'err' : null }, s.status_code === 2 ? `error ${s.status_message}` : s.status_code === 1 ? 'ok' : 'unset')),
    top.length ? el('div', null, el('h3', null, 'hottest functions (self)'), el('ul', { id: 'span-top' }, ...top)) : null,
    el('h3', null, 'attributes'), detailsList(s.attributes),
    el('h3', null, 'resource'), detailsList(s.resource),
    events.length ? el('div', null, el('h3', null, 'events'), el('ul', null, ...events)) : null),
  el('h3', null, 'Flame graph of this span ', el('label', { class: 'muted' }, desc, ' with descendants'),
    ' ', el('a', { href: `#/diff?a=span:${s.span_id}`, id: 'diff-from-span' }, 'compare…')),
  fgBox);
  const load = () => flameView(fgBox, `span=${s.span_id}${desc.checked ? '&descendants=1' : ''}`);
  desc.addEventListener('change', load);
  load();
}

// ---- flame graphs ----------------------------------------------------------

// Per-function self and total from the tree (a function counted once per
// stack even when it recurses).
function functionTable(root) {
  const stats = new Map();
  const onPath = new Map();
  const walk = (n) => {
    const kids = n.children || [];
    let childSum = 0;
    for (const c of kids) childSum += c.value;
    let st = stats.get(n.name);
    if (!st) stats.set(n.name, (st = { name: n.name, self: 0, total: 0 }));
    st.self += Math.max(0, n.value - childSum);
    const depth = onPath.get(n.name) || 0;
    if (!depth) st.total += n.value;
    onPath.set(n.name, depth + 1);
    for (const c of kids) walk(c);
    onPath.set(n.name, depth);
  };
  for (const c of root.children || []) walk(c);
  return [...stats.values()];
}

// Lays out a tree rooted at `focus` into rows of nodes at least minPx wide.
function layout(focus, width, minPx) {
  const nodes = [];
  const scale = focus.value ? width / focus.value : 0;
  const visit = (n, x, depth) => {
    const w = n.value * scale;
    if (w < minPx) return;
    nodes.push({ n, x, w, depth });
    let cx = x;
    for (const c of n.children || []) { visit(c, cx, depth + 1); cx += c.value * scale; }
  };
  visit(focus, 0, 0);
  return nodes;
}

function frameColor(name) {
  let h = 0;
  for (let i = 0; i < name.length; i++) h = (h * 33 + name.charCodeAt(i)) >>> 0;
  return `hsl(${20 + (h % 35)}, ${70 + (h % 20)}%, ${58 + (h % 14)}%)`;
}

// Renders a flame graph component into `box`. data: {type, unit, total,
// types, flamegraph}; diff: optional Map path -> {a, b} shares.
function flameGraph(box, data, opts = {}) {
  const started = performance.now();
  const root = data.flamegraph || { name: 'all', value: 0, children: [] };
  const parents = new Map();
  const index = (n, parent) => { parents.set(n, parent); for (const c of n.children || []) index(c, n); };
  index(root, null);
  let focus = root;
  let search = '';
  const info = el('div', { class: 'fg-info', id: 'fg-info' }, opts.diff ? 'hover a frame: its share before and after'
    : `total ${fmtValue(data.total, data.unit)} (${data.type}, ${data.unit})`);
  const canvas = el('div', { class: 'fg', id: 'flamegraph' });
  const searchBox = el('input', { placeholder: 'search functions', id: 'fg-search', size: 22 });
  const reset = el('button', { class: 'secondary', type: 'button', id: 'fg-reset' }, 'reset zoom');
  const matchInfo = el('span', { class: 'muted', id: 'fg-match' });
  const pathOf = (n) => { const p = []; for (let x = n; x && x !== root; x = parents.get(x)) p.unshift(x.name); return p.join(';'); };
  const draw = () => {
    const width = Math.max(300, canvas.clientWidth || box.clientWidth || 900);
    const nodes = layout(focus, width, 0.6);
    let maxDepth = 0;
    for (const x of nodes) maxDepth = Math.max(maxDepth, x.depth);
    canvas.style.height = `${(maxDepth + 1) * 18 + 2}px`;
    const frag = document.createDocumentFragment();
    const needle = search.toLowerCase();
    let matched = 0;
    for (const x of nodes) {
      const n = x.n;
      const d = el('div', { class: 'fg-node', 'data-name': n.name, 'data-value': n.value });
      d.style.left = `${x.x}px`;
      d.style.width = `${x.w}px`;
      d.style.top = `${x.depth * 18}px`;
      if (opts.diff) {
        const s = opts.diff.get(pathOf(n)) || { a: 0, b: 0 };
        const delta = s.b - s.a;
        const k = Math.min(1, Math.abs(delta) * 8);
        d.style.background = delta > 0 ? `rgba(220, 40, 40, ${0.15 + 0.85 * k})` : delta < 0 ? `rgba(30, 160, 60, ${0.15 + 0.85 * k})` : '#ddd';
        d.classList.add(delta > 0.0005 ? 'worse' : delta < -0.0005 ? 'better' : 'same');
        d.dataset.before = (100 * s.a).toFixed(2);
        d.dataset.after = (100 * s.b).toFixed(2);
      } else {
        d.style.background = n === root ? '#c9ced8' : frameColor(n.name);
      }
      if (needle && n.name.toLowerCase().includes(needle)) { d.classList.add('match'); matched++; }
      if (x.w > 28) d.textContent = n.name;
      frag.append(d);
    }
    canvas.replaceChildren(frag);
    matchInfo.textContent = needle ? `${matched} frames match` : '';
    if (window.__proflink) window.__proflink.flameMs = performance.now() - started;
  };
  canvas.addEventListener('mousemove', (ev) => {
    const d = ev.target.closest('.fg-node');
    if (!d) return;
    const v = Number(d.dataset.value);
    const text = opts.diff ? `${d.dataset.name}: before ${d.dataset.before}% → after ${d.dataset.after}% of the total`
      : `${d.dataset.name}: ${fmtValue(v, data.unit)} (${pct(v, data.total)} of total)`;
    info.textContent = text;
  });
  canvas.addEventListener('click', (ev) => {
    const d = ev.target.closest('.fg-node');
    if (!d) return;
    const i = [...canvas.children].indexOf(d);
    const nodes = layout(focus, Math.max(300, canvas.clientWidth || box.clientWidth || 900), 0.6);
    if (nodes[i]) { focus = nodes[i].n; draw(); }
  });
  reset.addEventListener('click', () => { focus = root; draw(); });
  searchBox.addEventListener('input', () => { search = searchBox.value; draw(); });
  const toolbar = el('div', { class: 'fg-toolbar' }, searchBox, matchInfo, reset, ...(opts.toolbar || []));
  const table = opts.diff ? null : fnTable(root, data);
  box.replaceChildren(...[toolbar, info, canvas, table].filter(Boolean));
  draw();
  window.__proflink = Object.assign(window.__proflink || {}, { flameMs: performance.now() - started });
}

function fnTable(root, data) {
  const rows = functionTable(root);
  let key = 'self';
  const body = el('tbody');
  const fill = () => {
    rows.sort((a, b) => b[key] - a[key] || a.name.localeCompare(b.name));
    const frag = document.createDocumentFragment();
    for (const r of rows.slice(0, 300)) {
      frag.append(el('tr', { 'data-fn': r.name }, el('td', { class: 'num self' }, fmtValue(r.self, data.unit)),
        el('td', { class: 'num' }, pct(r.self, data.total)), el('td', { class: 'num total' }, fmtValue(r.total, data.unit)),
        el('td', { class: 'num' }, pct(r.total, data.total)), el('td', { class: 'name' }, r.name)));
    }
    body.replaceChildren(frag);
  };
  const th = (label, k) => {
    const h = el('th', { class: 'num sortable', title: 'sort' }, label);
    h.addEventListener('click', () => { key = k; fill(); });
    return h;
  };
  fill();
  return el('div', { class: 'fg-table' }, el('table', { id: 'fn-table' },
    el('thead', null, el('tr', null, th('self', 'self'), el('th', { class: 'num' }, 'self %'), th('total', 'total'),
      el('th', { class: 'num' }, 'total %'), el('th', null, 'function'))), body),
  rows.length > 300 ? el('div', { class: 'note' }, `${rows.length - 300} more functions not shown`) : null);
}

// Loads /api/flamegraph?<selection> and renders it with a type selector and
// download links.
async function flameView(box, selection, type, pending) {
  box.replaceChildren(el('div', { class: 'empty' }, 'loading…'));
  const q = `${selection}${type ? `&type=${encodeURIComponent(type)}` : ''}`;
  let data;
  try {
    data = await (pending || api(`/api/flamegraph?${q}&format=json`));
  } catch (e) {
    box.replaceChildren(el('div', { class: 'empty err' }, e.message));
    return;
  }
  const sel = el('select', { id: 'fg-type', title: 'profile type' });
  const current = type || (data.type === 'cpu' || data.type === 'wall' ? data.type : `${data.type}:${data.unit}`);
  for (const t of data.types || []) sel.append(el('option', { value: t, selected: t === current }, t));
  sel.addEventListener('change', () => flameView(box, selection, sel.value));
  const dl = (fmt, label) => el('a', { href: `/api/flamegraph?${q}&format=${fmt}`, download: `proflink-flamegraph.${fmt === 'pprof' ? 'pb.gz' : fmt === 'speedscope' ? 'speedscope.json' : fmt}`, class: `download-${fmt}` }, label);
  const toolbar = [el('label', { class: 'muted' }, 'type ', sel),
    el('span', { class: 'muted', id: 'fg-unit' }, `${data.type} · ${data.unit}`),
    el('span', null, 'download: ', dl('pprof', 'pprof'), ' · ', dl('speedscope', 'speedscope'), ' · ', dl('svg', 'svg'), ' · ', dl('folded', 'folded'))];
  if (!data.stacks) {
    box.replaceChildren(el('div', { class: 'fg-toolbar' }, ...toolbar),
      el('div', { class: 'empty', id: 'fg-empty' }, data.types && data.types.length ? 'No samples of this type here.' : 'No samples here (yet).'));
    return;
  }
  flameGraph(box, data, { toolbar });
}

function selectionForm(prefix, p) {
  const kind = el('select', { name: `${prefix}kind` },
    ...['service', 'trace', 'span'].map((k) => el('option', { value: k, selected: (p.get(`${prefix}kind`) || 'service') === k }, k)));
  const value = el('input', { name: `${prefix}value`, value: p.get(`${prefix}value`) || '', size: 34, placeholder: 'service name or id' });
  const since = el('input', { name: `${prefix}since`, value: p.get(`${prefix}since`) || '1h', size: 5 });
  const until = el('input', { name: `${prefix}until`, value: p.get(`${prefix}until`) || '', size: 5, placeholder: 'now' });
  return [el('label', null, 'scope', kind), el('label', null, 'service / id', value),
    el('label', null, 'since', since), el('label', null, 'until (ago)', until)];
}

function selectionQuery(kind, value, since, until) {
  if (kind === 'span') return `span=${encodeURIComponent(value)}`;
  if (kind === 'trace') return `trace=${encodeURIComponent(value)}`;
  const q = new URLSearchParams({ since: since || '1h' });
  if (value) q.set('service', value);
  if (until) q.set('until', until);
  return q.toString();
}

async function showFlame(p) {
  const fixed = p.get('trace') ? `trace=${encodeURIComponent(p.get('trace'))}` : p.get('span') ? `span=${encodeURIComponent(p.get('span'))}` : null;
  const selection = fixed || selectionQuery('service', p.get('service') || '', p.get('since'), p.get('until'));
  const type = p.get('type');
  // the profile is asked for at once, while the service list loads
  const pending = api(`/api/flamegraph?${selection}${type ? `&type=${encodeURIComponent(type)}` : ''}&format=json`);
  pending.catch(() => {});
  const services = fixed ? { services: [] } : await api('/api/services').catch(() => ({ services: [] }));
  const box = el('div', { id: 'flame-box' });
  if (fixed) {
    view().replaceChildren(el('h2', null, 'Flame graph ', el('span', { class: 'muted mono' }, fixed)), box);
    await flameView(box, fixed, type, pending);
    return;
  }
  const svc = el('select', { name: 'service' }, el('option', { value: '' }, 'all services'));
  for (const s of services.services) svc.append(el('option', { value: s, selected: p.get('service') === s }, s));
  const form = el('form', { class: 'filters', id: 'flame-form' }, el('label', null, 'service', svc),
    el('label', null, 'since', el('input', { name: 'since', value: p.get('since') || '1h', size: 5 })),
    el('label', null, 'until (ago)', el('input', { name: 'until', value: p.get('until') || '', size: 5, placeholder: 'now' })),
    el('button', { type: 'submit' }, 'Show'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) q.set(k, v);
    setHash('#/flame', q);
  });
  view().replaceChildren(el('h2', null, 'Flame graph'), form, box);
  await flameView(box, selection, type, pending);
}

// Shares of the total per path ("a;b;c") of a tree.
function shares(root) {
  const m = new Map();
  const total = root.value || 1;
  const walk = (n, path) => {
    for (const c of n.children || []) {
      const p = path ? `${path};${c.name}` : c.name;
      m.set(p, (m.get(p) || 0) + c.value / total);
      walk(c, p);
    }
  };
  walk(root, '');
  return m;
}

// Union of two trees, widths from the sum of both shares so that frames of
// either side stay visible.
function mergeTrees(a, b) {
  const sa = shares(a), sb = shares(b);
  const root = { name: 'all', value: 0, children: [] };
  const keys = new Set([...sa.keys(), ...sb.keys()]);
  const byPath = new Map([['', root]]);
  for (const k of [...keys].sort()) {
    const cut = k.lastIndexOf(';');
    const parent = byPath.get(cut < 0 ? '' : k.slice(0, cut));
    if (!parent) continue;
    const node = { name: cut < 0 ? k : k.slice(cut + 1), value: Math.round(((sa.get(k) || 0) + (sb.get(k) || 0)) * 1e6), children: [] };
    parent.children.push(node);
    byPath.set(k, node);
  }
  for (const c of root.children) root.value += c.value;
  const diff = new Map();
  for (const k of keys) diff.set(k, { a: sa.get(k) || 0, b: sb.get(k) || 0 });
  return { root, diff };
}

function parseSel(text) {
  // "span:ID", "trace:ID" or "service:NAME@since..until"
  if (!text) return null;
  const i = text.indexOf(':');
  if (i < 0) return null;
  const kind = text.slice(0, i), rest = text.slice(i + 1);
  if (kind === 'service') {
    const [value, range = '1h'] = rest.split('@');
    const [since, until] = range.split('..');
    return { kind, value, since, until };
  }
  return { kind, value: rest };
}

function selText(s) {
  if (s.kind !== 'service') return `${s.kind}:${s.value}`;
  return `service:${s.value}@${s.since || '1h'}${s.until ? '..' + s.until : ''}`;
}

async function showDiff(p) {
  const a = parseSel(p.get('a')), b = parseSel(p.get('b'));
  const fp = new URLSearchParams();
  for (const [pre, s] of [['a', a], ['b', b]]) {
    if (!s) continue;
    fp.set(`${pre}kind`, s.kind); fp.set(`${pre}value`, s.value);
    if (s.since) fp.set(`${pre}since`, s.since);
    if (s.until) fp.set(`${pre}until`, s.until);
  }
  const form = el('form', { class: 'filters', id: 'diff-form' },
    el('strong', null, 'before'), ...selectionForm('a', fp), el('strong', null, 'after'), ...selectionForm('b', fp),
    el('button', { type: 'submit' }, 'Compare'));
  form.addEventListener('submit', (ev) => {
    ev.preventDefault();
    const f = new FormData(form);
    const sel = (pre) => ({ kind: f.get(`${pre}kind`), value: f.get(`${pre}value`), since: f.get(`${pre}since`), until: f.get(`${pre}until`) });
    setHash('#/diff', new URLSearchParams({ a: selText(sel('a')), b: selText(sel('b')) }));
  });
  const box = el('div', { id: 'diff-box' });
  view().replaceChildren(el('h2', null, 'Diff of two selections'),
    el('div', { class: 'note' }, 'Widths: both selections together. Colour: share of the total after minus before — ',
      el('span', { class: 'legend' }, el('i', { class: 'worse-swatch' }), 'more (red)', el('i', { class: 'better-swatch' }), 'less (green)')),
    form, box);
  const sw = view().querySelectorAll('.legend i');
  if (sw.length === 2) { sw[0].style.background = 'rgb(220, 40, 40)'; sw[1].style.background = 'rgb(30, 160, 60)'; }
  if (!a || !b) { box.replaceChildren(el('div', { class: 'empty' }, 'Choose two selections: spans, traces, or a service over two time ranges.')); return; }
  box.replaceChildren(el('div', { class: 'empty' }, 'loading…'));
  try {
    const type = p.get('type');
    const t = type ? `&type=${encodeURIComponent(type)}` : '';
    const [da, db] = await Promise.all([a, b].map((s) => api(`/api/flamegraph?${selectionQuery(s.kind, s.value, s.since, s.until)}${t}&format=json`)));
    if (!da.flamegraph || !db.flamegraph) {
      box.replaceChildren(el('div', { class: 'empty', id: 'diff-empty' }, `No samples in the ${!da.flamegraph ? 'first' : 'second'} selection.`));
      return;
    }
    const { root, diff } = mergeTrees(da.flamegraph, db.flamegraph);
    const summary = el('div', { id: 'diff-summary' }, `before ${fmtValue(da.total, da.unit)} (${da.type}) · after ${fmtValue(db.total, db.unit)} (${db.type})`);
    const fg = el('div');
    box.replaceChildren(summary, fg);
    flameGraph(fg, { type: 'share', unit: 'share', total: root.value, flamegraph: root }, { diff });
  } catch (e) {
    box.replaceChildren(el('div', { class: 'empty err' }, e.message));
  }
}

// ---- routing ----------------------------------------------------------------

async function route() {
  const hash = location.hash || '#/';
  const path = hash.split('?')[0];
  const p = params(hash);
  for (const a of document.querySelectorAll('nav a')) {
    const n = a.dataset.nav;
    a.classList.toggle('active', (n === 'search' && (path === '#/' || path.startsWith('#/trace'))) || path === `#/${n}`);
  }
  document.body.dataset.ready = '0';
  try {
    if (path.startsWith('#/trace/')) await showTrace(path.slice(8), p);
    else if (path === '#/flame') await showFlame(p);
    else if (path === '#/diff') await showDiff(p);
    else await showSearch(p);
  } finally {
    document.body.dataset.ready = '1';
  }
}

window.addEventListener('hashchange', route);
route();
refreshStatus();
setInterval(refreshStatus, 5000);
