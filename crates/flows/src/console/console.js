// The flow console: live flows with filters, each flow's policy trail, and who talks to whom.
// Every name shown comes from the network, so it only ever becomes text: DOM nodes are built
// with createElement/createTextNode/textContent and setAttribute, never from HTML strings.
'use strict';

const REFRESH_MS = 5000;   // the table is refreshed at least this often (and on stream events)
const LIMIT = 500;         // flows asked for per refresh
const MAX_NODES = 40;      // endpoints drawn in the graph

const form = document.getElementById('filters');
const tbody = document.querySelector('#flows tbody');
const status = document.getElementById('status');
let flows = [];
let selected = null;
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

// --- what a flow says, as text ---------------------------------------------------------

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

function verdictOf(step) {
  if (!step) return null;
  if ((step.kind === 'policy' || step.kind === 'staged-policy') && step.action === 'next-tier') return null;
  return step.action === 'deny' || !['policy', 'staged-policy', 'profile'].includes(step.kind) ? 'deny' : 'allow';
}

function pendingOf(flow) {
  const steps = flow.policies.pending || [];
  return steps.length ? { verdict: verdictOf(steps[steps.length - 1]), step: steps[steps.length - 1] } : null;
}

function sideName(side) {
  return side.key || side.net || '';
}

// A short name: host/workload/endpoint for a wep, host/endpoint for a hep, the net otherwise.
function shortName(side) {
  if (!side.key) return side.net || '';
  const parts = side.key.split('/');
  if (side.kind === 'wep') return `${parts[4]}/${parts[7]}/${parts[9]}`;
  return `${parts[4]}/${parts[6]}`;
}

// The short name with the address the packets used, when the record has it and the name does
// not say it already: h1/ns.web/eth0 (10.65.0.10).
function addressedName(side) {
  const name = shortName(side);
  const bare = name.replace(/\/(32|128)$/, '');
  return side.address && side.address !== bare ? `${name} (${side.address})` : name;
}

function time(seconds) {
  return new Date(seconds * 1000).toLocaleTimeString();
}

// --- the query --------------------------------------------------------------------------

function filterQuery() {
  const params = new URLSearchParams();
  for (const [name, value] of new FormData(form)) {
    if (String(value).trim() !== '') params.append(name, String(value).trim());
  }
  return params;
}

