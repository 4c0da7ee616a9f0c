// Prefix caching through the real server: a repeated prompt is served from
// the cache (usage.prompt_tokens_details.cached_tokens, the vllm:prefix_cache_*
// counters) with the same greedy output, POST /reset_prefix_cache forgets it,
// and --no-enable-prefix-caching turns it off.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';

import { metric, metrics, startServer } from './harness.mjs';

const MODEL = 'hyllm-tiny';
// 70 token ids: the prompt's last block boundary (blocks of 16) is at 64.
const PROMPT = Array.from({ length: 70 }, (_, i) => 300 + ((i * 37) % 900));

const post = (base, path) => fetch(`${base}${path}`, { method: 'POST' });

describe('prefix caching on (the default)', () => {
  let server;
  let client;
  before(async () => {
    server = await startServer();
    client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
  });
  after(async () => {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  });

  const complete = (prompt, extra = {}) => client.completions.create({
    model: MODEL, prompt, max_tokens: 8, temperature: 0, ignore_eos: true, ...extra,
  });

  it('serves a repeated prompt from the cache with the same tokens', async () => {
    const first = await complete(PROMPT);
    assert.equal(first.usage.prompt_tokens, 70);
    assert.equal(first.usage.prompt_tokens_details ?? null, null, 'nothing cached yet');
    const again = await complete(PROMPT);
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, 64);
    assert.equal(again.choices[0].text, first.choices[0].text);
    // A longer prompt with the same start hits too, at the end of the first
    // request's last computed token (its prompt and 7 of its 8 outputs).
    const ids = (await complete(PROMPT, { return_token_ids: true })).choices[0].token_ids;
    const longer = await complete([...PROMPT, ...ids, 5, 6, 7]);
    assert.equal(longer.usage.prompt_tokens_details.cached_tokens, 70 + 7);

    const m = await metrics(server.base);
    assert.equal(metric(m, 'vllm:prefix_cache_queries_total'), 70 * 3 + 81);
    assert.equal(metric(m, 'vllm:prefix_cache_hits_total'), 64 + 64 + 77);
  });

  it('keeps salted prefixes to requests with the same cache_salt', async () => {
    const salted = PROMPT.map((t) => t + 1);  // cached by no other test
    const a = await complete(salted, { cache_salt: 'tenant-a' });
    assert.equal(a.usage.prompt_tokens_details ?? null, null);
    const b = await complete(salted, { cache_salt: 'tenant-b' });
    assert.equal(b.usage.prompt_tokens_details ?? null, null, 'another salt sees nothing');
    const plain = await complete(salted);
    assert.equal(plain.usage.prompt_tokens_details ?? null, null, 'nor does an unsalted request');
    const again = await complete(salted, { cache_salt: 'tenant-a' });
    assert.equal(again.usage.prompt_tokens_details.cached_tokens, 64);
    assert.equal(again.choices[0].text, a.choices[0].text);
    await assert.rejects(complete(salted, { cache_salt: '' }), (e) => e.status === 400);
  });

  it('forgets everything on POST /reset_prefix_cache', async () => {
    const r = await post(server.base, '/reset_prefix_cache');
    assert.equal(r.status, 200);
    const after = await complete(PROMPT);
    assert.equal(after.usage.prompt_tokens_details ?? null, null);
    assert.equal((await fetch(`${server.base}/reset_prefix_cache`)).status, 405);
    const bad = await post(server.base, '/reset_prefix_cache?reset_running_requests=maybe');
    assert.equal(bad.status, 400);
    assert.match((await bad.json()).error.message, /reset_running_requests/);
  });

  it('refuses to reset under running requests unless asked to preempt them', async () => {
    const stream = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 600, temperature: 0, stream: true,
      // @ts-ignore vLLM's extra parameter
      ignore_eos: true,
    });
    const it = stream[Symbol.asyncIterator]();
    await it.next();  // running now
    const refused = await post(server.base, '/reset_prefix_cache');
    assert.equal(refused.status, 409);
    const forced = await post(server.base, '/reset_prefix_cache?reset_running_requests=true');
    assert.equal(forced.status, 200);
    let tokens = 1;
    for (let c = await it.next(); !c.done; c = await it.next()) tokens += c.value.choices.length ? 1 : 0;
    assert.ok(tokens > 500, `the preempted request finished (${tokens} chunks)`);
  });
});

describe('prefix caching off', () => {
  let server;
  before(async () => { server = await startServer({ args: ['--no-enable-prefix-caching'] }); });
  after(async () => { await server.stop(); });

  it('never reports cached tokens', async () => {
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
    for (let i = 0; i < 2; ++i) {
      const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 0 });
      assert.equal(r.usage.prompt_tokens_details ?? null, null);
    }
    assert.equal(metric(await metrics(server.base), 'vllm:prefix_cache_queries_total'), 0);
  });
});
