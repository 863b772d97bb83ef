// @ts-check
/** The console's views: overview, connector, create/edit, dead letters,
 * transforms. Each renders into `main` and returns what the 2 s poll calls
 * to refresh it (or nothing). */

import { ApiError, api, enc } from './api.js';
import { lineChart } from './chart.js';
import { badge, confirmAction, fill, h, num, secs, toast } from './dom.js';

/** @typedef {import('./metrics.js').MetricsHistory} MetricsHistory */
/** @typedef {{history: MetricsHistory}} Context */

/** @param {unknown} e */
const message = (e) => (e instanceof ApiError ? `${e.message} (HTTP ${e.status})` : String(/** @type {any} */ (e)?.message || e));

/** @param {string} name @param {string} [sub] */
const link = (name, sub) => `#/connectors/${enc(name)}${sub ? `/${sub}` : ''}`;

/** A table that scrolls sideways on a narrow screen, keyboard-reachable. @param {string} label @param {HTMLElement} table */
const scroller = (label, table) => h('div', { class: 'scroll', tabindex: 0, role: 'region', 'aria-label': label }, table);

/** Task counts of a status: "2/3 running, 1 failed". @param {any} status */
function taskSummary(status) {
  const tasks = status?.tasks || [];
  const running = tasks.filter((/** @type {any} */ t) => t.state === 'RUNNING').length;
  const failed = tasks.filter((/** @type {any} */ t) => t.state === 'FAILED').length;
  return h('span', null, `${running}/${tasks.length} running`, failed ? h('span', { class: 'failed-count' }, `, ${failed} failed`) : null);
}

/** @param {string} text @param {any} [props] */
const th = (text, props) => h('th', { scope: 'col', ...props }, text);

// ---------------------------------------------------------------- overview

/** @param {HTMLElement} main @param {string} _ @param {Context} ctx */
export async function overview(main, _, ctx) {
  const body = h('tbody');
  const workers = h('ul', { class: 'workers' });
  const error = h('p', { class: 'error', role: 'alert' });
  const count = h('p', { class: 'muted' });
  const table = h('table', { class: 'connectors' },
    h('caption', { class: 'visually-hidden' }, 'Connectors, refreshed every 2 seconds'),
    h('thead', null, h('tr', null, th('Name'), th('Type'), th('State'), th('Tasks'), th('In /s', { class: 'n' }), th('Out /s', { class: 'n' }),
      th('Lag', { class: 'n' }), th('Dead letters', { class: 'n' }), th('Latency p50 / p99', { class: 'n' }))),
    body);
  fill(main,
    h('div', { class: 'title' }, h('h1', null, 'Connectors'), h('a', { class: 'button primary', href: '#/new' }, 'New connector')),
    error, count, scroller('Connectors', table),
    h('h2', null, 'Workers'), workers);

  async function refresh() {
    let all;
    try {
      all = await api.connectors();
      fill(error);
    } catch (e) {
      fill(error, `Cannot list the connectors: ${message(e)}`);
      return;
    }
    const names = Object.keys(all).sort();
    fill(count, names.length === 1 ? '1 connector' : `${names.length} connectors`);
    /** @type {Map<string, number>} */
    const byWorker = new Map();
    const rows = names.map((name) => {
      const { status, info } = all[name];
      for (const w of [status?.connector?.worker_id, ...(status?.tasks || []).map((/** @type {any} */ t) => t.worker_id)]) {
        if (w) byWorker.set(w, (byWorker.get(w) || 0) + 1);
      }
      const s = ctx.history.stats(name);
      return h('tr', { dataset: { connector: name } },
        h('th', { scope: 'row' }, h('a', { href: link(name) }, name)),
        h('td', null, info?.type || status?.type || ''),
        h('td', null, badge(status?.connector?.state)),
        h('td', null, taskSummary(status)),
        h('td', { class: 'n' }, num(s.inRate)),
        h('td', { class: 'n' }, num(s.outRate)),
        h('td', { class: 'n' }, num(s.lag)),
        h('td', { class: 'n' }, s.dlq ? h('a', { href: link(name, 'dlq') }, num(s.dlq)) : num(s.dlq)),
        h('td', { class: 'n' }, `${secs(s.p50)} / ${secs(s.p99)}`));
    });
    fill(body, rows.length ? rows : h('tr', null, h('td', { colspan: 9 }, 'No connectors yet. ', h('a', { href: '#/new' }, 'Create one'), '.')));
    const root = await api.root().catch(() => null);
    if (root?.worker_id && !byWorker.has(root.worker_id)) byWorker.set(root.worker_id, 0);
    fill(workers, [...byWorker.entries()].sort().map(([w, n]) =>
      h('li', null, h('strong', null, w), root?.worker_id === w ? ' (this worker)' : '', ` · ${n} connector and task assignment${n === 1 ? '' : 's'}`)));
  }
  await refresh();
  return refresh;
}

