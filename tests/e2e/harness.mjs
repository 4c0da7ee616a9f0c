// Starts the real `hyllm serve` binary on a free port (it binds port 0 and
// logs the port), waits for /health, and stops it with a signal.

import { spawn } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
export const HYLLM_BIN = process.env.HYLLM_BIN ?? path.join(here, '..', '..', 'build', 'hyllm');

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Runs `hyllm serve` expecting it to refuse to start; resolves to its exit
// code and everything it printed.
export function refusal(args) {
  return new Promise((resolve) => {
    const proc = spawn(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stdout.on('data', (d) => { log += d; });
    proc.stderr.on('data', (d) => { log += d; });
    proc.on('exit', (code) => resolve({ code, log }));
  });
}

export async function startServer({ args = [], env = {}, maxModelLen = 1024 } = {}) {
  const argv = ['serve', '--device', 'cpu', '--host', '127.0.0.1', '--port', '0',
    '--max-model-len', String(maxModelLen), '--kv-cache-memory', '256m', ...args];
  const childEnv = { ...process.env, ...env };
  delete childEnv.HYLLM_API_KEY;
  delete childEnv.VLLM_API_KEY;
  Object.assign(childEnv, env);
  const proc = spawn(HYLLM_BIN, argv, { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] });
  let log = '';
  const exited = new Promise((resolve) => proc.on('exit', (code, signal) => resolve({ code, signal })));
  const port = await new Promise((resolve, reject) => {
    const onData = (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/[^\s:]+:(\d+)/);
      if (m) resolve(Number(m[1]));
    };
    proc.stdout.on('data', onData);
    proc.stderr.on('data', onData);
    exited.then(({ code }) => reject(new Error(`hyllm serve exited (${code}) before listening:\n${log}`)));
    setTimeout(() => reject(new Error(`hyllm serve did not listen within 60 s:\n${log}`)), 60000).unref();
  });
  const base = `http://127.0.0.1:${port}`;
  const server = {
    proc, port, base, exited,
    log: () => log,
    async stop(signal = 'SIGTERM') {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill(signal);
      return exited;
    },
  };
  const deadline = Date.now() + 120000;
  for (;;) {
    try {
      const r = await fetch(`${base}/health`);
      if (r.status === 200) break;
    } catch { /* not yet */ }
    if (Date.now() > deadline) {
      await server.stop('SIGKILL');
      throw new Error(`hyllm serve was not healthy within 120 s:\n${log}`);
    }
    await sleep(50);
  }
  return server;
}

// Sends raw bytes and returns everything the server answers until it closes
// the connection or `ms` pass. Used for requests no HTTP client would send.
export function rawRequest(port, bytes, { ms = 5000 } = {}) {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let data = '';
    const done = () => { sock.destroy(); resolve(data); };
    sock.setTimeout(ms, done);
    sock.on('data', (d) => {
      data += d.toString('latin1');
      // One response is enough: stop after its body when the length is known.
      const head = data.indexOf('\r\n\r\n');
      if (head >= 0) {
        const m = data.slice(0, head).match(/content-length:\s*(\d+)/i);
        if (m && data.length >= head + 4 + Number(m[1])) done();
      }
    });
    sock.on('error', done);
    sock.on('close', done);
    sock.on('connect', () => {
      for (const part of [].concat(bytes)) sock.write(part);
    });
  });
}

export function statusOf(raw) {
  const m = raw.match(/^HTTP\/1\.1 (\d{3})/);
  return m ? Number(m[1]) : null;
}

export function bodyOf(raw) {
  const i = raw.indexOf('\r\n\r\n');
  return i < 0 ? '' : raw.slice(i + 4);
}

// Reads /metrics and returns {name{labels}: value}.
export async function metrics(base) {
  const text = await (await fetch(`${base}/metrics`)).text();
  const out = {};
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return out;
}

export function metric(all, name, labels = {}) {
  for (const [key, value] of Object.entries(all)) {
    if (!key.startsWith(name + '{')) continue;
    if (Object.entries(labels).every(([k, v]) => key.includes(`${k}="${v}"`))) return value;
  }
  return undefined;
}

// Posts JSON and parses an SSE stream into its data payloads (raw strings).
export async function sseEvents(url, body, headers = {}) {
  const r = await fetch(url, {
    method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body),
  });
  const text = await r.text();
  const events = text.split('\n\n').filter((e) => e.length > 0);
  return { status: r.status, headers: r.headers, text, events };
}
