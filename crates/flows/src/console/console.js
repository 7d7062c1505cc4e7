// The flow console: live flows with filters, the staged diff, each flow's policy trail, who
// talks to whom, and the view exported as JSON or CSV. Every name shown comes from the network,
// so it only ever becomes text: DOM nodes are built with createElement/createTextNode/
// textContent and setAttribute, never from HTML strings. Cells are spelled as `calicoctl flows`
// prints them (crates/ctl/src/commands/flows/render.rs): times in UTC RFC 3339, `tcp/5432`,
// `h1/ns.web/eth0 (10.65.0.10)`, steps as `policy explain` says them.
'use strict';

const REFRESH_MS = 5000;   // the view is refreshed at least this often (and on stream events)
const LIMIT = 500;         // flows asked for per refresh
const MAX_ROWS = 24;       // endpoints drawn per column of the graph
const LABEL_GAP = 10;      // px between a node and its label
const ROW_PX = 18;         // px between two nodes of a column: more than a label is high

const form = document.getElementById('filters');
const tbody = document.querySelector('#flows tbody');
const status = document.getElementById('status');
const liveButton = document.getElementById('live');
const state = {
  flows: [],        // the last answer's flows, newest first
  total: 0,         // how many matched before the limit
  query: '',        // the filter of the last answer, as a query string
  view: 'all',      // 'all' or 'staged'
  selected: null,   // the id of the flow in the side panel
  paused: null,     // when the live view was paused (unix seconds), or null
  missed: 0,        // records streamed while paused
};
let stream = null;
let pending = null;

// --- small DOM helpers -------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, value);
  for (const child of children) node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return node;
}

