// `hyllm serve --speculative-config` on the embedded model and its trained
// MTP head, driven by the official openai client: the same tokens as the
// server without speculation for greedy and seeded requests, streamed or not;
// the spec_decode metrics with real acceptance; clear refusals at startup.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

import { refusal, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const TINY = path.join(here, '..', '..', 'models', 'hyllm-tiny');
const NAME = 'hyllm-tiny';
const SPEC = JSON.stringify({ method: 'mtp', num_speculative_tokens: 3 });

// A copy of the embedded model whose config has no MTP layer (the loader
// then drops the head's tensors).
function modelWithoutMtpHead() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-nomtp-'));
  const model = path.join(root, NAME);
  fs.mkdirSync(model);
  for (const f of fs.readdirSync(TINY)) {
    if (f !== 'config.json') fs.symlinkSync(path.join(TINY, f), path.join(model, f));
  }
  const config = JSON.parse(fs.readFileSync(path.join(TINY, 'config.json'), 'utf8'));
  (config.text_config ?? config).mtp_num_hidden_layers = 0;
  fs.writeFileSync(path.join(model, 'config.json'), JSON.stringify(config, null, 2));
  return { root, model };
}

let dir;
let plain;
let spec;
let plainClient;
let specClient;

before(async () => {
  dir = modelWithoutMtpHead();
  [plain, spec] = await Promise.all([
    startServer({ args: [TINY, '--served-model-name', NAME] }),
    startServer({ args: [TINY, '--served-model-name', NAME, '--speculative-config', SPEC] }),
  ]);
  const options = { apiKey: 'none', maxRetries: 0, timeout: 60000 };
  plainClient = new OpenAI({ ...options, baseURL: `${plain.base}/v1` });
  specClient = new OpenAI({ ...options, baseURL: `${spec.base}/v1` });
});
after(async () => {
  const results = await Promise.all([plain?.stop(), spec?.stop()]);
  fs.rmSync(dir.root, { recursive: true, force: true });
  for (const r of results) assert.equal(r?.code, 0);
});

describe('--speculative-config with the MTP head', () => {
  it('gives the tokens of decoding without it, greedy and seeded, several requests at once', async () => {
    const requests = [
      { prompt: 'The json module', max_tokens: 32, temperature: 0 },
      { prompt: 'Python is', max_tokens: 24, temperature: 0, ignore_eos: true },
      { prompt: 'A list', max_tokens: 20, temperature: 0.9, top_p: 0.95, seed: 7, ignore_eos: true },
      { prompt: 'def main', max_tokens: 20, temperature: 1.0, top_k: 20, seed: 11, n: 2, ignore_eos: true },
    ].map((r) => ({ model: NAME, return_token_ids: true, ...r }));
    const [want, got] = await Promise.all([
      Promise.all(requests.map((r) => plainClient.completions.create(r))),
      Promise.all(requests.map((r) => specClient.completions.create(r))),
    ]);
    for (let i = 0; i < requests.length; ++i) {
      assert.equal(got[i].choices.length, want[i].choices.length);
      for (let c = 0; c < want[i].choices.length; ++c) {
        assert.deepEqual(got[i].choices[c].token_ids, want[i].choices[c].token_ids, `request ${i} choice ${c}`);
        assert.equal(got[i].choices[c].text, want[i].choices[c].text);
      }
    }
  });

  it('streams the same chat reply', async () => {
    const params = { model: NAME, messages: [{ role: 'user', content: 'What does the json module do?' }],
      max_tokens: 40, temperature: 0 };
    const want = await plainClient.chat.completions.create(params);
    let text = '';
    for await (const chunk of await specClient.chat.completions.create({ ...params, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(text, want.choices[0].message.content);
  });

  it('exports the spec_decode counters', async () => {
    const metrics = await (await fetch(`${spec.base}/metrics`)).text();
    const value = (name) => Number(metrics.match(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'm'))?.[1]);
    assert.ok(value('vllm:spec_decode_num_drafts_total') > 0, metrics);
    assert.ok(value('vllm:spec_decode_num_draft_tokens_total') >= value('vllm:spec_decode_num_drafts_total'));
    assert.match(metrics, /vllm:spec_decode_num_accepted_tokens_per_pos_total\{position="2",/);
    // The trained head drafts the model's own next tokens often (greedy chat answers: about 0.65 at the
    // first position); the requests above mix greedy and sampled ones.
    const first = Number(metrics.match(/^vllm:spec_decode_num_accepted_tokens_per_pos_total\{position="0",[^}]*\} (\S+)$/m)?.[1]);
    assert.ok(first / value('vllm:spec_decode_num_drafts_total') > 0.25, metrics);
    const plainMetrics = await (await fetch(`${plain.base}/metrics`)).text();
    assert.doesNotMatch(plainMetrics, /spec_decode/);
  });

  it('refuses a model without an MTP head and unsupported configs at startup', async () => {
    const noHead = await refusal([dir.model, '--speculative-config', SPEC]);
    assert.notEqual(noHead.code, 0);
    assert.match(noHead.log, /needs the checkpoint's MTP head/);
    for (const bad of ['{"method": "eagle", "num_speculative_tokens": 2}', '{"method": "mtp", "num_speculative_tokens": 9}',
      'mtp', '{"method": "mtp", "num_speculative_tokens": 2, "model": "draft"}']) {
      const r = await refusal([TINY, '--speculative-config', bad]);
      assert.notEqual(r.code, 0, bad);
      assert.match(r.log, /--speculative-config/, bad);
    }
  });
});