// --------------------------------------------------------------- connector

/** @param {HTMLElement} main @param {string} name @param {Context} ctx */
export async function connectorView(main, name, ctx) {
  const info = await api.info(name);
  const state = h('span');
  const error = h('p', { class: 'error', role: 'alert' });
  const stats = h('dl', { class: 'stats' });
  const charts = h('div', { class: 'charts' });
  const tasks = h('tbody');
  const config = h('tbody');
  const topics = h('p');
  const offsets = h('pre', { class: 'json', tabindex: 0 });

  /** @param {string} title @param {string} text @param {() => Promise<any>} act @param {string} done @param {{confirm?: string, extra?: Node}} [opts] */
  const action = async (title, text, act, done, opts) => {
    if (!(await confirmAction(title, text, opts))) return;
    try {
      await act();
      toast(done);
      await refresh();
    } catch (e) {
      fill(error, message(e));
    }
  };
  const restartOptions = () => {
    const includeTasks = h('input', { type: 'checkbox', id: 'restart-include-tasks' });
    const onlyFailed = h('input', { type: 'checkbox', id: 'restart-only-failed' });
    return {
      includeTasks, onlyFailed,
      node: h('fieldset', null, h('legend', null, 'Options'),
        h('label', null, includeTasks, ' Include tasks (includeTasks)'),
        h('label', null, onlyFailed, ' Only failed ones (onlyFailed)')),
    };
  };
  const buttons = h('div', { class: 'toolbar', role: 'group', 'aria-label': 'Actions' },
    h('button', { type: 'button', onclick: () => action('Pause connector', `Pause ${name}? Its tasks stop moving records until it is resumed.`, () => api.pause(name), `${name} paused`, { confirm: 'Pause' }) }, 'Pause'),
    h('button', { type: 'button', onclick: () => action('Resume connector', `Resume ${name}?`, () => api.resume(name), `${name} resumed`, { confirm: 'Resume' }) }, 'Resume'),
    h('button', { type: 'button', onclick: () => action('Stop connector', `Stop ${name}? Its tasks are shut down (their offsets can then be changed) until it is resumed.`, () => api.stop(name), `${name} stopped`, { confirm: 'Stop' }) }, 'Stop'),
    h('button', {
      type: 'button', onclick: () => {
        const o = restartOptions();
        return action('Restart connector', `Restart ${name}?`, () => api.restart(name, /** @type {HTMLInputElement} */ (o.includeTasks).checked, /** @type {HTMLInputElement} */ (o.onlyFailed).checked), `${name} restarting`, { confirm: 'Restart', extra: o.node });
      },
    }, 'Restart…'),
    h('a', { class: 'button', href: link(name, 'edit') }, 'Edit'),
    h('a', { class: 'button', href: link(name, 'dlq') }, 'Dead letters'),
    h('a', { class: 'button', href: link(name, 'transforms') }, 'Try transforms'),
    h('button', {
      type: 'button', class: 'danger', onclick: async () => {
        if (!(await confirmAction('Delete connector', `Delete ${name}? Its config and tasks are removed; its topics and data stay.`, { confirm: 'Delete' }))) return;
        try {
          await api.remove(name);
          toast(`${name} deleted`);
          location.hash = '#/';
        } catch (e) {
          fill(error, message(e));
        }
      },
    }, 'Delete…'));

  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, 'Connectors'), ' / ', name),
    h('div', { class: 'title' }, h('h1', null, name), state, h('span', { class: 'muted' }, info.type)),
    buttons, error, stats,
    h('h2', null, 'Last minutes'), charts,
    h('h2', null, 'Tasks'),
    scroller('Tasks', h('table', null, h('thead', null, h('tr', null, th('Task'), th('State'), th('Worker'), th('Trace'), th('', { 'aria-label': 'Actions' }))), tasks)),
    h('h2', null, 'Topics'), topics,
    h('h2', null, 'Config'),
    h('p', { class: 'muted' }, 'Secrets are shown as the API shows them.'),
    scroller('Config', h('table', { class: 'config' }, h('thead', null, h('tr', null, th('Key'), th('Value'))), config)),
    h('h2', null, 'Offsets'), offsets);

  const cfg = await api.config(name);
  fill(config, Object.keys(cfg).sort().map((k) => h('tr', null, h('th', { scope: 'row' }, k), h('td', null, h('code', null, cfg[k])))));
  // Topics and offsets change as records flow: read again every few
  // refreshes (offsets of a sink cost the worker a group lookup).
  let rounds = 0;
  const readTopicsAndOffsets = () => {
    api.topics(name).then((t) => fill(topics, (t[name]?.topics || []).join(', ') || 'none yet')).catch((e) => fill(topics, message(e)));
    api.offsets(name).then((o) => fill(offsets, JSON.stringify(o, null, 2))).catch((e) => fill(offsets, message(e)));
  };

  async function refresh() {
    if (rounds++ % 3 === 0) readTopicsAndOffsets();
    let status;
    try {
      status = await api.status(name);
    } catch (e) {
      fill(error, message(e));
      return;
    }
    fill(state, badge(status.connector.state));
    state.dataset.state = status.connector.state;
    fill(tasks, status.tasks.map((/** @type {any} */ t) => h('tr', null,
      h('th', { scope: 'row' }, String(t.id)),
      h('td', null, badge(t.state)),
      h('td', null, t.worker_id),
      h('td', null, t.trace ? h('details', null, h('summary', null, t.trace.split('\n')[0].slice(0, 80)), h('pre', null, t.trace)) : '—'),
      h('td', null, h('button', {
        type: 'button', onclick: () => action('Restart task', `Restart task ${t.id} of ${name}?`, () => api.restartTask(name, t.id), `task ${t.id} restarted`, { confirm: 'Restart' }),
      }, `Restart task ${t.id}`)))));
    const s = ctx.history.stats(name);
    fill(stats,
      ...[['In', `${num(s.inRate)} /s`], ['Out', `${num(s.outRate)} /s`], ['Records in', num(s.recordsIn)], ['Records out', num(s.recordsOut)], ['Lag', num(s.lag)],
        ['Errors', num(s.errors)], ['Dead letters', num(s.dlq)], ['Latency p50', secs(s.p50)], ['Latency p99', secs(s.p99)]]
        .map(([k, v]) => h('div', null, h('dt', null, k), h('dd', { dataset: { stat: k } }, v))));
    const hist = ctx.history;
    fill(charts,
      lineChart('Throughput (records/s)', [
        { label: 'in', points: hist.series(name, 'inRate'), cls: 's1' },
        { label: 'out', points: hist.series(name, 'outRate'), cls: 's2' }], (v) => num(v)),
      lineChart('Consumer lag (records)', [{ label: 'lag', points: hist.series(name, 'lag'), cls: 's1' }], (v) => num(v)),
      lineChart('End-to-end latency', [
        { label: 'p50', points: hist.series(name, 'p50'), cls: 's1' },
        { label: 'p99', points: hist.series(name, 'p99'), cls: 's2' }], secs),
      lineChart('Errors and dead letters (/s)', [
        { label: 'errors', points: hist.series(name, 'errorRate'), cls: 's3' },
        { label: 'dead letters', points: hist.series(name, 'dlqRate'), cls: 's2' }], (v) => num(v)));
  }
  await refresh();
  return refresh;
}