function svg(tag, attrs) {
  const node = document.createElementNS('http://www.w3.org/2000/svg', tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  return node;
}

// --- what a flow says, as text (as calicoctl flows says it) -------------------------------

// Unix seconds as RFC 3339 in UTC, to the second: 2026-01-01T00:00:15Z.
function utc(seconds) {
  return new Date(seconds * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

// One step of a trail, as `calicoctl policy explain` says it (rules numbered from 1).
function stepText(s) {
  const rule = s.rule_index === undefined ? '' : ` rule ${s.rule_index + 1}`;
  switch (s.kind) {
    case 'policy': return `tier ${s.tier} policy ${s.name}${rule}: ${s.action}`;
    case 'staged-policy': return `tier ${s.tier} staged policy ${s.name}${rule}: ${s.action}`;
    case 'end-of-tier': return `end of tier ${s.tier}${s.name ? ` (policy ${s.name} applied)` : ''}: deny`;
    case 'profile': return `profile ${s.name}${rule}: ${s.action}`;
    case 'missing-profile': return `missing profile ${s.name}: deny`;
    case 'no-profile-matched': return 'no profile rule matched: deny';
    default: return `${s.kind}: ${s.action}`;
  }
}

// The hops of a step: tier → policy → rule → action.
function stepHops(s) {
  const hops = [];
  if (s.tier) hops.push(`tier ${s.tier}`);
  if (s.kind === 'staged-policy') hops.push(`staged policy ${s.name}`);
  else if (s.kind === 'policy') hops.push(`policy ${s.name}`);
  else if (s.kind === 'profile') hops.push(`profile ${s.name}`);
  else if (s.kind === 'missing-profile') hops.push(`missing profile ${s.name}`);
  else if (s.kind === 'end-of-tier') hops.push(s.name ? `end of tier (policy ${s.name} applied)` : 'end of tier');
  else hops.push('no profile rule matched');
  if (s.rule_index !== undefined) hops.push(`rule ${s.rule_index + 1}`);
  hops.push(s.action);
  return hops;
}

// The verdict a step gave, or null when it passed on (next-tier in a policy).
function verdictOf(step) {
  if (!step) return null;
  if ((step.kind === 'policy' || step.kind === 'staged-policy') && step.action === 'next-tier') return null;
  return step.action === 'deny' || !['policy', 'staged-policy', 'profile'].includes(step.kind) ? 'deny' : 'allow';
}

function pendingStep(flow) {
  const steps = flow.policies.pending || [];
  return steps[steps.length - 1];
}

// The verdict with staged policies enforced, when it differs from today's: 'deny' (allowed
// today, a staged policy would deny) or 'allow' (the reverse); null when nothing changes.
function stagedChange(flow) {
  const verdict = verdictOf(pendingStep(flow));
  return verdict && verdict !== flow.action ? verdict : null;
}

// `would deny: tier default staged policy lockdown rule 1: deny`, or empty (the CLI's STAGED).
function stagedText(flow) {
  const step = pendingStep(flow);
  const verdict = verdictOf(step);
  return verdict ? `would ${verdict}: ${stepText(step)}` : '';
}

function sideName(side) {
  return side.key || side.net || '';
}

// host/workload/endpoint for a wep, host/endpoint for a hep, the address of a /32 or /128 net,
// the net otherwise.
function shortName(side) {
  if (!side.key) return (side.net || '').replace(/\/(32|128)$/, '');
  const parts = side.key.split('/');
  if (side.kind === 'wep') return `${parts[4]}/${parts[7]}/${parts[9]}`;
  return `${parts[4]}/${parts[6]}`;
}

// The short name with the address the packets used, when the record has it and the name does
// not say it already: h1/ns.web/eth0 (10.65.0.10).
function addressedName(side) {
  const name = shortName(side);
  return side.address && side.address !== name ? `${name} (${side.address})` : name;
}

// tcp/5432, or the protocol alone for one without ports.
function protoPort(f) {
  return f.dst_port === undefined ? f.protocol : `${f.protocol}/${f.dst_port}`;
}

function decidedText(f) {
  const enforced = f.policies.enforced;
  return enforced.length ? stepText(enforced[enforced.length - 1]) : '';
}

// The cells of a row, in the table's column order: what the table shows and CSV exports.
function cells(f) {
  return [
    { text: utc(f.end_time), class: 'time' },
    { text: f.reporter },
    { text: addressedName(f.source), class: 'side', kind: f.source.kind, title: sideName(f.source) },
    { text: addressedName(f.destination), class: 'side', kind: f.destination.kind, title: sideName(f.destination) },
    { text: protoPort(f) },
    { text: f.direction },
    { text: f.action, class: `action ${f.action}` },
    { text: decidedText(f), class: 'decided' },
    { text: stagedText(f), class: stagedChange(f) ? 'staged would' : 'staged' },
    { text: `${f.packets_in} / ${f.packets_out}` },
    { text: `${f.bytes_in} / ${f.bytes_out}` },
  ];
}

// --- the query --------------------------------------------------------------------------

// A time as the CLI takes it: RFC 3339 (2026-01-01T00:00:00Z, or with an offset); without a
// zone it is read as UTC, as the field's label says.
function parseTime(text, field) {
  const match = /^(\d{4}-\d{2}-\d{2})[T ](\d{2}:\d{2}(:\d{2})?)(Z|[+-]\d{2}:\d{2})?$/i.exec(text);
  const millis = match ? Date.parse(`${match[1]}T${match[2]}${match[3] ? '' : ':00'}${match[4] || 'Z'}`) : NaN;
  if (Number.isNaN(millis)) throw new Error(`${field} ${JSON.stringify(text)}: expected an RFC 3339 time such as 2026-01-01T00:00:00Z`);
  return Math.floor(millis / 1000);
}

// The filter as the API's query: the form's fields, and the time range as start_gte/start_lt.
function filterQuery() {
  const params = new URLSearchParams();
  for (const field of form.elements) {
    const value = String(field.value || '').trim();
    if (field.name && !field.hasAttribute('data-local') && value !== '') params.append(field.name, value);
  }
  const range = form.elements.range.value;
  if (range === 'between') {
    const from = form.elements.from.value.trim(), until = form.elements.until.value.trim();
    if (from) params.set('start_gte', String(parseTime(from, 'From')));
    if (until) params.set('start_lt', String(parseTime(until, 'Until')));
  } else if (range) {
    params.set('start_gte', `-${range}`);
  }
  return params;
}

// The query, or null after saying what is wrong with the filters.
function checkedQuery() {
  const error = document.getElementById('filter-error');
  for (const name of ['from', 'until']) form.elements[name].removeAttribute('aria-invalid');
  try {
    const params = filterQuery();
    error.textContent = '';
    return params;
  } catch (e) {
    error.textContent = e.message;
    const field = e.message.startsWith('From') ? 'from' : 'until';
    form.elements[field].setAttribute('aria-invalid', 'true');
    return null;
  }
}

async function getJson(path) {
  const response = await fetch(path, { cache: 'no-store' });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function refresh() {
  const params = checkedQuery();
  if (!params) return;
  const query = params.toString();
  params.set('limit', String(LIMIT));
  try {
    const [list, stats] = await Promise.all([getJson(`/api/v1/flows?${params}`), getJson('/api/v1/stats')]);
    Object.assign(state, { flows: list.flows, total: list.total, query });
    document.getElementById('api-link').href = `/api/v1/flows?${params}`;
    render();
    document.getElementById('counters').textContent =
      `window: ${stats.flows} flows · received ${stats.received} · accepted ${stats.accepted} · ` +
      `refused ${stats.refused} · dropped ${stats.dropped} · evicted ${stats.evicted}`;
    if (!state.paused) status.textContent = `updated ${utc(Date.now() / 1000)}`;
    status.dataset.refreshed = String(Date.now());
  } catch (error) {
    status.textContent = `cannot load flows: ${error.message}`;
  }
}

async function refreshHints() {
  const params = checkedQuery();
  if (!params) return;
  try {
    const hints = await getJson(`/api/v1/hints?${params}`);
    for (const kind of ['endpoints', 'profiles', 'tiers', 'policies', 'reporters']) {
      document.getElementById(`hint-${kind}`).replaceChildren(...hints[kind].map(v => el('option', { value: v })));
    }
  } catch (error) {
    status.textContent = `cannot load filter hints: ${error.message}`;
  }
}

// A refresh soon after a streamed record (one per burst), unless the view is paused.
function onRecord() {
  if (state.paused) {
    state.missed += 1;
    renderLive();
    return;
  }
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 300);
}

function follow() {
  if (stream) stream.close();
  const params = checkedQuery();
  if (!params) return;
  stream = new EventSource(`/api/v1/flows/stream?${params}`);
  stream.addEventListener('flow', onRecord);
  stream.addEventListener('lagged', onRecord);
  stream.onerror = () => { status.textContent = 'live stream interrupted, reconnecting…'; };
}

// --- pause and resume -------------------------------------------------------------------

function renderLive() {
  const paused = state.paused !== null;
  liveButton.setAttribute('aria-pressed', String(paused));
  liveButton.textContent = paused ? `Resume (${state.missed} new)` : 'Pause';
  if (paused) status.textContent = `paused at ${utc(state.paused)}: new records wait until resumed`;
}

function toggleLive() {
  if (state.paused === null) {
    Object.assign(state, { paused: Date.now() / 1000, missed: 0 });
    renderLive();
  } else {
    Object.assign(state, { paused: null, missed: 0 });
    renderLive();
    refresh();
  }
}

// --- the view ---------------------------------------------------------------------------

// The flows of the current view, in its order, each with the group it is shown under.
function viewRows() {
  if (state.view === 'all') return state.flows.map(result => ({ result, group: null }));
  const rows = [];
  for (const change of ['deny', 'allow']) {
    for (const result of state.flows) {
      if (stagedChange(result.flow) === change) rows.push({ result, group: change });
    }
  }
  return rows;
}

const GROUPS = {
  deny: 'Allowed today, a staged policy would deny',
  allow: 'Denied today, a staged policy would allow',
};

function render() {
  const rows = viewRows();
  renderTable(rows);
  renderGraph(rows.map(r => r.result));
  renderDetail();
  renderCounts(rows);
}

function renderCounts(rows) {
  const staged = state.flows.filter(r => stagedChange(r.flow)).length;
  const limited = state.total > state.flows.length;
  document.getElementById('shown').textContent = limited ? `(${state.flows.length} of ${state.total})` : `(${state.total})`;
  document.getElementById('staged-count').textContent = `(${staged})`;
  const note = state.view === 'staged'
    ? `flows whose verdict a staged policy would change${limited ? `, among the newest ${state.flows.length}` : ''}`
    : (limited ? `the newest ${state.flows.length} of ${state.total}` : '');
  document.getElementById('view-note').textContent = note;
  const empty = document.getElementById('empty');
  empty.hidden = rows.length > 0;
  empty.textContent = state.view === 'staged' ? 'No staged policy changes the verdict of a flow shown.' : 'No flows match.';
}

function renderCell(cell) {
  const attrs = {};
  if (cell.class) attrs.class = cell.class;
  if (cell.kind) attrs['data-kind'] = cell.kind;
  if (cell.title) attrs.title = cell.title;
  const td = el('td', attrs);
  if (cell.class === 'time') {
    // The date and the time may wrap apart; <wbr> adds no text, so the cell reads as the CLI's.
    const at = cell.text.indexOf('T');
    td.append(cell.text.slice(0, at), el('wbr'), cell.text.slice(at));
  } else {
    td.textContent = cell.text;
  }
  return td;
}

function renderTable(rows) {
  const out = [];
  let group = null;
  for (const { result, group: g } of rows) {
    if (g && g !== group) {
      const count = rows.filter(r => r.group === g).length;
      out.push(el('tr', { class: 'group', 'data-group': g }, el('th', { colspan: '11' }, `${GROUPS[g]} (${count})`)));
      group = g;
    }
    const row = el('tr', { 'data-id': result.id, 'data-action': result.flow.action }, ...cells(result.flow).map(renderCell));
    if (result.id === state.selected) row.classList.add('selected');
    row.addEventListener('click', () => select(result.id));
    out.push(row);
  }
  tbody.replaceChildren(...out);
}

function select(id) {
  state.selected = id;
  renderDetail();
  tbody.querySelectorAll('tr[data-id]').forEach(r => r.classList.toggle('selected', r.dataset.id === id));
}

function renderTrail(list, steps) {
  list.replaceChildren(...steps.map(s => {
    const item = el('li', {});
    stepHops(s).forEach((hop, i) => {
      if (i > 0) item.append(el('span', { class: 'arrow' }, '→'));
      item.append(el('span', { class: 'hop' }, hop));
    });
    return item;
  }));
  if (!steps.length) list.replaceChildren(el('li', { class: 'none' }, 'no staged policy changes this flow'));
}

function detailFields(result) {
  const f = result.flow;
  const fields = [];
  const add = (name, value) => fields.push(el('dt', {}, name), el('dd', {}, value));
  for (const [label, side] of [['source', f.source], ['destination', f.destination]]) {
    add(label, `${side.kind} ${sideName(side)}`);
    if (side.address) add(`${label} address`, side.address);
    if (side.profiles && side.profiles.length) add(`${label} profiles`, side.profiles.join(', '));
    const labels = Object.entries(side.labels || {}).map(([k, v]) => `${k}=${v}`);
    if (labels.length) add(`${label} labels`, labels.join(', '));
  }
  add('proto/port', protoPort(f));
  add('reporter', `${f.reporter} (${f.direction})`);
  add('action', f.action);
  const staged = stagedText(f);
  if (staged) add('staged', staged);
  add('first seen', utc(f.start_time));
  add('last seen', `${utc(f.end_time)} (${result.records} ${result.records === 1 ? 'record' : 'records'})`);
  add('packets in/out', `${f.packets_in} / ${f.packets_out}`);
  add('bytes in/out', `${f.bytes_in} / ${f.bytes_out}`);
  add('connections started', String(f.connections_started));
  return fields;
}

function renderDetail() {
  const result = state.flows.find(r => r.id === state.selected);
  document.getElementById('detail').hidden = !result;
  document.getElementById('detail-none').hidden = Boolean(result);
  if (!result) return;
  document.getElementById('detail-id').textContent = result.id;
  document.getElementById('detail-fields').replaceChildren(...detailFields(result));
  renderTrail(document.getElementById('trail-enforced'), result.flow.policies.enforced);
  renderTrail(document.getElementById('trail-pending'), result.flow.policies.pending || []);
  document.getElementById('explain').textContent = explainCommand(result);
}

// The command that explains the flow now and compares it with its recorded trail, as it runs
// when pasted: the flow by its id, from this aggregator (the page's own origin). A
// `policy explain` line cannot be given instead: a record names a workload by its key, not
// its address, and `calicoctl flows --explain` prints the `policy explain` it ran.
function explainCommand(result) {
  return `calicoctl flows --explain --id ${result.id} --flows-url ${location.origin}`;
}

// --- who talks to whom ------------------------------------------------------------------
//
// Sources in a column on the left, destinations in a column on the right, each flow a curve
// between them. Curves stay between the two columns and labels stay outside them (left labels
// end left of their node, right labels start right of theirs), so no label can touch an edge;
// nodes of a column are ROW_PX apart, more than a label is high, so labels never touch each
// other; a label too long for its side is shortened (its full name in the node's title).

function column(results, pick, limit) {
  const nodes = new Map();
  for (const r of results) {
    const side = pick(r.flow);
    const name = sideName(side);
    if (!nodes.has(name) && nodes.size < limit) nodes.set(name, { name, label: addressedName(side) });
  }
  return nodes;
}

const EDGE_KINDS = {
  'allow': 'allowed',
  'deny': 'denied',
  'allow staged': 'allowed, a staged policy would deny',
  'deny staged': 'denied, a staged policy would allow',
};

function graphEdges(results, sources, destinations) {
  const edges = new Map();
  for (const r of results) {
    const from = sources.get(sideName(r.flow.source)), to = destinations.get(sideName(r.flow.destination));
    if (!from || !to) continue;
    const kind = `${r.flow.action}${stagedChange(r.flow) ? ' staged' : ''}`;
    const key = `${from.name}\u0000${to.name}\u0000${kind}`;
    const edge = edges.get(key) || { from, to, kind, titles: [] };
    edge.titles.push(`${protoPort(r.flow)} ${r.flow.action}: ${decidedText(r.flow)}`);
    edges.set(key, edge);
  }
  return [...edges.values()];
}

function place(nodes, x, top, step) {
  [...nodes.values()].forEach((n, i) => { n.x = x; n.y = top + i * step; });
}

// Shortens a label until it fits `room` px (measured as drawn), ending it with an ellipsis.
function fit(text, room) {
  let label = text.textContent;
  while (label.length > 4 && text.getComputedTextLength() > room) {
    label = label.slice(0, -2);
    text.textContent = `${label}…`;
  }
}

function nodeGroup(n, side, room) {
  const group = svg('g', { class: 'node', 'data-side': side });
  const title = svg('title');
  title.textContent = n.name;
  const dx = side === 'source' ? -LABEL_GAP : LABEL_GAP;
  const label = svg('text', { x: n.x + dx, y: n.y + 4, 'text-anchor': side === 'source' ? 'end' : 'start' });
  label.textContent = n.label;
  group.append(title, svg('circle', { cx: n.x, cy: n.y, r: 5 }), label);
  return { group, label, room };
}

function edgePath(e, offset) {
  const x1 = e.from.x + 6, x2 = e.to.x - 6, y1 = e.from.y + offset, y2 = e.to.y + offset;
  const mx = (x1 + x2) / 2;
  const path = svg('path', {
    class: `edge ${e.kind}`,
    d: `M ${x1} ${y1} C ${mx} ${y1} ${mx} ${y2} ${x2} ${y2}`,
    'marker-end': `url(#arrow-${e.kind.split(' ')[0]})`,
    'data-kind': e.kind,
  });
  const title = svg('title');
  title.textContent = `${e.from.label} → ${e.to.label}\n${e.titles.slice(0, 5).join('\n')}`;
  path.append(title);
  return path;
}

function arrowDefs() {
  const defs = svg('defs');
  for (const [action, color] of [['allow', '#1a7f37'], ['deny', '#cf222e']]) {
    const marker = svg('marker', { id: `arrow-${action}`, viewBox: '0 0 10 10', refX: 10, refY: 5, markerWidth: 4, markerHeight: 4, orient: 'auto' });
    marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: color }));
    defs.append(marker);
  }
  return defs;
}

