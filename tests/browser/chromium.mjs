// Debian's headless Chromium (/usr/bin/chromium), driven over the DevTools
// protocol with chrome-remote-interface. Nothing is downloaded: the browser
// is the system's, and every flag below keeps it off the network but for the
// pages it is sent to (this machine refuses other connections).

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import CDP from 'chrome-remote-interface';

export const CHROMIUM = process.env.HYLLM_CHROMIUM ?? '/usr/bin/chromium';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function launchChromium({ width = 900, height = 640 } = {}) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-chromium-'));
  const args = [
    '--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync',
    '--disable-dev-shm-usage', '--hide-scrollbars', `--window-size=${width},${height}`,
    `--user-data-dir=${profile}`, '--remote-debugging-port=0', 'about:blank',
  ];
  const proc = spawn(CHROMIUM, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  const exited = new Promise((resolve) => proc.on('exit', resolve));
  const port = await new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = log.match(/DevTools listening on ws:\/\/[^:]+:(\d+)\//);
      if (m) resolve(Number(m[1]));
    });
    proc.on('error', reject);
    exited.then((code) => reject(new Error(`${CHROMIUM} exited (${code}) before listening:\n${log}`)));
    setTimeout(() => reject(new Error(`${CHROMIUM} did not listen within 60 s:\n${log}`)), 60000).unref();
  });
  const client = await CDP({ port });
  const page = new Page(client);
  await page.init();
  return {
    page,
    async close() {
      try { await client.Browser.close(); } catch { /* already gone */ }
      await client.close().catch(() => {});
      const timer = setTimeout(() => proc.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
      fs.rmSync(profile, { recursive: true, force: true });
    },
  };
}

// One tab: navigation, script evaluation, real input events, and a record of
// every request it makes and every error it logs.
class Page {
  constructor(client) {
    this.client = client;
    this.requests = [];
    this.errors = [];
  }

  async init() {
    const { Page: page, Runtime, Network, Log } = this.client;
    Network.requestWillBeSent(({ request }) => this.requests.push(request.url));
    Runtime.exceptionThrown(({ exceptionDetails }) => this.errors.push(exceptionDetails.exception?.description
      ?? exceptionDetails.text));
    Log.entryAdded(({ entry }) => { if (entry.level === 'error') this.errors.push(entry.text); });
    await Promise.all([page.enable(), Runtime.enable(), Network.enable(), Log.enable()]);
  }

  async goto(url) {
    const loaded = this.client.Page.loadEventFired();
    await this.client.Page.navigate({ url });
    await loaded;
  }

  // Evaluates an expression in the page (awaiting promises) and returns its value.
  async eval(expression) {
    const r = await this.client.Runtime.evaluate({ expression, awaitPromise: true, returnByValue: true });
    if (r.exceptionDetails) throw new Error(`${expression}: ${r.exceptionDetails.exception?.description}`);
    return r.result.value;
  }

  async waitFor(expression, { timeout = 30000, what = expression } = {}) {
    const deadline = Date.now() + timeout;
    for (;;) {
      const v = await this.eval(expression);
      if (v) return v;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(25);
    }
  }

  // A left click at the middle of the element, as a mouse would.
  async click(selector) {
    const box = await this.eval(`(() => {
      const r = document.querySelector(${JSON.stringify(selector)}).getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    })()`);
    const { Input } = this.client;
    await Input.dispatchMouseEvent({ type: 'mousePressed', x: box.x, y: box.y, button: 'left', clickCount: 1 });
    await Input.dispatchMouseEvent({ type: 'mouseReleased', x: box.x, y: box.y, button: 'left', clickCount: 1 });
  }

  // Types into the element as a keyboard would, then optionally presses Enter.
  async type(selector, text, { enter = false } = {}) {
    await this.eval(`document.querySelector(${JSON.stringify(selector)}).focus()`);
    await this.client.Input.insertText({ text });
    if (enter) {
      const key = { key: 'Enter', code: 'Enter', windowsVirtualKeyCode: 13, nativeVirtualKeyCode: 13 };
      await this.client.Input.dispatchKeyEvent({ type: 'keyDown', ...key, text: '\r' });
      await this.client.Input.dispatchKeyEvent({ type: 'keyUp', ...key });
    }
  }

  // Rewrites the JSON body of the page's requests to `urlPattern` with
  // `edit(body)` until the returned function is called.
  async rewriteRequests(urlPattern, edit) {
    const { Fetch } = this.client;
    const off = Fetch.requestPaused(({ requestId, request }) => {
      const raw = request.postData ?? (request.postDataEntries ?? [])
        .map((e) => Buffer.from(e.bytes ?? '', 'base64').toString()).join('');
      const body = JSON.stringify(edit(JSON.parse(raw)));
      Fetch.continueRequest({ requestId, postData: Buffer.from(body).toString('base64') });
    });
    await Fetch.enable({ patterns: [{ urlPattern, requestStage: 'Request' }] });
    return async () => { off(); await Fetch.disable(); };
  }

  // Answers the page's requests to `urlPattern` with `body` until the
  // returned function is called.
  async answerRequests(urlPattern, { status = 200, contentType, body }) {
    const { Fetch } = this.client;
    const off = Fetch.requestPaused(({ requestId }) => Fetch.fulfillRequest({
      requestId, responseCode: status, responseHeaders: [{ name: 'Content-Type', value: contentType }],
      body: Buffer.from(body).toString('base64'),
    }));
    await Fetch.enable({ patterns: [{ urlPattern, requestStage: 'Request' }] });
    return async () => { off(); await Fetch.disable(); };
  }

  async screenshot(file) {
    const { data } = await this.client.Page.captureScreenshot({ format: 'png' });
    fs.writeFileSync(file, Buffer.from(data, 'base64'));
  }
}
