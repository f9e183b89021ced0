//! A real browser for tests: Debian's `chromium`, driven by npm's `playwright-core`. Both are
//! installed the first time a test needs them (`apt-get install chromium` when the test runs as
//! root; `playwright-core` into `target/test-verifiers/browser`).
//!
//! Where Chromium cannot be installed the browser test is skipped, loudly: [`Skipped`] names
//! the reason, and the test writes it to `target/test-verifiers/BROWSER_SKIPPED`, which
//! `cargo xtask test` prints at the end of the run.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::storefront::{Drive, RUN_PLAN, browser_bundle, plan, write_plan};
use crate::verifiers::{run, verifiers_dir};

const PLAYWRIGHT: &str = "playwright-core@1.65";
const CHROMIUM: &str = "/usr/bin/chromium";

/// `launch(chromiumPath)`: headless Chromium as every browser script here starts it.
const LAUNCH_MODULE: &str = r#"
const { chromium } = require('playwright-core');
module.exports = (chromiumPath) => chromium.launch({
  executablePath: chromiumPath,
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
         '--disable-background-networking', '--no-first-run'],
});
"#;

/// Signs in on Mercer's authorize page, approves, and reports where the browser ended up.
/// JavaScript is off in the page's context: the page must work without it.
const SIGN_IN_SCRIPT: &str = r#"
const launch = require('./launch.js');
const [authorizeUrl, email, password, chromiumPath] = process.argv.slice(2);
(async () => {
  const browser = await launch(chromiumPath);
  try {
    const context = await browser.newContext({ javaScriptEnabled: false });
    const page = await context.newPage();
    const first = await page.goto(authorizeUrl);
    const heading = await page.textContent('h1');
    await page.fill('#email', email);
    await page.fill('#password', password);
    await Promise.all([
      page.waitForURL((url) => url.pathname === '/callback', { timeout: 15000 }),
      page.click('button[value=approve]'),
    ]);
    console.log(JSON.stringify({ status: first.status(), heading, finalUrl: page.url(),
                                 body: await page.textContent('body') }));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

/// The operator console with JavaScript off: a staff member signs in, finds the failed delivery
/// of `topic`, reads its attempts, resends it (confirming) and reloads until the new attempt
/// shows; retries the event set aside; rotates the connector secret; opens a checkout and the
/// webhooks it fired; finds subscriptions, customers, orders and boxes, opens the cancel form,
/// saves the dunning policy; reads the audit log; posts a form without its CSRF token; at 390 px
/// wide measures the new pages (no sideways scroll, every control on screen); then another
/// shop's staff member looks. A screenshot of each page goes to `shots`.
const CONSOLE_SCRIPT: &str = r#"
const path = require('path');
const launch = require('./launch.js');
const [base, shop, email, password, otherShop, otherEmail, topic, shots, chromiumPath] =
  process.argv.slice(2);
(async () => {
  const browser = await launch(chromiumPath);
  const out = {};
  try {
    const context = await browser.newContext({ javaScriptEnabled: false,
                                               viewport: { width: 1100, height: 760 } });
    const page = await context.newPage();
    const shot = (name) => page.screenshot({ path: path.join(shots, name + '.png'), fullPage: true });
    const navigating = (p, action) => Promise.all([p.waitForNavigation(), action]);
    const signIn = async (p, s, e) => {
      await p.goto(base + '/console/sign-in');
      await p.fill('#shop', s);
      await p.fill('#email', e);
      await p.fill('#password', password);
      await navigating(p, p.click('button[type=submit]'));
      return p.url();
    };
    await page.goto(base + '/console/sign-in');
    await shot('sign-in');
    out.afterSignIn = await signIn(page, shop, email);
    out.cookie = (await context.cookies()).find((c) => c.name === 'mercer_console') || null;
    await shot('overview');
    out.overview = await page.textContent('main');

    await page.goto(base + '/console/webhooks');
    await page.selectOption('#topic', topic);
    await page.selectOption('#status', 'failed');
    await navigating(page, page.click('form.filters button[type=submit]'));
    out.listUrl = page.url();
    const rows = page.locator('#messages tbody tr');
    out.rowTopics = await page.locator('#messages tbody tr td:nth-child(2)').allTextContents();
    await shot('webhooks');
    await navigating(page, rows.first().locator('a').click());
    out.messageId = (await page.textContent('h1')).trim();
    out.attemptsBefore = await page.locator('#attempts tbody tr').count();
    out.firstAnswer = (await page.locator('#attempts tbody tr td:nth-child(3)').first().textContent()).trim();
    await shot('message');
    await navigating(page, page.click('form[action$="/resend"] button'));
    await shot('confirm');
    await navigating(page, page.click('main form button.primary'));
    out.resentNotice = (await page.locator('#notice').count()) ? (await page.textContent('#notice')).trim() : null;
    out.attemptsAfter = out.attemptsBefore;
    for (let i = 0; i < 60 && out.attemptsAfter <= out.attemptsBefore; i++) {
      await page.waitForTimeout(250);
      await page.reload();
      out.attemptsAfter = await page.locator('#attempts tbody tr').count();
    }
    out.statusAfter = (await page.textContent('#message-status')).trim();
    await shot('message-resent');

    await page.goto(base + '/console/connector');
    await shot('connector');
    out.setAsideError = (await page.locator('#set-aside tbody tr td:nth-child(5)').first().textContent()).trim();
    await navigating(page, page.click('#set-aside form button'));
    await navigating(page, page.click('main form button.primary'));
    out.setAsideCleared = false;
    for (let i = 0; i < 120 && !out.setAsideCleared; i++) {
      out.setAsideCleared = (await page.locator('#no-set-aside').count()) > 0;
      if (!out.setAsideCleared) { await page.waitForTimeout(250); await page.reload(); }
    }

    await navigating(page, page.click('#secrets form[action$="/connector/rotate"] button'));
    await navigating(page, page.click('main form button.primary'));
    out.secretShown = (await page.textContent('#secret')).trim();
    await shot('secret');

    await page.goto(base + '/console/checkouts');
    await shot('checkouts');
    await navigating(page, page.click('#checkouts tbody tr a'));
    out.checkoutMessages = await page.locator('#messages tbody tr').count();
    await shot('checkout');

    await page.goto(base + '/console/jobs');
    out.jobs = await page.textContent('main');
    await shot('jobs');

    await page.goto(base + '/console/subscriptions?view=due');
    await shot('subscriptions-due');
    await navigating(page, page.click('#due tbody tr a'));
    out.subscriptionHeading = (await page.textContent('h1')).trim();
    await shot('subscription');
    const urls = { subscription: page.url() };
    await navigating(page, page.click('#actions form[action$="/cancel"] button'));
    await page.selectOption('#reason', { index: 1 });
    await page.fill('#comment', 'Moving abroad');
    await shot('cancel');
    urls.cancelFrom = urls.subscription;

    await page.goto(base + '/console/subscriptions');
    await page.fill('#email', 'due@example.test');
    await navigating(page, page.click('form.filters button[type=submit]'));
    out.searchRows = await page.locator('#subscriptions tbody tr').count();
    urls.subscriptions = page.url();
    await shot('subscriptions');

    await page.goto(base + '/console/customers');
    await shot('customers');
    await navigating(page, page.click('#customers tbody tr a'));
    out.customerEmail = (await page.textContent('#customer-email')).trim();
    urls.customer = page.url();
    await shot('customer');

    await page.goto(base + '/console/orders');
    out.orderRows = await page.locator('#orders tbody tr').count();
    await shot('orders');

    await page.goto(base + '/console/boxes');
    await shot('boxes');
    await navigating(page, page.click('#boxes tbody tr a'));
    out.boxSlots = await page.locator('#slots tbody tr').count();
    urls.box = page.url();
    await shot('box');

    await page.goto(base + '/console/settings');
    await page.fill('#retry_intervals', '3600, 86400');
    await navigating(page, page.click('#dunning-form button[type=submit]'));
    out.settingsNotice = (await page.locator('#notice').count()) ? (await page.textContent('#notice')).trim() : null;
    await shot('settings');

    await page.goto(base + '/console/audit');
    out.audit = await page.locator('table tbody tr').allTextContents();
    await shot('audit');

    const forged = await context.request.post(
      base + '/console/webhooks/messages/' + out.messageId + '/resend',
      { form: { confirm: 'yes' }, maxRedirects: 0 });
    out.forgedStatus = forged.status();
    out.forgedBody = await forged.text();

    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(base + '/console/webhooks?status=failed');
    await shot('webhooks-phone');
    // At 390 px: no sideways scroll of the page, and every control of its forms on screen.
    out.fits = {};
    const fits = (name) => page.evaluate(() => {
      const width = window.innerWidth;
      const controls = document.querySelectorAll(
        'form input:not([type=hidden]), form select, form textarea, form button');
      const outside = [...controls].filter((control) => {
        const box = control.getBoundingClientRect();
        return box.width > 0 && (box.left < 0 || box.right > width);
      }).map((control) => control.id || control.name || control.textContent.trim());
      return { scrollWidth: document.scrollingElement.scrollWidth, innerWidth: width,
               controls: controls.length, outside };
    }).then((seen) => { out.fits[name] = seen; });
    for (const [name, url] of [['subscriptions', urls.subscriptions],
                               ['subscriptions-due', base + '/console/subscriptions?view=due'],
                               ['subscription', urls.subscription],
                               ['customers', base + '/console/customers'],
                               ['customer', urls.customer],
                               ['orders', base + '/console/orders'],
                               ['boxes', base + '/console/boxes'],
                               ['box', urls.box],
                               ['checkouts', base + '/console/checkouts'],
                               ['settings', base + '/console/settings']]) {
      await page.goto(url);
      await fits(name);
      await shot(name + '-phone');
    }
    await page.goto(urls.subscription);
    await navigating(page, page.click('#actions form[action$="/cancel"] button'));
    await fits('cancel');
    await shot('cancel-phone');

    const other = await browser.newContext({ javaScriptEnabled: false });
    const otherPage = await other.newPage();
    out.otherAfterSignIn = await signIn(otherPage, otherShop, otherEmail);
    await otherPage.goto(base + '/console/webhooks');
    out.otherWebhooks = await otherPage.textContent('main');
    out.otherMessageStatus = (await otherPage.goto(base + '/console/webhooks/messages/' + out.messageId)).status();
    await otherPage.goto(base + '/console/audit');
    out.otherAudit = await otherPage.textContent('main');
    console.log(JSON.stringify(out));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

/// The subscriber portal with JavaScript off, as the plan (JSON, first argument) says: the
/// subscriber follows the entry link, reads the list, opens a subscription and takes every
/// action through its forms (skip, pause until a date, resume, a quantity, how often, the
/// address), chooses a box's contents (first above the size's maximum, refused), fills the cancel
/// form; then at 390 px wide the same pages, a refused and a saved box choice, and the cancel;
/// last, another customer's subscription. After each action it reads the subscription (and the
/// customer's box selections) from the API with the plan's token, for the test to check. PNGs
/// go to `plan.shots` as `{desktop|phone}-{page}.png`.
const PORTAL_SCRIPT: &str = r#"
const path = require('path');
const launch = require('./launch.js');
const [planJson, chromiumPath] = process.argv.slice(2);
const plan = JSON.parse(planJson);
(async () => {
  const browser = await launch(chromiumPath);
  const out = { actions: {}, fits: {} };
  try {
    const context = await browser.newContext({ javaScriptEnabled: false,
                                               viewport: { width: 1280, height: 900 } });
    const page = await context.newPage();
    let device = 'desktop';
    const file = (name) => path.join(plan.shots, device + '-' + name + '.png');
    const shot = (name) => page.screenshot({ path: file(name), fullPage: true });
    const shotOf = (selector, name) => page.locator(selector).screenshot({ path: file(name) });
    // The page from its top down to the last element `selector` matches.
    const shotDownTo = async (selector, name) => {
      const bottom = await page.locator(selector).last().evaluate(
        (element) => element.getBoundingClientRect().bottom + window.scrollY);
      await page.screenshot({ path: file(name), fullPage: true,
        clip: { x: 0, y: 0, width: page.viewportSize().width, height: Math.ceil(bottom) + 16 } });
    };
    const text = async (selector) => (await page.textContent(selector)).trim();
    const api = async (rest) => {
      const answer = await fetch(plan.api + rest, { headers: { Authorization: 'Bearer ' + plan.token } });
      return answer.json();
    };
    const subscription = async (id) =>
      (await api('/subscriptions/v1/shops/' + plan.shop + '/subscriptions/' + id)).subscription;
    const selections = async () =>
      (await api('/box_builder/v1/shops/' + plan.shop + '/customers/' + plan.customer + '/selections')).data.selections;
    // No horizontal scroll, and every control of the page's forms inside the viewport.
    const fits = (name) => page.evaluate(() => {
      const width = window.innerWidth;
      const controls = document.querySelectorAll(
        'form input:not([type=hidden]), form select, form textarea, form button');
      const outside = [...controls].filter((control) => {
        const box = control.getBoundingClientRect();
        return box.left < 0 || box.right > width;
      }).map((control) => control.id || control.name || control.textContent.trim());
      return { scrollWidth: document.scrollingElement.scrollWidth, innerWidth: width,
               controls: controls.length, outside };
    }).then((seen) => { out.fits[device + '-' + name] = seen; });
    // Follows a link or posts a form by clicking `selector`: the first answer's status (the
    // form's 303, or the page's own), its Location, where the browser ended and that page's status.
    const follow = async (selector) => {
      const [response] = await Promise.all([page.waitForNavigation(), page.click(selector)]);
      const redirected = response.request().redirectedFrom();
      const first = redirected ? await redirected.response() : response;
      return { status: first.status(), location: first.headers()['location'] || null,
               url: page.url(), landed: response.status() };
    };
    // Takes the action of `button` on subscription `id`; then what the API shows.
    const act = async (name, id, button) => {
      const before = await subscription(id);
      const answer = await follow(button);
      out.actions[name] = { ...answer, before, after: await subscription(id),
                            selections: await selections(),
                            alerts: await page.locator('[role=alert], .error').allTextContents() };
      return answer;
    };
    const open = async (id) => {
      await page.goto(plan.home);
      await follow('#subscription-' + id + ' h2 a');
    };

    const entered = await page.goto(plan.entry);
    const entry = entered.request().redirectedFrom();
    out.entry = { status: entry ? (await entry.response()).status() : entered.status(),
                  url: page.url(), landed: entered.status() };
    out.cookie = (await context.cookies()).find((c) => c.name === 'mercer_portal') || null;
    out.greeting = await text('#greeting');
    out.listed = await page.locator('#subscriptions > li').evaluateAll(
      (items) => items.map((item) => item.id));
    await shot('list');

    await follow('#subscription-' + plan.plain.id + ' h2 a');
    out.opened = { url: page.url(), title: await text('#title'), greeting: await text('#greeting') };
    await shot('subscription');
    await act('skip', plan.plain.id, '#skip');
    await page.fill('#resume_on', plan.resume_on);
    await act('pause', plan.plain.id, '#pause');
    out.pausedStatus = await text('#status');
    await act('resume', plan.plain.id, '#resume');
    const quantity = '#quantity-' + plan.plain.line;
    await page.fill(quantity + '-quantity', '2');
    await act('quantity', plan.plain.id, quantity + ' button[type=submit]');
    await page.selectOption('#interval_id', String(plan.plain.interval));
    await act('frequency', plan.plain.id, '#frequency-form button[type=submit]');
    for (const [name, value] of Object.entries(plan.address)) {
      await page.fill('#address-' + name, value);
    }
    await act('address', plan.plain.id, '#address-form button[type=submit]');
    out.shownAddress = await text('#shipping-address');

    // A box: its upcoming orders, a choice above the size's maximum, then one that fits.
    const box = async (n, [carrots, kale], name) => {
      const form = '#box-' + plan.box.line + '-' + n;
      await page.selectOption(form + '-size', String(plan.box.size));
      await page.fill(form + '-product-' + plan.box.carrot, String(carrots));
      await page.fill(form + '-product-' + plan.box.kale, String(kale));
      await act(name, plan.box.id, form + ' button[type=submit]');
      out.actions[name].section = await text(form + '-section');
      const error = page.locator(form + '-quantity-error');
      out.actions[name].fieldError = (await error.count()) ? (await error.textContent()).trim() : null;
      out.actions[name].describedBy = await page.locator(form + ' fieldset').getAttribute('aria-describedby');
      out.actions[name].values = await page.locator(form + ' input[type=number]').evaluateAll(
        (inputs) => inputs.map((input) => input.value));
      return form;
    };
    await open(plan.box.id);
    out.boxBefore = await text('#box-' + plan.box.line + '-0-section');
    const refused = await box(0, plan.box.too_many, 'refused');
    await shotOf(refused + '-section', 'refused');
    await box(0, plan.box.chosen, 'box');
    out.boxAfter = await text('#box-' + plan.box.line + '-0-section');
    await shotDownTo('section[id^="box-"]', 'box');

    await open(plan.plain.id);
    await page.selectOption('#reason', plan.reason);
    await page.fill('#comment', plan.comment);
    await shotOf('#cancel', 'cancel');

    device = 'phone';
    await page.setViewportSize({ width: 390, height: 844 });
    await page.goto(plan.home);
    await fits('list');
    await shot('list');
    await open(plan.plain.id);
    await fits('subscription');
    await shot('subscription');
    await open(plan.box.id);
    await fits('box');
    await shotDownTo('section[id^="box-"]', 'box');
    const refusedOnPhone = await box(1, plan.box.too_many, 'refused_on_phone');
    await fits('refused');
    await shotOf(refusedOnPhone + '-section', 'refused');
    await box(1, plan.box.chosen, 'box_on_phone');
    await open(plan.plain.id);
    await page.selectOption('#reason', plan.reason);
    await page.fill('#comment', plan.comment);
    await fits('cancel');
    await shotOf('#cancel', 'cancel');
    await act('cancel', plan.plain.id, '#cancel-subscription');
    out.cancelledStatus = await text('#status');

    const other = await page.goto(plan.other);
    out.other = { status: other.status(), heading: await text('h1'), body: await text('main') };
    await fits('other');
    console.log(JSON.stringify(out));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

/// Serves a shop's page on `http://localhost:{port}` (a local server of this script), which
/// loads the vendor's library bundled for browsers and runs the plan with it against Mercer on
/// `http://127.0.0.1:{port}`: another origin, so Chromium applies CORS to every call the library
/// makes (`mode: 'cors'`, `credentials: 'include'`), preflights included. The page also tries
/// `probe` (`{url, token}`: an API-token route, which must not answer other origins) and reports
/// whether Chromium let the page read it. Prints `{origin, ran, probe}`.
const CHECKOUT_SCRIPT: &str = r#"
const launch = require('./launch.js');
const http = require('http');
const fs = require('fs');
const [bundlePath, runPlanPath, planPath, chromiumPath] = process.argv.slice(2);
const plan = JSON.parse(fs.readFileSync(planPath, 'utf8'));
const scripts = { '/library.js': fs.readFileSync(bundlePath, 'utf8'),
                  '/run-plan.js': fs.readFileSync(runPlanPath, 'utf8') };
const inline = (value) => JSON.stringify(value).replace(/</g, '\\u003c');
const page = `<!doctype html><html><head><meta charset="utf-8"><title>Shop checkout</title>
<script src="/library.js"></script>
<script src="/run-plan.js"></script>
<script>
const PLAN = ${inline(plan)};
async function probe() {
  try {
    const answer = await fetch(PLAN.probe.url, { mode: 'cors', credentials: 'include',
      headers: { 'Authorization': 'Bearer ' + PLAN.probe.token, 'Accept': 'application/json' } });
    return 'read ' + answer.status;
  } catch (error) {
    return 'blocked: ' + error.name;
  }
}
window.finished = (async () => ({ origin: location.origin, ran: await runPlan(CheckoutLibrary, PLAN),
                                  probe: await probe() }))();
</script></head><body>checkout</body></html>`;
const site = http.createServer((request, response) => {
  if (scripts[request.url] !== undefined) {
    response.writeHead(200, { 'Content-Type': 'text/javascript' });
    response.end(scripts[request.url]);
  } else {
    response.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    response.end(page);
  }
});
site.listen(0, '127.0.0.1', async () => {
  const browser = await launch(chromiumPath);
  try {
    const tab = await browser.newPage();
    const errors = [];
    tab.on('pageerror', (error) => errors.push(String(error)));
    await tab.goto(`http://localhost:${site.address().port}/`);
    const finished = await tab.evaluate(() => window.finished);
    console.log(JSON.stringify({ ...finished, errors }));
  } finally {
    await browser.close();
    site.close();
  }
}).on('error', (error) => { console.error(error); process.exit(1); });
"#;

/// Opens the API reference page with every request off loopback refused (and recorded), and
/// reports what rendered: the operations' summaries, the example bodies of Create a subscription
/// and Create a destination, the requests refused, the content security policy's refusals and the
/// page's errors.
const DOCS_SCRIPT: &str = r#"
const launch = require('./launch.js');
const [docsUrl, chromiumPath] = process.argv.slice(2);
const LOOPBACK = new Set(['127.0.0.1', 'localhost', '[::1]']);
(async () => {
  const browser = await launch(chromiumPath);
  try {
    const context = await browser.newContext();
    const offLoopback = [];
    await context.route('**/*', (route) => {
      const url = new URL(route.request().url());
      if (['http:', 'https:', 'ws:', 'wss:'].includes(url.protocol) && !LOOPBACK.has(url.hostname)) {
        offLoopback.push(url.href);
        return route.abort('internetdisconnected');
      }
      return route.continue();
    });
    const page = await context.newPage();
    const refused = [];
    const errors = [];
    page.on('console', (message) => {
      if (/Content Security Policy|Refused to/.test(message.text())) refused.push(message.text());
    });
    page.on('pageerror', (error) => errors.push(String(error)));
    const answer = await page.goto(docsUrl);
    await page.waitForSelector('.opblock-summary', { timeout: 20000 });
    const summaries = await page.locator('.opblock-summary-description').allTextContents();
    const title = await page.title();
    const examples = {};
    for (const summary of ['Create a subscription', 'Create a destination']) {
      const operation = page.locator('.opblock', {
        has: page.locator('.opblock-summary-description', { hasText: new RegExp(`^${summary}$`) }),
      }).first();
      await operation.locator('.opblock-summary').first().click();
      const example = operation.locator('.opblock-body .highlight-code').first();
      await example.waitFor({ timeout: 20000 });
      examples[summary] = await example.textContent();
    }
    console.log(JSON.stringify({ status: answer.status(), title, summaries, examples,
                                 offLoopback, refused, errors }));
  } finally {
    await browser.close();
  }
})().catch((error) => { console.error(error); process.exit(1); });
"#;

/// Why the browser test could not run.
#[derive(Debug, Clone)]
pub struct Skipped(pub String);

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

/// Installs Chromium from Debian when it is missing. `Err` only when it cannot be installed.
fn ensure_chromium() -> Result<PathBuf, Skipped> {
    let path = PathBuf::from(CHROMIUM);
    if path.exists() {
        return Ok(path);
    }
    if !is_root() {
        return Err(Skipped(format!(
            "{CHROMIUM} is missing and the tests do not run as root, so `apt-get install chromium` cannot run"
        )));
    }
    let apt = |args: &[&str], what: &str| {
        run(
            Command::new("apt-get")
                .args(args)
                .env("DEBIAN_FRONTEND", "noninteractive"),
            what,
        )
    };
    apt(&["update", "-qq"], "apt-get update")
        .and_then(|()| {
            apt(
                &[
                    "install",
                    "-y",
                    "-qq",
                    "--no-install-recommends",
                    "chromium",
                ],
                "apt-get install chromium",
            )
        })
        .map_err(Skipped)?;
    if path.exists() {
        Ok(path)
    } else {
        Err(Skipped(format!(
            "apt-get installed chromium but {CHROMIUM} is not there"
        )))
    }
}

pub struct Browser {
    chromium: PathBuf,
    script: PathBuf,
    console_script: PathBuf,
    checkout_script: PathBuf,
    node_modules: PathBuf,
}

/// Chromium and playwright-core, installed once per test run. Installing playwright-core
/// failing is a failure (npm is always there), not a skip.
pub fn browser() -> Result<&'static Browser, Skipped> {
    static BROWSER: OnceLock<Result<Browser, Skipped>> = OnceLock::new();
    BROWSER
        .get_or_init(|| {
            let chromium = ensure_chromium()?;
            let dir = verifiers_dir().join("browser");
            std::fs::create_dir_all(&dir).expect("create the browser directory");
            if !dir
                .join("node_modules/playwright-core/package.json")
                .exists()
            {
                run(
                    Command::new("npm")
                        .args(["install", "--no-audit", "--no-fund", "--prefix"])
                        .arg(&dir)
                        .arg(PLAYWRIGHT)
                        // Never download a browser build: Debian's Chromium is the one used.
                        .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1"),
                    "npm install playwright-core",
                )
                .unwrap_or_else(|error| panic!("{error}"));
            }
            let script = dir.join("sign-in.js");
            std::fs::write(&script, SIGN_IN_SCRIPT).expect("write the browser script");
            let console_script = dir.join("console.js");
            std::fs::write(&console_script, CONSOLE_SCRIPT).expect("write the console script");
            let checkout_script = dir.join("checkout.js");
            std::fs::write(&checkout_script, CHECKOUT_SCRIPT).expect("write the checkout script");
            std::fs::write(dir.join("run-plan.js"), RUN_PLAN).expect("write runPlan");
            std::fs::write(dir.join("launch.js"), LAUNCH_MODULE).expect("write launch");
            std::fs::write(dir.join("docs.js"), DOCS_SCRIPT).expect("write the docs script");
            std::fs::write(dir.join("portal.js"), PORTAL_SCRIPT).expect("write the portal script");
            Ok(Browser {
                chromium,
                script,
                console_script,
                checkout_script,
                node_modules: dir.join("node_modules"),
            })
        })
        .as_ref()
        .map_err(Clone::clone)
}

/// Records a skip where `cargo xtask test` will find it and print it.
pub fn report_skip(skipped: &Skipped) {
    let banner = format!(
        "BROWSER TEST SKIPPED: Chromium cannot be installed here: {}",
        skipped.0
    );
    eprintln!("\n{}\n{banner}\n{}\n", "!".repeat(78), "!".repeat(78));
    let _ = std::fs::create_dir_all(verifiers_dir());
    let _ = std::fs::write(verifiers_dir().join("BROWSER_SKIPPED"), banner);
}

/// What the browser saw.
#[derive(Debug)]
pub struct SignInResult {
    pub first_status: u16,
    pub heading: String,
    pub final_url: String,
}

impl Browser {
    /// Runs `script` with Node.js and `args`, then Chromium's path; what it printed last, as
    /// JSON.
    fn run(&self, script: &Path, args: &[&OsStr]) -> Value {
        let output = Command::new("node")
            .arg(script)
            .args(args)
            .arg(&self.chromium)
            .env("NODE_PATH", &self.node_modules)
            .output()
            .expect("run node");
        assert!(
            output.status.success(),
            "the browser run failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        let line = String::from_utf8_lossy(&output.stdout);
        serde_json::from_str(line.trim().lines().last().unwrap_or_default())
            .unwrap_or_else(|error| panic!("the browser printed {line:?}: {error}"))
    }

    /// Opens `authorize_url`, signs in with `email` and `password`, approves, and follows the
    /// redirect to the client's `/callback`.
    pub fn sign_in_and_approve(
        &self,
        authorize_url: &str,
        email: &str,
        password: &str,
    ) -> SignInResult {
        let seen = self.run(
            &self.script,
            &[authorize_url.as_ref(), email.as_ref(), password.as_ref()],
        );
        SignInResult {
            first_status: seen["status"].as_u64().unwrap_or_default() as u16,
            heading: seen["heading"].as_str().unwrap_or_default().to_string(),
            final_url: seen["finalUrl"].as_str().unwrap_or_default().to_string(),
        }
    }
}

/// What the browser saw of the API reference page.
#[derive(Debug)]
pub struct ReferencePageView {
    pub status: u16,
    pub title: String,
    /// The summaries of the operations listed.
    pub summaries: Vec<String>,
    /// The example request bodies the page shows, by the operation's summary (Create a
    /// subscription, Create a destination).
    pub examples: Value,
    /// Requests the page made to anywhere but loopback (all refused).
    pub off_loopback: Vec<String>,
    /// The browser's messages about what the content security policy refused.
    pub refused: Vec<String>,
    /// Uncaught errors on the page.
    pub errors: Vec<String>,
}

impl Browser {
    /// Opens `docs_url` with no way off loopback ([`DOCS_SCRIPT`]) and waits for the list of
    /// operations.
    pub fn reference_page(&self, docs_url: &str) -> ReferencePageView {
        let seen = self.run(
            &self.script.with_file_name("docs.js"),
            &[OsStr::new(docs_url)],
        );
        let texts = |name: &str| -> Vec<String> {
            seen[name]
                .as_array()
                .into_iter()
                .flatten()
                .map(|text| text.as_str().unwrap_or_default().to_string())
                .collect()
        };
        ReferencePageView {
            status: seen["status"].as_u64().unwrap_or_default() as u16,
            title: seen["title"].as_str().unwrap_or_default().to_string(),
            summaries: texts("summaries"),
            examples: seen["examples"].clone(),
            off_loopback: texts("offLoopback"),
            refused: texts("refused"),
            errors: texts("errors"),
        }
    }
}

/// Who signs in to the console, and what to look for.
pub struct ConsoleTour<'a> {
    pub base_url: &'a str,
    pub shop: &'a str,
    pub email: &'a str,
    pub password: &'a str,
    /// Another shop's staff member, with the same password.
    pub other_shop: &'a str,
    pub other_email: &'a str,
    /// The topic of the failed delivery to find.
    pub topic: &'a str,
    /// Where the screenshots go.
    pub screenshots: &'a Path,
}

impl Browser {
    /// Runs the console tour ([`CONSOLE_SCRIPT`]); what the browser saw, as JSON.
    pub fn console_tour(&self, tour: &ConsoleTour<'_>) -> Value {
        std::fs::create_dir_all(tour.screenshots).expect("create the screenshot directory");
        self.run(
            &self.console_script,
            &[
                OsStr::new(tour.base_url),
                OsStr::new(tour.shop),
                OsStr::new(tour.email),
                OsStr::new(tour.password),
                OsStr::new(tour.other_shop),
                OsStr::new(tour.other_email),
                OsStr::new(tour.topic),
                tour.screenshots.as_os_str(),
            ],
        )
    }
}

/// What a shop's page saw running the library.
#[derive(Debug)]
pub struct PageCheckout {
    /// The page's origin: not Mercer's.
    pub origin: String,
    pub drive: Drive,
    /// How the page's call to an API-token route ended: `blocked: TypeError` when Chromium
    /// refused the page the answer.
    pub probe: String,
    /// Uncaught errors on the page.
    pub errors: Vec<String>,
}

impl Browser {
    /// Runs the library on a shop's page on another origin than `url` (Mercer), as
    /// [`crate::storefront::drive`] runs it in Node.js; `probe_url` with `probe_token` is
    /// fetched from the same page.
    pub fn checkout_from_a_shop_page(
        &self,
        url: &str,
        shop: &str,
        init: &Value,
        steps: Value,
        (probe_url, probe_token): (&str, &str),
    ) -> PageCheckout {
        let mut plan = plan(url, shop, init, steps);
        plan["probe"] = serde_json::json!({"url": probe_url, "token": probe_token});
        let plan_file = write_plan(&plan);
        let run_plan = self.checkout_script.with_file_name("run-plan.js");
        let seen = self.run(
            &self.checkout_script,
            &[
                browser_bundle().as_os_str(),
                run_plan.as_os_str(),
                plan_file.as_os_str(),
            ],
        );
        let _ = std::fs::remove_file(&plan_file);
        let text = |name: &str| seen[name].as_str().unwrap_or_default().to_string();
        PageCheckout {
            origin: text("origin"),
            drive: Drive::from_run(&seen["ran"]),
            probe: text("probe"),
            errors: seen["errors"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|error| error.as_str().unwrap_or_default().to_string())
                .collect(),
        }
    }
}

impl Browser {
    /// Runs the subscriber portal's tour ([`PORTAL_SCRIPT`]) with `plan`, its screenshots going
    /// to `screenshots`; what the browser saw, and the API showed after each action, as JSON.
    pub fn portal_tour(&self, plan: &Value, screenshots: &Path) -> Value {
        std::fs::create_dir_all(screenshots).expect("create the screenshot directory");
        let mut plan = plan.clone();
        plan["shots"] = Value::String(screenshots.display().to_string());
        self.run(
            &self.script.with_file_name("portal.js"),
            &[OsStr::new(&plan.to_string())],
        )
    }
}