function renderGraph(results) {
  const graph = document.getElementById('graph');
  const width = graph.clientWidth || 400, height = graph.clientHeight || 300;
  const limit = Math.max(1, Math.min(MAX_ROWS, Math.floor((height - 16) / ROW_PX)));
  const sources = column(results, f => f.source, limit), destinations = column(results, f => f.destination, limit);
  const left = Math.round(width * 0.38), right = Math.round(width * 0.62);
  const rows = Math.max(sources.size, destinations.size, 1);
  const step = Math.min(2 * ROW_PX, (height - 16) / rows);
  place(sources, left, 8 + step / 2, step);
  place(destinations, right, 8 + step / 2, step);
  const edges = graphEdges(results, sources, destinations);
  graph.setAttribute('viewBox', `0 0 ${width} ${height}`);
  // Edges of one pair (allowed and denied, or staged) side by side, a few px apart.
  const seen = new Map();
  const paths = edges.map(e => {
    const pair = `${e.from.name}\u0000${e.to.name}`;
    const index = seen.get(pair) || 0;
    seen.set(pair, index + 1);
    return edgePath(e, (index % 2 ? 1 : -1) * Math.ceil(index / 2) * 3);
  });
  const nodes = [
    ...[...sources.values()].map(n => nodeGroup(n, 'source', left - LABEL_GAP - 4)),
    ...[...destinations.values()].map(n => nodeGroup(n, 'destination', width - right - LABEL_GAP - 4)),
  ];
  graph.replaceChildren(arrowDefs(), ...paths, ...nodes.map(n => n.group));
  nodes.forEach(n => fit(n.label, n.room));
  const left_out = new Set(results.map(r => sideName(r.flow.source))).size - sources.size;
  const right_out = new Set(results.map(r => sideName(r.flow.destination))).size - destinations.size;
  document.getElementById('graph-note').textContent = left_out + right_out > 0
    ? `(${left_out} sources and ${right_out} destinations not drawn)` : '';
  renderLegend(new Set(edges.map(e => e.kind)));
}