// ----------------------------------------------------------- create / edit

const HIDDEN = '[hidden]';

/** @param {HTMLElement} main @param {string | undefined} name @param {Context} _ctx @param {'create' | 'edit'} mode */
export async function createView(main, name, _ctx, mode) {
  const editing = mode === 'edit' && !!name;
  /** @type {Record<string, string>} */
  let values = {};
  /** @type {Record<string, string>} */
  let original = {};
  let klass = '';
  if (editing) {
    original = await api.config(/** @type {string} */ (name));
    values = { ...original };
    klass = values['connector.class'] || '';
  }
  const plugins = /** @type {any[]} */ (await api.plugins());
  const errorBox = h('div', { class: 'error', role: 'alert', id: 'form-errors' });
  const summary = h('p', { class: 'muted', role: 'status', id: 'validation-summary' });
  const fields = h('div', { class: 'fields' });
  const raw = /** @type {HTMLTextAreaElement} */ (h('textarea', { id: 'raw-json', rows: 20, spellcheck: 'false', 'aria-describedby': 'raw-help' }));
  const rawPanel = h('div', { hidden: true }, h('label', { for: 'raw-json' }, 'Connector as JSON'),
    h('p', { id: 'raw-help', class: 'muted' }, 'Kafka Connect\'s {"name", "config"} shape, every value a string.'), raw);
  let rawMode = false;
  /** @type {any[]} */
  let definitions = [];

  const classSelect = /** @type {HTMLSelectElement} */ (h('select', { id: 'connector-class', required: true, disabled: editing },
    h('option', { value: '' }, 'Choose a connector class'),
    plugins.map((p) => h('option', { value: p.class, selected: p.class === klass || (p.aliases || []).includes(klass) }, `${p.class} (${p.type})`))));
  const modeButton = h('button', { type: 'button', 'aria-pressed': 'false', onclick: () => toggleRaw() }, 'Edit as JSON');
  const submit = h('button', { type: 'submit', class: 'primary' }, editing ? 'Save changes' : 'Create connector');
  const form = h('form', { novalidate: true, onsubmit: (/** @type {Event} */ e) => { e.preventDefault(); save(); } },
    h('div', { class: 'field' }, h('label', { for: 'connector-class' }, 'Connector class'), classSelect),
    h('div', { class: 'toolbar' }, modeButton),
    summary, errorBox, fields, rawPanel,
    h('div', { class: 'toolbar' }, submit, h('a', { class: 'button', href: editing ? link(/** @type {string} */ (name)) : '#/' }, 'Cancel')));
  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, 'Connectors'), ' / ', editing ? h('a', { href: link(/** @type {string} */ (name)) }, name) : 'New', editing ? ' / Edit' : ''),
    h('h1', null, editing ? `Edit ${name}` : 'New connector'), form);

  /** The class the form is for (an alias resolved to the listed class). */
  const currentClass = () => classSelect.value || klass;

  classSelect.addEventListener('change', async () => {
    values['connector.class'] = classSelect.value;
    await loadDefinitions();
  });

  async function loadDefinitions() {
    const c = currentClass();
    if (!c) {
      fill(fields);
      return;
    }
    definitions = await api.pluginConfig(c);
    values['connector.class'] = values['connector.class'] || c;
    renderFields();
    validateSoon();
  }

  /** @param {string} key */
  const fieldId = (key) => `f-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`;

  function renderFields() {
    const known = new Set(definitions.map((d) => d.name));
    /** @type {Map<string, HTMLElement[]>} */
    const groups = new Map();
    for (const d of definitions) {
      if (d.name === 'connector.class') continue;
      const list = groups.get(d.group || 'Other') || [];
      list.push(field(d.name, d));
      groups.set(d.group || 'Other', list);
    }
    const extra = Object.keys(values).filter((k) => !known.has(k) && k !== 'connector.class').sort();
    const newKey = /** @type {HTMLInputElement} */ (h('input', { id: 'new-key', placeholder: 'transforms.x.type' }));
    const newValue = /** @type {HTMLInputElement} */ (h('input', { id: 'new-value' }));
    fill(fields,
      [...groups.entries()].map(([g, list]) => h('fieldset', null, h('legend', null, g === 'Common' ? 'Common keys' : g === 'Connector' ? `${currentClass()} keys` : g), list)),
      h('fieldset', null, h('legend', null, 'Other keys'),
        extra.map((k) => field(k, null)),
        h('div', { class: 'add-key' },
          h('div', { class: 'field' }, h('label', { for: 'new-key' }, 'Key'), newKey),
          h('div', { class: 'field' }, h('label', { for: 'new-value' }, 'Value'), newValue),
          h('button', {
            type: 'button', onclick: () => {
              const k = newKey.value.trim();
              if (!k) return newKey.focus();
              values[k] = newValue.value;
              renderFields();
              validateSoon();
              /** @type {HTMLElement | null} */ (document.getElementById(fieldId(k)))?.focus();
            },
          }, 'Add key'))));
  }

  /** One key's input, its documentation and its errors. @param {string} key @param {any} d */
  function field(key, d) {
    const id = fieldId(key);
    const type = d?.type || 'STRING';
    const secret = type === 'PASSWORD' || values[key] === HIDDEN;
    const doc = [d?.documentation, d?.default_value !== null && d?.default_value !== undefined && d?.default_value !== '' ? `Default: ${d.default_value}` : null].filter(Boolean).join('. ');
    /** @type {HTMLInputElement | HTMLSelectElement} */
    let input;
    if (type === 'BOOLEAN') {
      input = /** @type {HTMLSelectElement} */ (h('select', { id }, h('option', { value: '' }, '(default)'),
        ['true', 'false'].map((v) => h('option', { value: v, selected: values[key] === v }, v))));
    } else {
      input = /** @type {HTMLInputElement} */ (h('input', {
        id, type: secret ? 'password' : 'text', autocomplete: 'off', spellcheck: 'false',
        value: values[key] === HIDDEN ? '' : values[key] ?? '',
        placeholder: values[key] === HIDDEN ? 'hidden: leave empty to keep' : d?.default_value ?? '',
      }));
    }
    if (key === 'name' && editing) /** @type {HTMLInputElement} */ (input).readOnly = true;
    input.name = key;
    input.setAttribute('aria-describedby', `${id}-doc ${id}-err`);
    if (d?.required) input.setAttribute('aria-required', 'true');
    input.addEventListener('input', () => {
      if (input.value === '' && !(values[key] === HIDDEN)) delete values[key];
      else if (input.value !== '') values[key] = input.value;
      validateSoon();
    });
    input.addEventListener('change', () => input.dispatchEvent(new Event('input')));
    return h('div', { class: 'field', dataset: { key } },
      h('label', { for: id }, key, d?.required ? h('span', { class: 'required' }, ' (required)') : null, h('span', { class: 'type' }, ` ${type.toLowerCase()}`)),
      input,
      h('small', { id: `${id}-doc`, class: 'doc' }, doc),
      h('p', { id: `${id}-err`, class: 'field-error' }));
  }

  /** The config to validate or send (hidden values left out). */
  function currentConfig() {
    /** @type {Record<string, string>} */
    const c = {};
    for (const [k, v] of Object.entries(values)) if (v !== HIDDEN && v !== '') c[k] = v;
    if (!c['connector.class'] && currentClass()) c['connector.class'] = currentClass();
    if (editing) c.name = /** @type {string} */ (name);
    return c;
  }

  /** @type {any} */
  let timer = null;
  let validation = 0;
  function validateSoon() {
    clearTimeout(timer);
    timer = setTimeout(validate, 350);
  }

  /** Live validation: the validate endpoint's errors beside their keys. */
  async function validate() {
    const c = currentClass();
    if (!c) return;
    const mine = ++validation;
    let report;
    try {
      report = await api.validate(c, currentConfig());
    } catch (e) {
      if (mine === validation) fill(summary, `Cannot validate: ${message(e)}`);
      return;
    }
    if (mine !== validation) return;
    /** @type {string[]} */
    const elsewhere = [];
    for (const el of fields.querySelectorAll('.field-error')) fill(el);
    for (const el of fields.querySelectorAll('[aria-invalid]')) el.removeAttribute('aria-invalid');
    for (const entry of report.configs || []) {
      const errors = entry.value?.errors || [];
      if (!errors.length) continue;
      const key = entry.value.name;
      const target = document.getElementById(`${fieldId(key)}-err`);
      if (target) {
        fill(target, errors.join(' '));
        document.getElementById(fieldId(key))?.setAttribute('aria-invalid', 'true');
      } else {
        elsewhere.push(`${key}: ${errors.join(' ')}`);
      }
    }
    fill(summary, report.error_count ? `${report.error_count} error${report.error_count === 1 ? '' : 's'} (each shown beside its key)` : 'Valid');
    summary.dataset.errors = String(report.error_count || 0);
    fill(errorBox, elsewhere.length ? h('ul', null, elsewhere.map((t) => h('li', null, t))) : null);
  }

  function toggleRaw() {
    if (!rawMode) {
      raw.value = JSON.stringify({ name: values.name || name || '', config: currentConfig() }, null, 2);
    } else {
      try {
        const parsed = JSON.parse(raw.value);
        const cfg = parsed.config || parsed;
        values = Object.fromEntries(Object.entries(cfg).map(([k, v]) => [k, String(v)]));
        if (parsed.name) values.name = String(parsed.name);
        if (!editing && values['connector.class'] && values['connector.class'] !== classSelect.value) {
          classSelect.value = values['connector.class'];
          if (classSelect.value) loadDefinitions();
        } else {
          renderFields();
        }
        fill(errorBox);
      } catch (e) {
        fill(errorBox, `The JSON does not parse: ${message(e)}`);
        return;
      }
    }
    rawMode = !rawMode;
    rawPanel.hidden = !rawMode;
    fields.hidden = rawMode;
    modeButton.setAttribute('aria-pressed', String(rawMode));
    fill(modeButton, rawMode ? 'Back to the form' : 'Edit as JSON');
    (rawMode ? raw : modeButton).focus();
  }

  async function save() {
    fill(errorBox);
    /** @type {string} */
    let target;
    try {
      if (rawMode) {
        const parsed = JSON.parse(raw.value);
        if (editing) {
          const patch = patchOf(parsed.config || parsed);
          await api.patchConfig(/** @type {string} */ (name), patch);
          target = /** @type {string} */ (name);
        } else {
          const created = await api.create(parsed.name, parsed.config);
          target = created.name;
        }
      } else if (editing) {
        await api.patchConfig(/** @type {string} */ (name), patchOf(values));
        target = /** @type {string} */ (name);
      } else {
        const config = currentConfig();
        const connectorName = config.name || '';
        delete config.name;
        const created = await api.create(connectorName, config);
        target = created.name;
      }
    } catch (e) {
      fill(errorBox, e instanceof SyntaxError ? `The JSON does not parse: ${e.message}` : message(e));
      errorBox.focus?.();
      return;
    }
    toast(editing ? `${target} updated` : `${target} created`);
    location.hash = link(target);
  }

  /** What changed against the config loaded, as a PATCH: hidden values
   * left alone unless retyped, removed keys null. @param {Record<string, any>} next */
  function patchOf(next) {
    /** @type {Record<string, string | null>} */
    const patch = {};
    for (const [k, v] of Object.entries(next)) {
      if (k === 'name' || v === HIDDEN || v === '') continue;
      if (original[k] !== String(v)) patch[k] = String(v);
    }
    for (const k of Object.keys(original)) {
      if (!(k in next) && original[k] !== HIDDEN && k !== 'name') patch[k] = null;
    }
    return patch;
  }

  errorBox.tabIndex = -1;
  await loadDefinitions();
}

