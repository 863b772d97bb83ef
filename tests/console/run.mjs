// The web console in Debian's chromium, driven by playwright-core: what an
// operator does, against a live worker that tests/console.rs starts (basic
// auth on, a datagen source `orders-gen` writing to `orders`).
//
//   node tests/console/run.mjs
//
// Environment: SLUICE_URL (the worker), SLUICE_USER, SLUICE_PASSWORD,
// SLUICE_DB (the SQLite file the sink is to write), SLUICE_SCREENSHOTS (a
// directory), SLUICE_CONSOLE_MODULES (node_modules with playwright-core),
// CHROMIUM (default /usr/bin/chromium). Exits non-zero at the first
// failed step, naming it.

import { createRequire } from 'node:module';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';

const env = (k, d) => {
  const v = process.env[k] ?? d;
  if (v === undefined) throw new Error(`${k} is not set`);
  return v;
};
const URL = env('SLUICE_URL');
const USER = env('SLUICE_USER');
const PASSWORD = env('SLUICE_PASSWORD');
const DB = env('SLUICE_DB');
const SHOTS = env('SLUICE_SCREENSHOTS');
const require = createRequire(join(env('SLUICE_CONSOLE_MODULES'), 'noop.js'));
const { chromium } = require('playwright-core');

mkdirSync(SHOTS, { recursive: true });
let step = 'starting';
const log = (m) => console.log(`[console] ${m}`);
const check = (ok, what) => {
  if (!ok) throw new Error(`check failed: ${what}`);
};