// The legend names exactly the kinds of edge drawn, each with a sample drawn like them.
function renderLegend(kinds) {
  const items = Object.keys(EDGE_KINDS).filter(kind => kinds.has(kind)).map(kind => {
    const sample = svg('svg', { viewBox: '0 0 30 10', 'aria-hidden': 'true' });
    sample.append(svg('path', { class: `edge ${kind}`, d: 'M 0 5 L 30 5' }));
    return el('li', { 'data-kind': kind }, sample, EDGE_KINDS[kind]);
  });
  if (!items.length) items.push(el('li', { class: 'none' }, 'no flows to draw'));
  document.getElementById('legend').replaceChildren(...items);
}

// --- export -----------------------------------------------------------------------------

// One CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break. No cell
// can start a spreadsheet formula: each starts with a time, a hostname, an address, a digit,
// a protocol, or one of the words the console writes.
function csvField(text) {
  return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
}

function exportCsv(rows) {
  const header = [...document.querySelectorAll('#flows thead th')].map(th => th.textContent);
  const lines = [header, ...rows.map(r => cells(r.result.flow).map(c => c.text))];
  return lines.map(line => line.map(csvField).join(',')).join('\r\n') + '\r\n';
}

function exportJson(rows) {
  return JSON.stringify({
    exported_at: utc(Date.now() / 1000),
    view: state.view,
    query: state.query,
    total: state.total,
    flows: rows.map(r => r.result),
  }, null, 2) + '\n';
}

