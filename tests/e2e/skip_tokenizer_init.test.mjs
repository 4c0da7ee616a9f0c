// `hyllm serve --skip-tokenizer-init` on a model directory without tokenizer
// files, driven by the official openai client: token ids in, token ids out
// (the same ids the server with a tokenizer generates), and a clear 400 for
// everything that needs text.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

import { HYLLM_BIN, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const TINY = path.join(here, '..', '..', 'models', 'hyllm-tiny');
const NAME = 'no-tokenizer';
const TOKENIZER_MESSAGE = /Tokenizer not available when `skip_tokenizer_init=True`/;

let dir;
let withTokenizer;   // the embedded model as usual: the reference
let withoutTokenizer;
let client;
let promptIds;

// The embedded model's weights and configs, without tokenizer.json,
// tokenizer_config.json and the chat template.
function modelWithoutTokenizer() {
  const d = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-no-tokenizer-'));
  const model = path.join(d, NAME);
  fs.mkdirSync(model);
  for (const f of ['config.json', 'generation_config.json', 'model.safetensors']) {
    fs.symlinkSync(path.join(TINY, f), path.join(model, f));
  }
  return { root: d, model };
}

before(async () => {
  dir = modelWithoutTokenizer();
  withTokenizer = await startServer();
  withoutTokenizer = await startServer({
    args: [dir.model, '--skip-tokenizer-init', '--served-model-name', NAME],
  });
  client = new OpenAI({ baseURL: `${withoutTokenizer.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
  const r = await fetch(`${withTokenizer.base}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ prompt: 'The json module' }),
  });
  promptIds = (await r.json()).tokens;
});
after(async () => {
  const results = await Promise.all([withTokenizer?.stop(), withoutTokenizer?.stop()]);
  fs.rmSync(dir.root, { recursive: true, force: true });
  for (const r of results) assert.equal(r?.code, 0);
});

describe('--skip-tokenizer-init', () => {
  it('refuses to start without tokenizer files unless asked to skip them', async () => {
    const proc = spawn(HYLLM_BIN, ['serve', dir.model, '--device', 'cpu', '--host', '127.0.0.1', '--port', '0'],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stdout.on('data', (d) => { log += d; });
    proc.stderr.on('data', (d) => { log += d; });
    const code = await new Promise((resolve) => proc.on('exit', resolve));
    assert.notEqual(code, 0);
    assert.match(log, /has no tokenizer\.json: pass --tokenizer DIR, or --skip-tokenizer-init/);
  });

  it('serves token ids in and token ids out, the same ids as with a tokenizer', async () => {
    const params = { prompt: promptIds, max_tokens: 12, temperature: 0, ignore_eos: true };
    const reference = await new OpenAI({ baseURL: `${withTokenizer.base}/v1`, apiKey: 'none', maxRetries: 0 })
      .completions.create({ ...params, return_token_ids: true });
    const r = await client.completions.create({ model: NAME, ...params });
    assert.equal(r.model, NAME);
    assert.equal(r.object, 'text_completion');
    assert.equal(r.choices[0].text, '');
    assert.deepEqual(r.choices[0].token_ids, reference.choices[0].token_ids);
    assert.deepEqual(r.choices[0].prompt_token_ids, promptIds);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.prompt_tokens, promptIds.length);
    assert.equal(r.usage.completion_tokens, 12);

    const stream = await client.completions.create({ ...params, stream: true });
    const ids = [];
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        assert.equal(c.text, '');
        ids.push(...c.token_ids);
      }
    }
    assert.deepEqual(ids, reference.choices[0].token_ids);
  });

  it('takes batches of id lists, stop_token_ids and logprobs spelled as ids', async () => {
    const r = await client.completions.create({
      prompt: [promptIds, promptIds.slice(1)], max_tokens: 4, temperature: 0, ignore_eos: true, logprobs: 2,
    });
    assert.equal(r.choices.length, 2);
    for (const c of r.choices) {
      assert.equal(c.token_ids.length, 4);
      assert.deepEqual(c.logprobs.tokens, c.token_ids.map((id) => `token_id:${id}`));
      for (const top of c.logprobs.top_logprobs) {
        for (const k of Object.keys(top)) assert.match(k, /^token_id:\d+$/);
      }
    }
    const stopId = r.choices[0].token_ids[1];
    const stopped = await client.completions.create({
      prompt: promptIds, max_tokens: 4, temperature: 0, ignore_eos: true, stop_token_ids: [stopId],
    });
    assert.deepEqual(stopped.choices[0].token_ids, r.choices[0].token_ids.slice(0, 2));
    assert.equal(stopped.choices[0].stop_reason, stopId);
  });

  it('refuses what needs the tokenizer with a 400 naming the field', async () => {
    const refused = async (promise, param, message) => {
      await assert.rejects(promise, (e) => {
        assert.equal(e.status, 400);
        assert.equal(e.error?.param ?? e.param, param);
        assert.match(e.message, message);
        return true;
      });
    };
    await refused(client.completions.create({ prompt: 'The json module', max_tokens: 4 }), 'prompt',
      TOKENIZER_MESSAGE);
    await refused(client.completions.create({ prompt: promptIds, max_tokens: 4, stop: ['.'] }), 'stop',
      /stop_token_ids/);
    await refused(client.completions.create({ prompt: promptIds, max_tokens: 4, echo: true }), 'echo',
      TOKENIZER_MESSAGE);
    await refused(client.chat.completions.create({ messages: [{ role: 'user', content: 'hi' }] }), 'messages',
      TOKENIZER_MESSAGE);
    for (const [route, body] of [['tokenize', { prompt: 'hi' }], ['detokenize', { tokens: [1, 2] }]]) {
      const r = await fetch(`${withoutTokenizer.base}/${route}`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
      });
      assert.equal(r.status, 400);
      assert.match((await r.json()).error.message, TOKENIZER_MESSAGE);
    }
    // Still serving after the refusals.
    const models = await client.models.list();
    assert.equal(models.data[0].id, NAME);
    assert.equal((await fetch(`${withoutTokenizer.base}/health`)).status, 200);
  });
});