const browser = await chromium.launch({
  executablePath: env('CHROMIUM', '/usr/bin/chromium'),
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
    '--disable-component-update', '--disable-sync'],
});
const problems = [];
try {
  // ------------------------------------------------ authentication first
  step = 'the page asks for credentials';
  {
    const anon = await browser.newContext();
    const page = await anon.newPage();
    // The challenge reaches the browser (which would show its login
    // prompt; headless, playwright declines it and the navigation fails).
    const challenged = page.waitForResponse((r) => r.url() === `${URL}/ui/`, { timeout: 10000 });
    const outcome = await page.goto(`${URL}/ui/`).then((r) => `HTTP ${r.status()}`, (e) => String(e.message));
    check(/ERR_INVALID_AUTH_CREDENTIALS|HTTP 401/.test(outcome), `/ui/ without credentials is refused, got ${outcome}`);
    const res = await challenged;
    check(res.status() === 401, `/ui/ without credentials is 401, got ${res.status()}`);
    const challenge = res.headers()['www-authenticate'] || '';
    check(challenge.startsWith('Basic'), `a Basic challenge (the browser's login prompt), got "${challenge}"`);
    check(!(await page.locator('h1').count()), 'nothing of the console shown');
    await anon.close();
    const wrong = await browser.newContext({ httpCredentials: { username: USER, password: 'wrong' } });
    // Chromium gives the credentials, is refused again, and gives up.
    const refused = await (await wrong.newPage()).goto(`${URL}/ui/`).then((r) => `HTTP ${r.status()}`, (e) => String(e.message));
    check(/ERR_INVALID_AUTH_CREDENTIALS|HTTP 401/.test(refused), `wrong credentials are refused, got ${refused}`);
    await wrong.close();
    log('without or with wrong credentials: 401 with WWW-Authenticate: Basic');
  }

  const context = await browser.newContext({
    httpCredentials: { username: USER, password: PASSWORD },
    viewport: { width: 1280, height: 800 },
  });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[04]/.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  const shot = async (name, p = page) => {
    await p.screenshot({ path: join(SHOTS, `${name}.png`), fullPage: false });
    log(`screenshot ${name}.png`);
  };

  step = 'the console loads with its headers';
  const res = await page.goto(`${URL}/ui/`);
  check(res.status() === 200, `/ui/ is 200 with credentials, got ${res.status()}`);
  const headers = res.headers();
  check(headers['content-type'].startsWith('text/html'), `text/html, got ${headers['content-type']}`);
  check(/default-src 'none'/.test(headers['content-security-policy'] || '') && /script-src 'self'/.test(headers['content-security-policy']),
    `a CSP allowing only 'self', got ${headers['content-security-policy']}`);
  check(headers['cache-control'] === 'no-cache' && !!headers.etag, 'revalidated by ETag');
  for (const [file, type] of [['app.js', 'text/javascript'], ['console.css', 'text/css'], ['favicon.svg', 'image/svg+xml']]) {
    const r = await context.request.get(`${URL}/ui/${file}`);
    check(r.status() === 200 && r.headers()['content-type'].startsWith(type), `/ui/${file} is ${type}`);
  }
  check((await context.request.get(`${URL}/ui/nope.js`)).status() === 404, 'an unknown console file is 404');

  step = 'overview';
  await page.locator('h1', { hasText: 'Connectors' }).waitFor();
  const genRow = page.locator('tr[data-connector="orders-gen"]');
  await genRow.locator('.badge', { hasText: 'RUNNING' }).waitFor();
  // Records/s come from two scrapes of /metrics.
  await page.waitForFunction(() => {
    const cell = document.querySelector('tr[data-connector="orders-gen"] td:nth-child(5)');
    return cell && Number((cell.textContent || '').replace(/,/g, '')) > 0;
  }, null, { timeout: 30000 });
  await page.locator('.workers li').first().waitFor();
  await shot('overview');
  log('overview: orders-gen RUNNING with records/s in');

  // ------------------------------------------- create through the form
  step = 'create form: a validation error beside its key';
  await page.getByRole('link', { name: 'New connector' }).first().click();
  await page.locator('#connector-class').selectOption('jdbc-sink');
  await page.locator('#f-name').waitFor();
  const setKey = async (key, value) => {
    const id = `#f-${key.replace(/[^A-Za-z0-9_-]/g, '_')}`;
    if (await page.locator(id).count()) {
      const el = page.locator(id);
      if ((await el.evaluate((e) => e.tagName)) === 'SELECT') await el.selectOption(value);
      else await el.fill(value);
    } else {
      await page.locator('#new-key').fill(key);
      await page.locator('#new-value').fill(value);
      await page.getByRole('button', { name: 'Add key' }).click();
      await page.locator(id).waitFor();
    }
  };
  await setKey('name', 'orders-db');
  await setKey('connection.url', `jdbc:sqlite:${DB}`);
  await setKey('insert.mode', 'upsert');
  await setKey('pk.mode', 'record_value');
  await setKey('pk.fields', 'order_id');
  await setKey('auto.create', 'true');
  await setKey('errors.tolerance', 'all');
  await setKey('errors.deadletterqueue.topic.name', 'orders-dlq');
  await setKey('errors.deadletterqueue.context.headers.enable', 'true');
  await setKey('errors.deadletterqueue.topic.replication.factor', '1');
  await setKey('transforms', 'stamp');
  await setKey('transforms.stamp.type', 'org.apache.kafka.connect.transforms.InsertField$Value');
  await setKey('transforms.stamp.static.field', 'via');
  await setKey('transforms.stamp.static.value', 'console');
  await setKey('connection.pool.size', 'lots');
  // No `topics` yet, and a pool size that is not a number: the live
  // validation puts each error beside its key, both at once.
  const topicsError = page.locator('#f-topics-err');
  const poolError = page.locator('#f-connection_pool_size-err');
  await page.waitForFunction(() => ['#f-topics-err', '#f-connection_pool_size-err']
    .every((s) => (document.querySelector(s)?.textContent || '').length > 0));
  const topicsMessage = await topicsError.textContent();
  check(/required/.test(topicsMessage), `the error beside topics says it is required: "${topicsMessage}"`);
  check((await page.locator('#f-topics').getAttribute('aria-invalid')) === 'true', 'topics is marked invalid');
  const poolMessage = await poolError.textContent();
  check(/lots/.test(poolMessage), `the error beside connection.pool.size names its value: "${poolMessage}"`);
  check((await page.locator('#f-connection_pool_size').getAttribute('aria-invalid')) === 'true', 'connection.pool.size is marked invalid');
  // Three: the missing topics is reported on `topics` and on
  // `topics.regex` (either would do), as Kafka Connect reports it.
  check((await page.locator('#validation-summary').getAttribute('data-errors')) === '3', 'the summary counts every error');
  // Submitting anyway shows the API's own 400.
  await page.getByRole('button', { name: 'Create connector' }).click();
  await page.locator('#form-errors', { hasText: 'HTTP 400' }).waitFor();
  const apiError = await page.locator('#form-errors').textContent();
  check(/topics/.test(apiError), `the API's 400 names the key: "${apiError}"`);
  await shot('create-validation-error');
  log(`validation error shown: "${topicsMessage.trim()}"; the API's 400: "${apiError.trim()}"`);

  step = 'create form: fixed, the raw JSON mode agrees, created';
  await setKey('connection.pool.size', '');
  await setKey('topics', 'orders');
  await page.locator('#validation-summary[data-errors="0"]').waitFor();
  check(!(await topicsError.textContent()) && !(await poolError.textContent()), 'the errors are gone once fixed');
  await page.getByRole('button', { name: 'Edit as JSON' }).click();
  const raw = JSON.parse(await page.locator('#raw-json').inputValue());
  check(raw.name === 'orders-db' && raw.config.topics === 'orders' && raw.config['connector.class'] === 'jdbc-sink', 'the JSON mode shows the form\'s config');
  await page.getByRole('button', { name: 'Back to the form' }).click();
  await page.getByRole('button', { name: 'Create connector' }).click();
  await page.waitForURL(/#\/connectors\/orders-db$/);

  // --------------------------------------------------- connector page
  step = 'the connector reaches RUNNING with records arriving';
  await page.locator('h1', { hasText: 'orders-db' }).waitFor();
  await page.locator('[data-state="RUNNING"]').waitFor({ timeout: 60000 });
  await page.waitForFunction(() => Number((document.querySelector('[data-stat="Records out"]')?.textContent || '0').replace(/,/g, '')) > 0,
    null, { timeout: 60000 });
  await page.waitForFunction(() => document.querySelectorAll('.chart path.line').length >= 2, null, { timeout: 30000 });
  const config = await page.locator('table.config').textContent();
  check(config.includes('jdbc:sqlite:') && config.includes('stamp'), 'the config is shown');
  await page.locator('.badge', { hasText: 'RUNNING' }).nth(1).waitFor(); // the task
  // Read again as records flow (it was read once, before the first record).
  await page.locator('p', { hasText: /^orders$/ }).waitFor({ timeout: 30000 });
  await shot('connector');
  log('orders-db RUNNING, records written, charts drawn');

  step = 'pause (by keyboard), cancel leaves it, resume';
  const pause = page.getByRole('button', { name: 'Pause', exact: true });
  await pause.focus();
  await page.keyboard.press('Enter');
  const dialog = page.locator('dialog#confirm');
  await dialog.waitFor();
  check(await page.evaluate(() => document.activeElement?.id === 'confirm-cancel'), 'the dialog opens with focus on Cancel');
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'hidden' });
  check(await page.evaluate(() => document.activeElement?.textContent === 'Pause'), 'focus returns to the button');
  check((await page.locator('[data-state]').getAttribute('data-state')) === 'RUNNING', 'Escape cancelled: still RUNNING');
  // Dismissed and opened again in one moment (Escape, then Enter at once):
  // the first dialog's late close event must not close the second.
  await page.keyboard.press('Enter');
  await dialog.waitFor();
  const reopened = await page.evaluate(async () => {
    const d = /** @type {HTMLDialogElement} */ (document.getElementById('confirm'));
    const again = [...document.querySelectorAll('.toolbar button')].find((b) => b.textContent === 'Pause');
    d.requestClose();
    /** @type {HTMLButtonElement} */ (again).click();
    await new Promise((r) => setTimeout(r, 200));
    return d.open;
  });
  check(reopened, 'a dialog opened again as the last one closes stays open');
  await page.keyboard.press('Escape');
  await dialog.waitFor({ state: 'hidden' });
  check((await page.locator('[data-state]').getAttribute('data-state')) === 'RUNNING', 'still RUNNING');
  await page.keyboard.press('Enter');
  await dialog.waitFor();
  await page.keyboard.press('Tab');
  check(await page.evaluate(() => document.activeElement?.id === 'confirm-ok'), 'Tab reaches the confirm button');
  await shot('confirm-pause');
  await page.keyboard.press('Enter');
  await page.locator('[data-state="PAUSED"]').waitFor();
  log('paused');
  await page.getByRole('button', { name: 'Resume', exact: true }).click();
  await dialog.getByRole('button', { name: 'Resume' }).click();
  await page.locator('[data-state="RUNNING"]').waitFor();
  log('resumed');

  step = 'restart with includeTasks';
  await page.getByRole('button', { name: 'Restart…' }).click();
  await page.locator('#restart-include-tasks').check();
  await dialog.getByRole('button', { name: 'Restart' }).click();
  await page.locator('[data-state="RUNNING"]').waitFor({ timeout: 60000 });
  log('restarted with its tasks');

  // ------------------------------------------------ poison records, DLQ
  step = 'poison records: a datagen source through the JSON mode';
  await page.goto(`${URL}/ui/#/new`);
  await page.locator('#connector-class').selectOption('datagen');
  await page.locator('#f-topic').waitFor();
  await page.getByRole('button', { name: 'Edit as JSON' }).click();
  await page.locator('#raw-json').fill(JSON.stringify({
    name: 'poison-gen',
    config: { 'connector.class': 'datagen', topic: 'orders', 'poison.ratio': '1', count: '5', rate: '0', seed: '7' },
  }));
  await page.getByRole('button', { name: 'Create connector' }).click();
  await page.waitForURL(/#\/connectors\/poison-gen$/);
  await page.locator('[data-state="RUNNING"]').waitFor({ timeout: 60000 });
  log('poison-gen created: 5 records that are not JSON');

  step = 'the dead letters, grouped, with headers decoded';
  await page.goto(`${URL}/ui/#/connectors/orders-db/dlq`);
  let total = 0;
  for (let i = 0; i < 60 && total < 5; i++) {
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.locator('#dlq-status[data-loading="false"]').waitFor();
    total = Number((await page.locator('[data-stat="total"]').textContent()).replace(/,/g, ''));
    if (total < 5) await page.waitForTimeout(1000);
  }
  check(total === 5, `5 dead letters, got ${total}`);
  const group = page.locator('table.groups tbody tr').first();
  const [klass, stage] = [await group.getAttribute('data-error-class'), await group.getAttribute('data-stage')];
  check(!!klass && !!stage && (await group.locator('td.n').textContent()) === '5', `one group of 5: ${klass} at ${stage}`);
  const sample = page.locator('details.sample').first();
  await sample.locator('summary').click();
  const headersText = await sample.locator('table.headers').textContent();
  check(headersText.includes('__connect.errors.topic') && headersText.includes('orders'), 'the sample\'s headers are decoded');
  check(headersText.includes('__connect.errors.exception.message'), 'with the error message header');
  await shot('dead-letters');
  log(`DLQ: 5 x ${klass} at ${stage}, headers decoded`);

  step = 'replay: dry run first, then the replay';
  const replayButton = page.getByRole('button', { name: 'Replay…', exact: true });
  check(await replayButton.isDisabled(), 'the replay waits for a dry run');
  await group.getByRole('button', { name: 'Replay this group…' }).click();
  await page.getByRole('button', { name: 'Dry run' }).click();
  await page.locator('#replay-result[data-dry-run="true"]').waitFor();
  check((await page.locator('#replay-result').getAttribute('data-replayed')) === '5', 'the dry run would replay 5');
  check(await replayButton.isEnabled(), 'the replay is enabled after the dry run');
  await replayButton.click();
  await dialog.getByRole('button', { name: 'Replay' }).click();
  await page.locator('#replay-result[data-dry-run="false"]').waitFor();
  check((await page.locator('#replay-result').getAttribute('data-replayed')) === '5', `replayed 5, got ${await page.locator('#replay-result').getAttribute('data-replayed')}: ${await page.locator('#replay-result').textContent()}`);
  // Still not JSON: they come back, marked as replayed before.
  let again = 0;
  for (let i = 0; i < 60 && again < 5; i++) {
    await page.waitForTimeout(1000);
    await page.getByRole('button', { name: 'Refresh' }).click();
    await page.locator('#dlq-status[data-loading="false"]').waitFor();
    again = Number((await page.locator('[data-stat="failed-again"]').textContent()).replace(/,/g, ''));
  }
  check(again === 5, `the 5 replayed records failed again and are shown so, got ${again}`);
  await shot('dead-letters-replayed');
  log('replayed 5 (dry run first); they failed again, as they are still not JSON');

  // ----------------------------------------------------- transforms
  step = 'try the transform chain on pasted records';
  await page.goto(`${URL}/ui/#/connectors/orders-db/transforms`);
  await page.locator('#sample-records').fill('{"key": "9", "value": {"order_id": 9, "status": "new"}}\n{"value": "not json"}');
  await page.getByRole('button', { name: 'Run the transforms' }).click();
  await page.locator('#transform-output section').nth(1).waitFor();
  const first = await page.locator('#transform-output section').nth(0).textContent();
  check(first.includes('"via": "console"') && first.includes('"order_id": 9'), `the stamp transform added its field: ${first}`);
  const second = page.locator('#transform-output section').nth(1);
  check((await second.getAttribute('data-result')) === 'error' && (await second.textContent()).includes('stamp'), 'the second record\'s error names the transform');
  await shot('transforms');
  log('transforms: the output of the chain and an error naming its transform');

  // ----------------------------------------------------- phone width
  step = 'readable at a phone\'s width';
  const phone = await browser.newContext({ httpCredentials: { username: USER, password: PASSWORD }, viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true });
  const small = await phone.newPage();
  await small.goto(`${URL}/ui/`);
  await small.locator('tr[data-connector="orders-db"]').waitFor();
  await shot('overview-phone', small);
  for (const hash of ['#/connectors/orders-db', '#/new', '#/connectors/orders-db/dlq']) {
    await small.goto(`${URL}/ui/${hash}`);
    await small.locator('h1').waitFor();
    await small.waitForTimeout(500);
    const width = await small.evaluate(() => document.documentElement.scrollWidth);
    check(width <= 392, `${hash} fits 390 px (scroll width ${width})`);
  }
  await shot('dead-letters-phone', small);
  await phone.close();
  log('390 px: no page-wide horizontal scrolling');

  // ------------------------------------------------------ delete
  step = 'delete the connector';
  await page.goto(`${URL}/ui/#/connectors/orders-db`);
  await page.getByRole('button', { name: 'Delete…' }).click();
  await dialog.getByRole('button', { name: 'Delete' }).click();
  await page.waitForURL(/#\/$/);
  await page.locator('tr[data-connector="orders-gen"]').waitFor();
  await page.waitForFunction(() => !document.querySelector('tr[data-connector="orders-db"]'));
  const api = await context.request.get(`${URL}/connectors`);
  check(!(await api.json()).includes('orders-db'), 'the API no longer lists it');
  await shot('overview-after-delete');
  log('orders-db deleted');

  check(problems.length === 0, `no errors in the page: ${problems.join('; ')}`);
  await context.close();
  console.log('[console] all steps passed');
} catch (e) {
  for (const c of browser.contexts()) {
    for (const p of c.pages()) await p.screenshot({ path: join(SHOTS, 'failure.png'), fullPage: true }).catch(() => {});
  }
  console.error(`[console] FAILED at step "${step}": ${e.stack || e}`);
  if (problems.length) console.error(`[console] page problems: ${problems.join('\n')}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
