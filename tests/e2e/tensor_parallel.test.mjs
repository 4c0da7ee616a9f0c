// `hyllm serve --tensor-parallel-size 2` on the CPU backend (ranks as
// threads), driven by the official openai client beside an unsplit server:
// the same greedy tokens for several requests at once, streamed or not, with
// MTP speculative decoding too, and clear refusals at startup for sizes the
// model cannot be split into.

import assert from 'node:assert/strict';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

import { refusal, startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const TINY = path.join(here, '..', '..', 'models', 'hyllm-tiny');
const NAME = 'hyllm-tiny';

let whole;
let split;
let wholeClient;
let splitClient;

before(async () => {
  [whole, split] = await Promise.all([
    startServer({ args: [TINY, '--served-model-name', NAME] }),
    startServer({ args: [TINY, '--served-model-name', NAME, '--tensor-parallel-size', '2'] }),
  ]);
  const options = { apiKey: 'none', maxRetries: 0, timeout: 60000 };
  wholeClient = new OpenAI({ ...options, baseURL: `${whole.base}/v1` });
  splitClient = new OpenAI({ ...options, baseURL: `${split.base}/v1` });
});
after(async () => {
  const results = await Promise.all([whole?.stop(), split?.stop()]);
  for (const r of results) assert.equal(r?.code, 0);
});

describe('--tensor-parallel-size 2 on the CPU', () => {
  it('loads two ranks and says so', () => {
    assert.match(split.log(), /tensor parallelism: 2 ranks/);
    assert.match(split.log(), /rank 1 of 2/);
  });

  it('gives the unsplit greedy tokens for requests running together', async () => {
    // Prompts whose greedy continuations have no near tie in either model
    // (the split model's sums differ from the unsplit ones in the last bits).
    const requests = [
      { prompt: 'The json module', max_tokens: 24 },
      { prompt: 'Python is', max_tokens: 16, ignore_eos: true },
      { prompt: 'def main():\n', max_tokens: 20, ignore_eos: true },
      { prompt: 'A list comprehension', max_tokens: 12, logprobs: 3 },
    ].map((r) => ({ model: NAME, temperature: 0, return_token_ids: true, ...r }));
    const [want, got] = await Promise.all([
      Promise.all(requests.map((r) => wholeClient.completions.create(r))),
      Promise.all(requests.map((r) => splitClient.completions.create(r))),
    ]);
    for (let i = 0; i < requests.length; ++i) {
      assert.deepEqual(got[i].choices[0].token_ids, want[i].choices[0].token_ids, `request ${i}`);
      assert.equal(got[i].choices[0].text, want[i].choices[0].text);
      assert.deepEqual(got[i].usage, want[i].usage);
    }
    const lp = (r) => r.choices[0].logprobs.token_logprobs;
    for (let t = 0; t < lp(want[3]).length; ++t) assert.ok(Math.abs(lp(got[3])[t] - lp(want[3])[t]) < 0.05);
  });

  it('streams the same chat reply', async () => {
    const params = { model: NAME, messages: [{ role: 'user', content: 'What does the json module do?' }],
      max_tokens: 32, temperature: 0 };
    const want = await wholeClient.chat.completions.create(params);
    let text = '';
    for await (const chunk of await splitClient.chat.completions.create({ ...params, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(text, want.choices[0].message.content);
  });

  it('drafts with the MTP head over two ranks and still gives the unsplit tokens', async () => {
    const spec = await startServer({ args: [TINY, '--served-model-name', NAME, '--tensor-parallel-size', '2',
      '--speculative-config', '{"method": "mtp", "num_speculative_tokens": 2}'] });
    try {
      const client = new OpenAI({ apiKey: 'none', maxRetries: 0, timeout: 60000, baseURL: `${spec.base}/v1` });
      const requests = [
        { prompt: 'The json module', max_tokens: 24 },
        { prompt: 'def main():\n', max_tokens: 20, ignore_eos: true },
      ].map((r) => ({ model: NAME, temperature: 0, return_token_ids: true, ...r }));
      const [want, got] = await Promise.all([
        Promise.all(requests.map((r) => wholeClient.completions.create(r))),
        Promise.all(requests.map((r) => client.completions.create(r))),
      ]);
      for (let i = 0; i < requests.length; ++i) {
        assert.deepEqual(got[i].choices[0].token_ids, want[i].choices[0].token_ids, `request ${i}`);
      }
      const metrics = await (await fetch(`${spec.base}/metrics`)).text();
      assert.match(metrics, /vllm:spec_decode_num_accepted_tokens_total\{[^}]*\} [1-9]/);
    } finally {
      assert.equal((await spec.stop()).code, 0);
    }
  });

  it('refuses sizes the model cannot be split into', async () => {
    const three = await refusal([TINY, '--tensor-parallel-size', '3']);
    assert.notEqual(three.code, 0);
    assert.match(three.log, /tensor parallel size 3 does not divide the model's num_attention_heads \(4\)/);
    const nine = await refusal([TINY, '-tp', '9']);  // vLLM's short form
    assert.notEqual(nine.code, 0);
    assert.match(nine.log, /--tensor-parallel-size 9: expected 1 to 8/);
  });
});