// ------------------------------------------------------------ dead letters

/** @param {HTMLElement} main @param {string} name */
export async function dlqView(main, name) {
  const status = h('p', { role: 'status', class: 'muted', id: 'dlq-status' });
  const error = h('p', { class: 'error', role: 'alert' });
  const summary = h('dl', { class: 'stats' });
  const groups = h('tbody');
  const samples = h('div', { class: 'samples' });
  const result = h('p', { role: 'status', id: 'replay-result' });
  const classFilter = /** @type {HTMLSelectElement} */ (h('select', { id: 'replay-class' }));
  const stageFilter = /** @type {HTMLSelectElement} */ (h('select', { id: 'replay-stage' }));
  const maxInput = /** @type {HTMLInputElement} */ (h('input', { id: 'replay-max', type: 'number', min: 1, inputmode: 'numeric' }));
  const toInput = /** @type {HTMLInputElement} */ (h('input', { id: 'replay-to', placeholder: 'each record\'s origin topic' }));
  const replayButton = /** @type {HTMLButtonElement} */ (h('button', { type: 'button', class: 'danger', disabled: true, onclick: () => replay(false) }, 'Replay…'));
  let dryRunOf = '';

  const options = () => {
    /** @type {Record<string, any>} */
    const o = {};
    if (classFilter.value) o.error_class = classFilter.value;
    if (stageFilter.value) o.stage = stageFilter.value;
    if (maxInput.value) o.max = Number(maxInput.value);
    if (toInput.value.trim()) o.to = toInput.value.trim();
    return o;
  };
  for (const el of [classFilter, stageFilter, maxInput, toInput]) {
    el.addEventListener('input', () => {
      replayButton.disabled = JSON.stringify(options()) !== dryRunOf;
    });
  }

  /** @param {boolean} dry */
  async function replay(dry) {
    const o = options();
    if (!dry) {
      const text = `Replay the dead letters of ${name}${o.error_class ? ` of class ${o.error_class}` : ''}${o.stage ? ` at stage ${o.stage}` : ''} to ${o.to || 'their origin topics'}? They are produced again; a replay does not repeat what it already replayed.`;
      if (!(await confirmAction('Replay dead letters', text, { confirm: 'Replay' }))) return;
    }
    try {
      const r = await api.replay(name, { ...o, dry_run: dry });
      const targets = Object.entries(r.by_target_topic || {}).map(([t, n]) => `${n} to ${t}`).join(', ');
      fill(result, `${dry ? 'Dry run: would replay' : 'Replayed'} ${r.replayed} record${r.replayed === 1 ? '' : 's'}${targets ? ` (${targets})` : ''}; ${r.skipped_by_filter} skipped by the filters.`);
      result.dataset.replayed = String(r.replayed);
      result.dataset.dryRun = String(dry);
      if (dry) {
        dryRunOf = JSON.stringify(o);
        replayButton.disabled = false;
      } else {
        dryRunOf = '';
        replayButton.disabled = true;
        toast(`${r.replayed} dead letters replayed`);
      }
    } catch (e) {
      fill(result, message(e));
    }
  }

  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, 'Connectors'), ' / ', h('a', { href: link(name) }, name), ' / Dead letters'),
    h('div', { class: 'title' }, h('h1', null, `Dead letters of ${name}`), h('button', { type: 'button', onclick: () => load() }, 'Refresh')),
    status, error, summary,
    h('h2', null, 'By error class and stage'),
    scroller('Dead letters by error class and stage', h('table', { class: 'groups' }, h('thead', null, h('tr', null, th('Error class'), th('Stage'), th('Count', { class: 'n' }), th('', { 'aria-label': 'Actions' }))), groups)),
    h('h2', null, 'Replay'),
    h('p', { class: 'muted' }, 'A dry run first counts what would be replayed; the replay itself is enabled after a dry run of the same options.'),
    h('div', { class: 'replay' },
      h('div', { class: 'field' }, h('label', { for: 'replay-class' }, 'Error class'), classFilter),
      h('div', { class: 'field' }, h('label', { for: 'replay-stage' }, 'Stage'), stageFilter),
      h('div', { class: 'field' }, h('label', { for: 'replay-max' }, 'At most'), maxInput),
      h('div', { class: 'field' }, h('label', { for: 'replay-to' }, 'To topic'), toInput)),
    h('div', { class: 'toolbar' }, h('button', { type: 'button', class: 'primary', onclick: () => replay(true) }, 'Dry run'), replayButton),
    result,
    h('h2', null, 'Samples'), samples);

  async function load() {
    fill(status, 'Reading the dead-letter queue…');
    status.dataset.loading = 'true';
    let r;
    try {
      r = await api.dlq(name);
      fill(error);
    } catch (e) {
      fill(status);
      fill(error, message(e));
      status.dataset.loading = 'false';
      return;
    }
    fill(status, `Topic ${r.topic}, read ${new Date().toLocaleTimeString()}`);
    fill(summary, h('div', null, h('dt', null, 'Dead letters'), h('dd', { dataset: { stat: 'total' } }, num(r.total))),
      h('div', null, h('dt', null, 'Failed again after a replay'), h('dd', { dataset: { stat: 'failed-again' } }, num(r.failed_again_after_replay))));
    const keep = [classFilter.value, stageFilter.value];
    fill(classFilter, h('option', { value: '' }, 'Any'), Object.keys(r.by_error_class).map((c) => h('option', { value: c }, c)));
    fill(stageFilter, h('option', { value: '' }, 'Any'), Object.keys(r.by_stage).map((c) => h('option', { value: c }, c)));
    [classFilter.value, stageFilter.value] = keep;
    fill(groups, r.groups.length ? r.groups.map((/** @type {any} */ g) => h('tr', { dataset: { errorClass: g.error_class, stage: g.stage } },
      h('th', { scope: 'row' }, g.error_class), h('td', null, g.stage), h('td', { class: 'n' }, num(g.count)),
      h('td', null, h('button', {
        type: 'button', onclick: () => {
          classFilter.value = g.error_class;
          stageFilter.value = g.stage;
          classFilter.dispatchEvent(new Event('input'));
          classFilter.focus();
        },
      }, 'Replay this group…')))) : h('tr', null, h('td', { colspan: 4 }, 'No dead letters.')));
    fill(samples, r.groups.map((/** @type {any} */ g) => {
      const mine = r.samples.filter((/** @type {any} */ s) => s.error_class === g.error_class && s.stage === g.stage);
      return h('section', { class: 'group' },
        h('h3', null, `${g.error_class} at ${g.stage}`, h('span', { class: 'muted' }, ` · ${g.count} record${g.count === 1 ? '' : 's'}, ${mine.length} shown`)),
        mine.map((/** @type {any} */ s) => h('details', { class: 'sample' },
          h('summary', null, `${s.origin_topic || '?'}-${s.origin_partition ?? '?'}@${s.origin_offset ?? '?'}: ${s.message || '(no message header)'}`),
          h('dl', { class: 'record' },
            h('dt', null, 'Dead-letter position'), h('dd', null, `partition ${s.partition}, offset ${s.offset}`),
            h('dt', null, 'Timestamp'), h('dd', null, s.timestamp ? new Date(s.timestamp).toISOString() : '—'),
            h('dt', null, 'Replayed before'), h('dd', null, String(s.replayed_before)),
            h('dt', null, 'Key'), h('dd', null, h('code', null, s.key_preview ?? 'null')),
            h('dt', null, 'Value'), h('dd', null, h('code', null, s.value_preview ?? 'null'))),
          scroller('Headers', h('table', { class: 'headers' }, h('thead', null, h('tr', null, th('Header'), th('Value'))),
            h('tbody', null, s.headers.map((/** @type {[string, string | null]} */ [k, v]) => h('tr', null, h('th', { scope: 'row' }, k), h('td', null, v === null ? h('em', null, 'null') : h('pre', null, v))))))))));
    }));
    status.dataset.loading = 'false';
  }
  await load();
}