function download(kind) {
  const rows = viewRows();
  const [text, type] = kind === 'csv' ? [exportCsv(rows), 'text/csv'] : [exportJson(rows), 'application/json'];
  const url = URL.createObjectURL(new Blob([text], { type }));
  const stamp = utc(Date.now() / 1000).replace(/[-:]/g, '');
  const link = el('a', { href: url, download: `flows-${state.view}-${stamp}.${kind}` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// --- wiring -----------------------------------------------------------------------------

function filtersChanged() {
  const between = form.elements.range.value === 'between';
  form.querySelectorAll('label.between').forEach(l => { l.hidden = !between; });
  refresh();
  refreshHints();
  follow();
}

function showView(view) {
  state.view = view;
  document.querySelectorAll('#views button').forEach(b => b.setAttribute('aria-selected', String(b.dataset.view === view)));
  render();
}

// "between…" starts as the last hour, written out, to edit from.
function rangeChosen() {
  if (form.elements.range.value !== 'between' || form.elements.from.value || form.elements.until.value) return;
  const now = Math.ceil(Date.now() / 1000);
  form.elements.from.value = utc(now - 3600);
  form.elements.until.value = utc(now + 60);
}

let typing = null;
form.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(filtersChanged, 250); });
form.addEventListener('change', event => { if (event.target.name === 'range') rangeChosen(); filtersChanged(); });
form.addEventListener('reset', () => setTimeout(filtersChanged, 0));
form.addEventListener('submit', event => { event.preventDefault(); filtersChanged(); });
document.getElementById('detail-close').addEventListener('click', () => select(null));
document.querySelectorAll('#views button').forEach(b => b.addEventListener('click', () => showView(b.dataset.view)));
document.getElementById('export-json').addEventListener('click', () => download('json'));
document.getElementById('export-csv').addEventListener('click', () => download('csv'));
liveButton.addEventListener('click', toggleLive);
window.addEventListener('resize', () => renderGraph(viewRows().map(r => r.result)));
// Each tick is counted (status's data-ticks), paused or not: a test can tell one has passed.
let ticks = 0;
setInterval(() => {
  status.dataset.ticks = String(++ticks);
  if (!state.paused) refresh();
}, REFRESH_MS);
setInterval(refreshHints, 6 * REFRESH_MS);
filtersChanged();
