// @ts-check
/** The worker's public REST API, as any client sees it. */

/** Where the API is: the page's origin, under any prefix before `/ui`. */
export const BASE = location.pathname.replace(/\/ui(\/.*)?$/, '');

/** An answer the API gave with an error status: its `{error_code, message}`. */
export class ApiError extends Error {
  /** @param {number} status @param {string} message @param {any} body */
  constructor(status, message, body) {
    super(message);
    this.status = status;
    this.body = body;
  }
}

/**
 * One request; JSON in and out. Resolves to the parsed body (null for
 * none); rejects with ApiError for a 4xx/5xx, with its message.
 * @param {string} method
 * @param {string} path
 * @param {any} [body]
 * @returns {Promise<any>}
 */
export async function call(method, path, body) {
  /** @type {RequestInit} */
  const init = { method, headers: { Accept: 'application/json' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.body = JSON.stringify(body);
    /** @type {any} */ (init.headers)['Content-Type'] = 'application/json';
  }
  const res = await fetch(BASE + path, init);
  const text = await res.text();
  let parsed = null;
  if (text) {
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
  }
  if (!res.ok) {
    const message = parsed && typeof parsed === 'object' && parsed.message ? parsed.message : `HTTP ${res.status}`;
    throw new ApiError(res.status, message, parsed);
  }
  return parsed;
}

/** @param {string} name */
export const enc = (name) => encodeURIComponent(name);

export const api = {
  root: () => call('GET', '/'),
  connectors: () => call('GET', '/connectors?expand=status&expand=info'),
  /** @param {string} n */ info: (n) => call('GET', `/connectors/${enc(n)}`),
  /** @param {string} n */ status: (n) => call('GET', `/connectors/${enc(n)}/status`),
  /** @param {string} n */ config: (n) => call('GET', `/connectors/${enc(n)}/config`),
  /** @param {string} n */ topics: (n) => call('GET', `/connectors/${enc(n)}/topics`),
  /** @param {string} n */ offsets: (n) => call('GET', `/connectors/${enc(n)}/offsets`),
  /** @param {string} n */ pause: (n) => call('PUT', `/connectors/${enc(n)}/pause`),
  /** @param {string} n */ resume: (n) => call('PUT', `/connectors/${enc(n)}/resume`),
  /** @param {string} n */ stop: (n) => call('PUT', `/connectors/${enc(n)}/stop`),
  /** @param {string} n @param {boolean} includeTasks @param {boolean} onlyFailed */
  restart: (n, includeTasks, onlyFailed) =>
    call('POST', `/connectors/${enc(n)}/restart?includeTasks=${includeTasks}&onlyFailed=${onlyFailed}`),
  /** @param {string} n @param {number} t */
  restartTask: (n, t) => call('POST', `/connectors/${enc(n)}/tasks/${t}/restart`),
  /** @param {string} n */ remove: (n) => call('DELETE', `/connectors/${enc(n)}`),
  /** @param {string} name @param {Record<string, string>} config */
  create: (name, config) => call('POST', '/connectors', { name, config }),
  /** @param {string} n @param {Record<string, string | null>} patch */
  patchConfig: (n, patch) => call('PATCH', `/connectors/${enc(n)}/config`, patch),
  plugins: () => call('GET', '/connector-plugins'),
  /** @param {string} c */ pluginConfig: (c) => call('GET', `/connector-plugins/${enc(c)}/config`),
  /** @param {string} c @param {Record<string, string>} config */
  validate: (c, config) => call('PUT', `/connector-plugins/${enc(c)}/config/validate`, config),
  /** @param {string} n */ dlq: (n) => call('GET', `/connectors/${enc(n)}/dlq?samples=3`),
  /** @param {string} n @param {Record<string, any>} opts */
  replay: (n, opts) => call('POST', `/connectors/${enc(n)}/dlq/replay`, opts),
  /** @param {string} n @param {any[]} records */
  tryTransforms: (n, records) => call('POST', `/connectors/${enc(n)}/transforms/test`, { records }),
  /** The Prometheus text of `/metrics`. @returns {Promise<string>} */
  metrics: async () => {
    const res = await fetch(`${BASE}/metrics`, { credentials: 'same-origin' });
    if (!res.ok) throw new ApiError(res.status, `metrics: HTTP ${res.status}`, null);
    return res.text();
  },
};
