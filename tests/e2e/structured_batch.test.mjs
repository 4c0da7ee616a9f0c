// Structured output sharing the batch, on a model whose configs name an
// end-of-sequence id its tokenizer does not have (as when a dummy Qwen3.5
// config is served with the Qwen3 tokenizer): the embedded model's files with
// a larger vocabulary and eos 8300, dummy weights. Grammars must still end
// with the tokenizer's eos_token (vLLM's EOS), a request whose grammar is
// complete must go on to max_tokens under ignore_eos, and no constrained
// request may ever fail the plain requests it shares a step with.

import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';

import { startServer } from './harness.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const TINY = path.join(here, '..', '..', 'models', 'hyllm-tiny');
const UNIT = { type: 'json_schema', json_schema: { name: 'unit', schema: { type: 'string', enum: ['celsius', 'fahrenheit'] } } };
const MESSAGES = [{ role: 'user', content: 'Which unit?' }];

let dir;
let server;
let client;

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-borrowed-tokenizer-'));
  for (const f of ['tokenizer.json', 'tokenizer_config.json', 'chat_template.jinja']) {
    fs.copyFileSync(path.join(TINY, f), path.join(dir, f));
  }
  const config = JSON.parse(fs.readFileSync(path.join(TINY, 'config.json'), 'utf8'));
  const tokenizer = JSON.parse(fs.readFileSync(path.join(TINY, 'tokenizer.json'), 'utf8'));
  const tokenizerIds = Object.keys(tokenizer.model.vocab).length + tokenizer.added_tokens.length;
  assert.equal(config.text_config.vocab_size, tokenizerIds, 'the embedded model and its tokenizer changed');
  config.text_config.vocab_size = tokenizerIds + 128;
  config.text_config.eos_token_id = tokenizerIds + 100;  // a model id the tokenizer lacks
  fs.writeFileSync(path.join(dir, 'config.json'), JSON.stringify(config));
  fs.writeFileSync(path.join(dir, 'generation_config.json'), JSON.stringify({ eos_token_id: [tokenizerIds + 100] }));
  server = await startServer({ args: ['--model', dir, '--load-format', 'dummy', '--served-model-name', 'borrowed'] });
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
});
after(async () => {
  if (server) {
    const { code } = await server.stop();
    assert.equal(code, 0, server.log());
  }
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('structured output with a borrowed tokenizer', () => {
  it('a complete grammar ends the answer with finish_reason stop', async () => {
    const r = await client.chat.completions.create({
      model: 'borrowed', messages: MESSAGES, max_tokens: 32, temperature: 0, response_format: UNIT,
    });
    assert.equal(r.choices[0].finish_reason, 'stop', server.log());
    assert.ok(['celsius', 'fahrenheit'].includes(JSON.parse(r.choices[0].message.content)));
  });

  it('constrained requests under ignore_eos run to max_tokens beside plain ones, and none fails', async () => {
    const maxTokens = 24;
    const constrained = Array.from({ length: 4 }, (_, i) => client.chat.completions.create({
      model: 'borrowed', messages: MESSAGES, max_tokens: maxTokens, temperature: 1, seed: i, ignore_eos: true,
      response_format: UNIT,
    }));
    const plain = Array.from({ length: 4 }, (_, i) => client.completions.create({
      model: 'borrowed', prompt: `Plain request ${i}:`, max_tokens: maxTokens, temperature: 0, ignore_eos: true,
    }));
    const results = await Promise.allSettled([...constrained, ...plain]);
    for (const [i, r] of results.entries()) assert.equal(r.status, 'fulfilled', `request ${i}: ${r.reason}\n${server.log()}`);
    for (const { value } of results) {
      assert.equal(value.choices[0].finish_reason, 'length');
      assert.equal(value.usage.completion_tokens, maxTokens);
    }
    for (const { value } of results.slice(0, 4)) {
      // The grammar completed (its answer is there) and the free tokens followed it.
      assert.match(value.choices[0].message.content, /^"(celsius|fahrenheit)"/);
    }
  });
});
