// @ts-check
/** The worker's own metrics: `/metrics` (Prometheus text) parsed, kept for
 * the last minutes, and turned into per-connector rates, lag and latency. */

/** @typedef {{name: string, labels: Record<string, string>, value: number}} Sample */
/** @typedef {{at: number, samples: Sample[]}} Scrape */

/**
 * Parses the Prometheus text format (0.0.4): `name{l="v",...} value`.
 * Comments and blank lines are skipped; escaped quotes and backslashes in
 * label values are read.
 * @param {string} text
 * @returns {Sample[]}
 */
export function parsePrometheus(text) {
  /** @type {Sample[]} */
  const out = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) continue;
    let i = 0;
    while (i < line.length && /[A-Za-z0-9_:]/.test(line[i])) i++;
    const name = line.slice(0, i);
    /** @type {Record<string, string>} */
    const labels = {};
    if (line[i] === '{') {
      i++;
      while (i < line.length && line[i] !== '}') {
        const eq = line.indexOf('=', i);
        const key = line.slice(i, eq).trim().replace(/^,/, '').trim();
        i = eq + 2; // past ="
        let value = '';
        while (i < line.length && line[i] !== '"') {
          if (line[i] === '\\' && i + 1 < line.length) {
            const n = line[i + 1];
            value += n === 'n' ? '\n' : n;
            i += 2;
          } else {
            value += line[i++];
          }
        }
        i++; // past the closing quote
        labels[key] = value;
        while (line[i] === ',' || line[i] === ' ') i++;
      }
      i++; // past }
    }
    const rest = line.slice(i).trim().split(/\s+/);
    const value = Number(rest[0] === '+Inf' ? Infinity : rest[0] === '-Inf' ? -Infinity : rest[0]);
    if (name) out.push({ name, labels, value });
  }
  return out;
}

/**
 * Sum of a metric's samples whose labels match `where`.
 * @param {Scrape} scrape
 * @param {string} name
 * @param {(labels: Record<string, string>) => boolean} where
 */
function sum(scrape, name, where) {
  let total = 0;
  let found = false;
  for (const s of scrape.samples) {
    if (s.name === name && where(s.labels)) {
      total += s.value;
      found = true;
    }
  }
  return found ? total : null;
}

const IN_STAGES = new Set(['poll', 'consume']);
const OUT_STAGES = new Set(['produce', 'put']);

/**
 * @typedef {{inRate: number | null, outRate: number | null, lag: number | null,
 *   dlq: number | null, errors: number | null, errorRate: number | null, dlqRate: number | null,
 *   p50: number | null, p99: number | null, recordsIn: number | null, recordsOut: number | null}} Stats
 */

/**
 * A quantile from cumulative histogram buckets (`le` -> count), linear
 * within a bucket as Prometheus' histogram_quantile.
 * @param {Array<[number, number]>} buckets sorted by le
 * @param {number} q
 */
export function quantile(buckets, q) {
  if (!buckets.length) return null;
  const total = buckets[buckets.length - 1][1];
  if (!(total > 0)) return null;
  const rank = q * total;
  let prevLe = 0;
  let prevCount = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return prevLe;
      const inBucket = count - prevCount;
      return inBucket > 0 ? prevLe + ((le - prevLe) * (rank - prevCount)) / inBucket : le;
    }
    prevLe = le;
    prevCount = count;
  }
  return prevLe;
}

/** @param {Scrape} scrape @param {string} connector */
function latencyBuckets(scrape, connector) {
  /** @type {Map<number, number>} */
  const byLe = new Map();
  for (const s of scrape.samples) {
    if (s.name === 'streaming_e2e_latency_seconds_bucket' && s.labels.pipeline === connector) {
      const le = s.labels.le === '+Inf' ? Infinity : Number(s.labels.le);
      byLe.set(le, (byLe.get(le) || 0) + s.value);
    }
  }
  return [...byLe.entries()].sort((a, b) => a[0] - b[0]);
}

/** Keeps scrapes of `/metrics` for `windowMs`, and answers stats from them. */
export class MetricsHistory {
  constructor(windowMs = 5 * 60 * 1000) {
    this.windowMs = windowMs;
    /** @type {Scrape[]} */
    this.scrapes = [];
  }

  /** @param {string} text @param {number} [at] */
  add(text, at = Date.now()) {
    this.scrapes.push({ at, samples: parsePrometheus(text) });
    while (this.scrapes.length > 2 && at - this.scrapes[0].at > this.windowMs) this.scrapes.shift();
  }

  /**
   * A connector's stats at scrape `i` (rates against the scrape about
   * `spanMs` before it).
   * @param {string} connector
   * @param {number} [i]
   * @param {number} [spanMs]
   * @returns {Stats}
   */
  stats(connector, i = this.scrapes.length - 1, spanMs = 10000) {
    const cur = this.scrapes[i];
    /** @type {Stats} */
    const empty = { inRate: null, outRate: null, lag: null, dlq: null, errors: null, errorRate: null, dlqRate: null, p50: null, p99: null, recordsIn: null, recordsOut: null };
    if (!cur) return empty;
    let j = i - 1;
    while (j > 0 && cur.at - this.scrapes[j].at < spanMs) j--;
    const prev = j >= 0 && j < i ? this.scrapes[j] : null;
    /** @param {Record<string, string>} l */
    const mine = (l) => l.connector === connector;
    /** @param {Scrape} s @param {Set<string>} stages */
    const records = (s, stages) =>
      sum(s, 'sluice_records_total', (l) => mine(l) && stages.has(l.stage) && l.outcome === 'ok');
    /** @param {(s: Scrape) => number | null} f */
    const rate = (f) => {
      if (!prev) return null;
      const a = f(prev);
      const b = f(cur);
      if (b === null) return null;
      const dt = (cur.at - prev.at) / 1000;
      return dt > 0 ? Math.max(0, (b - (a || 0)) / dt) : null;
    };
    const dlqOf = (/** @type {Scrape} */ s) => sum(s, 'sluice_dlq_records_total', mine);
    const errorsOf = (/** @type {Scrape} */ s) => sum(s, 'sluice_errors_total', mine);
    // Latency over the span when records arrived in it, else since start.
    const now = latencyBuckets(cur, connector);
    let window = now;
    if (prev) {
      const before = new Map(latencyBuckets(prev, connector));
      const delta = now.map(([le, c]) => /** @type {[number, number]} */ ([le, c - (before.get(le) || 0)]));
      if (delta.length && delta[delta.length - 1][1] > 0) window = delta;
    }
    return {
      inRate: rate((s) => records(s, IN_STAGES)),
      outRate: rate((s) => records(s, OUT_STAGES)),
      recordsIn: records(cur, IN_STAGES),
      recordsOut: records(cur, OUT_STAGES),
      lag: sum(cur, 'sluice_consumer_lag', mine),
      dlq: dlqOf(cur),
      errors: errorsOf(cur),
      dlqRate: rate(dlqOf),
      errorRate: rate(errorsOf),
      p50: quantile(window, 0.5),
      p99: quantile(window, 0.99),
    };
  }

  /**
   * One stat over the kept window, for a chart: [time, value] pairs.
   * @param {string} connector
   * @param {keyof Stats} key
   * @returns {Array<[number, number | null]>}
   */
  series(connector, key) {
    return this.scrapes.map((s, i) => [s.at, this.stats(connector, i, 4000)[key]]);
  }
}