// -------------------------------------------------------------- transforms

const SAMPLE = '{"key": "1", "value": {"order_id": 1, "status": "new"}, "headers": {"source": "console"}}';

/** @param {HTMLElement} main @param {string} name */
export async function transformsView(main, name) {
  const cfg = await api.config(name);
  const aliases = (cfg.transforms || '').split(',').map((/** @type {string} */ s) => s.trim()).filter(Boolean);
  const input = /** @type {HTMLTextAreaElement} */ (h('textarea', { id: 'sample-records', rows: 8, spellcheck: 'false', 'aria-describedby': 'sample-help' }));
  input.value = SAMPLE;
  const out = h('div', { id: 'transform-output', 'aria-live': 'polite' });
  const error = h('p', { class: 'error', role: 'alert' });

  /** The records typed: one object, an array, or one object per line. */
  function records() {
    const text = input.value.trim();
    if (!text) return [];
    try {
      const v = JSON.parse(text);
      return Array.isArray(v) ? v : [v];
    } catch {
      return text.split('\n').filter((l) => l.trim()).map((l, i) => {
        try {
          return JSON.parse(l);
        } catch (e) {
          throw new Error(`line ${i + 1} is not JSON: ${/** @type {any} */ (e).message}`);
        }
      });
    }
  }

  async function run() {
    fill(error);
    let r;
    try {
      r = await api.tryTransforms(name, records());
    } catch (e) {
      fill(out);
      fill(error, message(e));
      return;
    }
    fill(out, r.results.map((/** @type {any} */ res) => h('section', { class: `result result-${res.result}`, dataset: { result: res.result } },
      h('h3', null, `Record ${res.input}: `, res.result === 'error' ? `error (${res.class}) in ${res.transform}` : res.result),
      res.result === 'error' ? h('pre', { class: 'error' }, res.message) : null,
      (res.records || []).map((/** @type {any} */ rec) => h('pre', { class: 'json', tabindex: 0 }, JSON.stringify(rec, null, 2))))));
  }

  fill(main,
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, 'Connectors'), ' / ', h('a', { href: link(name) }, name), ' / Transforms'),
    h('h1', null, `Try the transforms of ${name}`),
    h('p', null, aliases.length ? `The chain: ${aliases.join(' → ')} (with their predicates), on fresh instances: nothing is produced or written.` : 'This connector has no transforms: records pass through unchanged.'),
    h('label', { for: 'sample-records' }, 'Sample records'),
    h('p', { id: 'sample-help', class: 'muted' }, 'A JSON object, an array of them, or one per line: {"key", "value", "headers", "topic", "partition", "offset", "timestamp"}; a string value is its text, other JSON its serialisation.'),
    input,
    h('div', { class: 'toolbar' }, h('button', { type: 'button', class: 'primary', onclick: run }, 'Run the transforms')),
    error, out);
}
