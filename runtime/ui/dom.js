// @ts-check
/** Small DOM helpers: elements built with properties and children, never
 * from HTML strings (text is always text). */

/**
 * @param {string} tag
 * @param {Record<string, any> | null} [props]
 * @param {...(Node | string | number | null | undefined | false | Array<Node | string | null | undefined | false>)} children
 * @returns {HTMLElement}
 */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.className = String(v);
    else if (k === 'text') el.textContent = String(v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k in el && typeof v !== 'string') /** @type {any} */ (el)[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

/** @param {Node} el @param {any[]} children */
function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else el.appendChild(typeof c === 'object' ? c : document.createTextNode(String(c)));
  }
}

/** Replaces an element's children. @param {Element} el @param {...any} children */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A short message for screen readers and eyes. @param {string} text */
export function toast(text) {
  const t = /** @type {HTMLElement} */ (document.getElementById('toast'));
  t.textContent = text;
  t.classList.add('shown');
  clearTimeout(/** @type {any} */ (t).timer);
  /** @type {any} */ (t).timer = setTimeout(() => t.classList.remove('shown'), 4000);
}

/**
 * Asks before a destructive or consequential action, in a modal dialog
 * (keyboard: Tab between the buttons, Escape cancels; focus starts on Cancel).
 * @param {string} title
 * @param {string} text
 * @param {{confirm?: string, extra?: Node | null}} [opts]
 * @returns {Promise<boolean>}
 */
export function confirmAction(title, text, opts = {}) {
  const dialog = /** @type {HTMLDialogElement} */ (document.getElementById('confirm'));
  fill(/** @type {Element} */ (document.getElementById('confirm-title')), title);
  fill(/** @type {Element} */ (document.getElementById('confirm-text')), text);
  fill(/** @type {Element} */ (document.getElementById('confirm-extra')), opts.extra || null);
  const ok = /** @type {HTMLButtonElement} */ (document.getElementById('confirm-ok'));
  const cancel = /** @type {HTMLButtonElement} */ (document.getElementById('confirm-cancel'));
  ok.textContent = opts.confirm || 'Confirm';
  const opener = document.activeElement;
  return new Promise((resolve) => {
    /** @param {boolean} v */
    const done = (v) => {
      ok.removeEventListener('click', onOk);
      cancel.removeEventListener('click', onCancel);
      dialog.removeEventListener('cancel', onEscape);
      dialog.removeEventListener('close', onClose);
      if (dialog.open) dialog.close();
      if (opener instanceof HTMLElement && opener.isConnected) opener.focus();
      resolve(v);
    };
    const onOk = () => done(true);
    const onCancel = () => done(false);
    // Escape is answered at once, on `cancel`: the `close` event comes a
    // task later, by which time a dialog opened again (Escape, then Enter
    // on the same button) would be the one it closed.
    const onEscape = () => done(false);
    // A `close` event left over from the dialog dismissed just before
    // arrives while this one is open: not this dialog's.
    const onClose = () => {
      if (!dialog.open) done(false);
    };
    ok.addEventListener('click', onOk);
    cancel.addEventListener('click', onCancel);
    dialog.addEventListener('cancel', onEscape);
    dialog.addEventListener('close', onClose);
    dialog.showModal();
    cancel.focus();
  });
}

/** A number for people: 1234 -> "1,234", 12.345 -> "12.3". @param {number | null | undefined} n */
export function num(n, digits = 1) {
  if (n === null || n === undefined || Number.isNaN(n)) return '—';
  if (Math.abs(n) >= 100 || Number.isInteger(n)) return Math.round(n).toLocaleString('en');
  return n.toFixed(digits);
}

/** Seconds for people: 0.0123 -> "12 ms". @param {number | null | undefined} s */
export function secs(s) {
  if (s === null || s === undefined || Number.isNaN(s)) return '—';
  if (s < 1) return `${Math.round(s * 1000)} ms`;
  return `${s.toFixed(s < 10 ? 2 : 1)} s`;
}

/** A state badge. @param {string} state */
export function badge(state) {
  return h('span', { class: `badge state-${String(state || 'unknown').toLowerCase()}` }, state || 'UNKNOWN');
}
