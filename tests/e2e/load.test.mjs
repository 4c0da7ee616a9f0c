// Many streams at once, and clients that go away: 64 parallel streams all
// finish; a client that disconnects mid-stream has its request aborted and its
// cache freed (running count and KV usage back to 0 in /metrics).

import assert from 'node:assert/strict';
import net from 'node:net';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';

import { metric, metrics, sleep, startServer } from './harness.mjs';

let server;
let client;
before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

async function waitForIdle(ms = 5000) {
  const deadline = Date.now() + ms;
  let m;
  for (;;) {
    m = await metrics(server.base);
    if (metric(m, 'vllm:num_requests_running') === 0 && metric(m, 'vllm:num_requests_waiting') === 0 &&
        metric(m, 'vllm:kv_cache_usage_perc') === 0) return m;
    if (Date.now() > deadline) return m;
    await sleep(20);
  }
}

describe('load', () => {
  it('serves 64 parallel streams, each token as its own event', async () => {
    const started = Date.now();
    const runs = Array.from({ length: 64 }, async (_, i) => {
      const stream = await client.completions.create({
        model: 'hyllm-tiny', prompt: `Stream number ${i} says`, max_tokens: 8, ignore_eos: true,
        temperature: 0, stream: true,
      });
      let events = 0;
      let finish = null;
      let firstAt = null;
      for await (const chunk of stream) {
        if (chunk.choices.length === 0) continue;
        events += 1;
        firstAt ??= Date.now();
        finish = chunk.choices[0].finish_reason ?? finish;
      }
      return { events, finish, ttft: firstAt - started };
    });
    const results = await Promise.all(runs);
    for (const r of results) {
      assert.equal(r.events, 8);
      assert.equal(r.finish, 'length');
    }
    const m = await waitForIdle();
    assert.equal(metric(m, 'vllm:num_requests_running'), 0);
    assert.ok(metric(m, 'vllm:generation_tokens_total') >= 64 * 8);
    assert.ok(metric(m, 'vllm:request_success_total', { finished_reason: 'length' }) >= 64);
  });

  it('holds 512 streaming connections at once and finishes every one', async () => {
    let open = 0;
    let maxOpen = 0;
    // Streams long enough that the first ones still run while the last connect,
    // also on a loaded machine. Under the sanitizers every step is many times
    // slower, so fewer tokens overlap as well, and the streams that queue
    // behind the first 256 get their first byte before the HTTP client's
    // 300 s body timeout.
    const tokens = process.env.HYLLM_E2E_SANITIZED === '1' ? 6 : 24;
    const runs = Array.from({ length: 512 }, async (_, i) => {
      const stream = await client.completions.create({
        model: 'hyllm-tiny', prompt: `Client ${i}:`, max_tokens: tokens, ignore_eos: true, temperature: 0, stream: true,
      });
      maxOpen = Math.max(maxOpen, ++open);
      let events = 0;
      for await (const chunk of stream) if (chunk.choices.length) events += 1;
      open -= 1;
      return events;
    });
    const events = await Promise.all(runs);
    // More clients than --max-num-seqs (256): the rest wait their turn, none starves.
    assert.ok(events.every((n) => n === tokens));
    assert.ok(maxOpen > 256, `only ${maxOpen} streams were open at once`);
    const m = await waitForIdle();
    assert.equal(metric(m, 'vllm:num_requests_running'), 0);
  });

  it('frees the cache of streams whose clients disconnect', async () => {
    const before = await metrics(server.base);
    const abortedBefore = metric(before, 'vllm:request_success_total', { finished_reason: 'abort' }) ?? 0;
    const controllers = [];
    const runs = Array.from({ length: 8 }, async () => {
      const controller = new AbortController();
      controllers.push(controller);
      const stream = await client.completions.create({
        model: 'hyllm-tiny', prompt: 'A very long story:', max_tokens: 900, ignore_eos: true, stream: true,
      }, { signal: controller.signal });
      let n = 0;
      try {
        for await (const chunk of stream) {
          if (chunk.choices.length && ++n === 3) controller.abort();
        }
      } catch { /* aborted on purpose */ }
      return n;
    });
    const seen = await Promise.all(runs);
    assert.ok(seen.every((n) => n >= 3));
    const m = await waitForIdle(3000);
    assert.equal(metric(m, 'vllm:num_requests_running'), 0);
    assert.equal(metric(m, 'vllm:kv_cache_usage_perc'), 0);
    assert.equal(metric(m, 'vllm:request_success_total', { finished_reason: 'abort' }), abortedBefore + 8);
  });

  it('frees the cache of a non-streaming request whose client disconnects', async () => {
    const sock = net.connect(server.port, '127.0.0.1');
    await new Promise((r) => sock.on('connect', r));
    const body = JSON.stringify({ prompt: 'Once', max_tokens: 900, ignore_eos: true });
    sock.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    // Wait until the request runs, then leave.
    const deadline = Date.now() + 5000;
    while (metric(await metrics(server.base), 'vllm:num_requests_running') === 0 && Date.now() < deadline) await sleep(10);
    sock.destroy();
    const m = await waitForIdle(3000);
    assert.equal(metric(m, 'vllm:num_requests_running'), 0);
    assert.equal(metric(m, 'vllm:kv_cache_usage_perc'), 0);
  });

  it('is still healthy and serving', async () => {
    const r = await client.completions.create({ model: 'hyllm-tiny', prompt: 'x', max_tokens: 2 });
    assert.ok(r.choices[0].text.length >= 0);
  });
});