async function getJson(path) {
  const response = await fetch(path, { cache: 'no-store' });
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

async function refresh() {
  const params = filterQuery();
  params.set('limit', String(LIMIT));
  try {
    const [list, stats] = await Promise.all([getJson(`/api/v1/flows?${params}`), getJson('/api/v1/stats')]);
    flows = list.flows;
    renderTable(list);
    renderGraph();
    renderDetail();
    document.getElementById('counters').textContent =
      `window: ${stats.flows} flows · received ${stats.received} · accepted ${stats.accepted} · ` +
      `refused ${stats.refused} · dropped ${stats.dropped} · evicted ${stats.evicted}`;
    status.textContent = `updated ${new Date().toLocaleTimeString()} (every ${REFRESH_MS / 1000} s and on new flows)`;
    status.dataset.refreshed = String(Date.now());
  } catch (error) {
    status.textContent = `cannot load flows: ${error.message}`;
  }
}

async function refreshHints() {
  const params = filterQuery();
  try {
    const hints = await getJson(`/api/v1/hints?${params}`);
    for (const kind of ['endpoints', 'profiles', 'tiers', 'policies', 'reporters']) {
      document.getElementById(`hint-${kind}`).replaceChildren(...hints[kind].map(v => el('option', { value: v })));
    }
  } catch (error) {
    status.textContent = `cannot load filter hints: ${error.message}`;
  }
}

function soon() {
  if (pending) return;
  pending = setTimeout(() => { pending = null; refresh(); }, 300);
}

function follow() {
  if (stream) stream.close();
  stream = new EventSource(`/api/v1/flows/stream?${filterQuery()}`);
  stream.addEventListener('flow', soon);
  stream.addEventListener('lagged', soon);
  stream.onerror = () => { status.textContent = 'live stream interrupted, reconnecting…'; };
}

// --- rendering --------------------------------------------------------------------------

function renderTable(list) {
  const rows = list.flows.map(result => {
    const f = result.flow;
    const enforced = f.policies.enforced;
    const decided = enforced[enforced.length - 1];
    const staged = pendingOf(f);
    const port = f.dst_port === undefined ? '' : `:${f.dst_port}`;
    const stagedCell = !staged ? el('td', {}, '') :
      staged.verdict === f.action ? el('td', {}, `no change (${stepText(staged.step)})`) :
      el('td', { class: 'would' }, `would ${staged.verdict}: ${stepText(staged.step)}`);
    const row = el('tr', { 'data-id': result.id, 'data-action': f.action },
      el('td', {}, time(f.end_time)),
      el('td', {}, f.reporter),
      el('td', { class: 'name', title: sideName(f.source) }, el('span', { class: 'kind' }, f.source.kind), addressedName(f.source)),
      el('td', { class: 'name', title: sideName(f.destination) }, el('span', { class: 'kind' }, f.destination.kind), addressedName(f.destination)),
      el('td', {}, `${f.protocol}${port}`),
      el('td', {}, f.direction),
      el('td', { class: `action ${f.action}` }, f.action),
      el('td', { class: 'decided' }, stepText(decided)),
      stagedCell,
      el('td', {}, `${f.packets_in} / ${f.packets_out}`),
      el('td', {}, `${f.bytes_in} / ${f.bytes_out}`));
    if (result.id === selected) row.classList.add('selected');
    row.addEventListener('click', () => { selected = result.id; renderDetail(); tbody.querySelectorAll('tr').forEach(r => r.classList.toggle('selected', r === row)); });
    return row;
  });
  tbody.replaceChildren(...rows);
  document.getElementById('shown').textContent = list.total > list.flows.length ?
    `(${list.flows.length} of ${list.total})` : `(${list.total})`;
  document.getElementById('empty').hidden = list.total > 0;
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

function renderDetail() {
  const aside = document.getElementById('detail');
  const result = flows.find(r => r.id === selected);
  aside.hidden = !result;
  if (!result) return;
  const f = result.flow;
  document.getElementById('detail-id').textContent = result.id;
  const fields = [];
  const add = (name, value) => fields.push(el('dt', {}, name), el('dd', {}, value));
  for (const [label, side] of [['source', f.source], ['destination', f.destination]]) {
    add(label, `${side.kind} ${sideName(side)}`);
    if (side.address) add(`${label} address`, side.address);
    if (side.profiles && side.profiles.length) add(`${label} profiles`, side.profiles.join(', '));
    const labels = Object.entries(side.labels || {}).map(([k, v]) => `${k}=${v}`);
    if (labels.length) add(`${label} labels`, labels.join(', '));
  }
  add('reporter', `${f.reporter} (${f.direction})`);
  add('interval', `${new Date(f.start_time * 1000).toLocaleString()} – ${time(f.end_time)} (${result.records} ${result.records === 1 ? 'record' : 'records'})`);
  add('connections started', String(f.connections_started));
  document.getElementById('detail-fields').replaceChildren(...fields);
  renderTrail(document.getElementById('trail-enforced'), f.policies.enforced);
  renderTrail(document.getElementById('trail-pending'), f.policies.pending || []);
  document.getElementById('explain').textContent = explainCommand(result);
}

// The command that explains the flow now and compares it with its recorded trail, as it runs
// when pasted: the flow by its id, from this aggregator (the page's own origin). A
// `policy explain` line cannot be given instead: a record names a workload by its key, not
// its address, and `calicoctl flows --explain` prints the `policy explain` it ran.
function explainCommand(result) {
  return `calicoctl flows --explain --id ${result.id} --flows-url ${location.origin}`;
}

function renderGraph() {
  const graph = document.getElementById('graph');
  const names = new Map();
  for (const r of flows) {
    for (const side of [r.flow.source, r.flow.destination]) {
      const name = sideName(side);
      if (!names.has(name) && names.size < MAX_NODES) names.set(name, { name, label: shortName(side) });
    }
  }
  const nodes = [...names.values()];
  const cx = 320, cy = 210, radius = nodes.length > 1 ? 170 : 0;
  nodes.forEach((n, i) => {
    const angle = (2 * Math.PI * i) / Math.max(nodes.length, 1) - Math.PI / 2;
    n.x = cx + radius * Math.cos(angle);
    n.y = cy + radius * Math.sin(angle);
  });
  const edges = new Map();
  for (const r of flows) {
    const from = names.get(sideName(r.flow.source)), to = names.get(sideName(r.flow.destination));
    if (!from || !to) continue;
    const staged = pendingOf(r.flow);
    const key = `${from.name}\u0000${to.name}\u0000${r.flow.action}`;
    const edge = edges.get(key) || { from, to, action: r.flow.action, staged: false, titles: [] };
    edge.staged = edge.staged || (staged !== null && staged.verdict !== r.flow.action);
    edge.titles.push(`${r.flow.action}: ${stepText(r.flow.policies.enforced[r.flow.policies.enforced.length - 1])}`);
    edges.set(key, edge);
  }
  const children = [];
  const defs = svg('defs');
  for (const action of ['allow', 'deny']) {
    const marker = svg('marker', { id: `arrow-${action}`, viewBox: '0 0 10 10', refX: 18, refY: 5, markerWidth: 6, markerHeight: 6, orient: 'auto-start-reverse' });
    marker.append(svg('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: action === 'allow' ? '#1a7f37' : '#cf222e' }));
    defs.append(marker);
  }
  children.push(defs);
  for (const e of edges.values()) {
    // Allowed and denied edges between the same pair bend to opposite sides.
    const bend = e.action === 'allow' ? 20 : -20;
    const mx = (e.from.x + e.to.x) / 2 - (e.to.y - e.from.y) * bend / 200;
    const my = (e.from.y + e.to.y) / 2 + (e.to.x - e.from.x) * bend / 200;
    const path = svg('path', {
      class: `edge ${e.action}${e.staged ? ' staged' : ''}`,
      d: `M ${e.from.x} ${e.from.y} Q ${mx} ${my} ${e.to.x} ${e.to.y}`,
      'marker-end': `url(#arrow-${e.action})`,
      'data-action': e.action,
    });
    const title = svg('title');
    title.textContent = `${e.from.name} → ${e.to.name}\n${e.titles.slice(0, 5).join('\n')}`;
    path.append(title);
    children.push(path);
  }
  for (const n of nodes) {
    const group = svg('g', { class: 'node' });
    const title = svg('title');
    title.textContent = n.name;
    const label = svg('text', { x: n.x, y: n.y - 12, 'text-anchor': 'middle' });
    label.textContent = n.label;
    group.append(title, svg('circle', { cx: n.x, cy: n.y, r: 7 }), label);
    children.push(group);
  }
  graph.replaceChildren(...children);
}

// --- wiring -----------------------------------------------------------------------------

function filtersChanged() {
  refresh();
  refreshHints();
  follow();
}

let typing = null;
form.addEventListener('input', () => { clearTimeout(typing); typing = setTimeout(filtersChanged, 250); });
form.addEventListener('change', filtersChanged);
form.addEventListener('reset', () => setTimeout(filtersChanged, 0));
form.addEventListener('submit', event => { event.preventDefault(); filtersChanged(); });
document.getElementById('detail-close').addEventListener('click', () => { selected = null; renderDetail(); });
setInterval(refresh, REFRESH_MS);
setInterval(refreshHints, 6 * REFRESH_MS);
filtersChanged();
