// @ts-check
/** A small SVG line chart: a few series over time, its scale from 0 to the
 * largest value, labelled for screen readers with the latest values. */

const NS = 'http://www.w3.org/2000/svg';

/**
 * @param {string} tag
 * @param {Record<string, string | number>} attrs
 */
function svg(tag, attrs) {
  const el = document.createElementNS(NS, tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

/**
 * @typedef {{label: string, points: Array<[number, number | null]>, cls: string}} Series
 */

/**
 * @param {string} title
 * @param {Series[]} series
 * @param {(v: number | null) => string} format
 * @returns {HTMLElement}
 */
export function lineChart(title, series, format) {
  const W = 320;
  const H = 110;
  const PAD = { l: 44, r: 8, t: 8, b: 18 };
  const figure = document.createElement('figure');
  figure.className = 'chart';
  const all = series.flatMap((s) => s.points);
  const times = all.map((p) => p[0]);
  const values = /** @type {number[]} */ (all.map((p) => p[1]).filter((v) => v !== null && Number.isFinite(v)));
  const t0 = Math.min(...times);
  const t1 = Math.max(...times);
  const max = Math.max(1e-9, ...values);
  const latest = series.map((s) => {
    const last = [...s.points].reverse().find((p) => p[1] !== null);
    return `${s.label} ${format(last ? last[1] : null)}`;
  });
  const root = svg('svg', { viewBox: `0 0 ${W} ${H}`, role: 'img', 'aria-label': `${title}: ${latest.join(', ')}` });
  root.appendChild(svg('line', { x1: PAD.l, y1: H - PAD.b, x2: W - PAD.r, y2: H - PAD.b, class: 'axis' }));
  root.appendChild(svg('line', { x1: PAD.l, y1: PAD.t, x2: W - PAD.r, y2: PAD.t, class: 'grid' }));
  const top = svg('text', { x: PAD.l - 4, y: PAD.t + 4, class: 'tick', 'text-anchor': 'end' });
  top.textContent = format(values.length ? max : null);
  root.appendChild(top);
  const zero = svg('text', { x: PAD.l - 4, y: H - PAD.b + 4, class: 'tick', 'text-anchor': 'end' });
  zero.textContent = '0';
  root.appendChild(zero);
  if (times.length > 1) {
    const span = svg('text', { x: W - PAD.r, y: H - 4, class: 'tick', 'text-anchor': 'end' });
    span.textContent = `last ${Math.max(1, Math.round((t1 - t0) / 1000))} s`;
    root.appendChild(span);
  }
  const x = (/** @type {number} */ t) => (t1 > t0 ? PAD.l + ((t - t0) / (t1 - t0)) * (W - PAD.l - PAD.r) : W - PAD.r);
  const y = (/** @type {number} */ v) => H - PAD.b - (v / max) * (H - PAD.t - PAD.b);
  for (const s of series) {
    let d = '';
    let pen = false;
    for (const [t, v] of s.points) {
      if (v === null || !Number.isFinite(v)) {
        pen = false;
        continue;
      }
      d += `${pen ? 'L' : 'M'}${x(t).toFixed(1)},${y(v).toFixed(1)}`;
      pen = true;
    }
    if (d) root.appendChild(svg('path', { d, class: `line ${s.cls}` }));
  }
  const caption = document.createElement('figcaption');
  const strong = document.createElement('strong');
  strong.textContent = title;
  caption.appendChild(strong);
  series.forEach((s, i) => {
    const key = document.createElement('span');
    key.className = `key ${s.cls}`;
    key.textContent = latest[i];
    caption.appendChild(key);
  });
  figure.appendChild(caption);
  figure.appendChild(root);
  return figure;
}
