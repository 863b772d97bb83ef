// @ts-check
/** The console's entry: the hash router, and the poll of `/metrics` every
 * 2 s that keeps the charts' history and refreshes the view shown. */

import { api } from './api.js';
import { fill, h } from './dom.js';
import { MetricsHistory } from './metrics.js';
import { connectorView, createView, dlqView, overview, transformsView } from './views.js';

const POLL_MS = 2000;

/** @typedef {{history: MetricsHistory, refresh?: () => Promise<void> | void}} Context */

/** @type {Context} */
const ctx = { history: new MetricsHistory() };
let generation = 0;

const main = /** @type {HTMLElement} */ (document.getElementById('main'));

/** @returns {[string, string[]]} */
function route() {
  const parts = (location.hash.replace(/^#\/?/, '') || '').split('/').map(decodeURIComponent);
  if (parts[0] === 'connectors' && parts[1]) return [parts[2] || 'connector', [parts[1]]];
  if (parts[0] === 'new') return ['new', []];
  return ['overview', []];
}

async function show() {
  const gen = ++generation;
  ctx.refresh = undefined;
  const [name, args] = route();
  const view = { overview, connector: connectorView, edit: createView, new: createView, dlq: dlqView, transforms: transformsView }[name] || overview;
  const mode = name === 'edit' ? 'edit' : 'create';
  try {
    const refresh = await view(main, args[0], ctx, mode);
    if (gen === generation) ctx.refresh = refresh || undefined;
  } catch (e) {
    if (gen === generation) fill(main, h('h1', null, 'Error'), h('p', { class: 'error', role: 'alert' }, String(/** @type {any} */ (e).message || e)));
  }
  for (const a of document.querySelectorAll('nav a')) {
    if (a.getAttribute('href') === location.hash || (location.hash === '' && a.getAttribute('href') === '#/')) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
}

async function poll() {
  try {
    ctx.history.add(await api.metrics());
  } catch {
    // The views show the API's errors; a missed scrape is a gap in a chart.
  }
  const refresh = ctx.refresh;
  if (refresh && document.visibilityState !== 'hidden') {
    try {
      await refresh();
    } catch {
      // The next poll tries again.
    }
  }
  setTimeout(poll, POLL_MS);
}

async function workerInfo() {
  try {
    const root = await api.root();
    fill(/** @type {HTMLElement} */ (document.getElementById('worker-info')), `worker ${root.worker_id} · v${root.version}`);
  } catch {
    // Shown again by the views' own errors.
  }
}

window.addEventListener('hashchange', () => {
  show().then(() => main.focus({ preventScroll: true }));
});
workerInfo();
show();
poll();
