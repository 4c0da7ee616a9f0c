// `hyllm serve --speculative-config` on the embedded model with an MTP head
// added (random weights, written here into a temporary copy of the model),
// driven by the official openai client: the same tokens as the server
// without speculation for greedy and seeded requests, streamed or not; the
// spec_decode metrics; clear refusals at startup.

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
const NAME = 'hyllm-tiny';
const SPEC = JSON.stringify({ method: 'mtp', num_speculative_tokens: 3 });

// bf16 bits of a float, rounded to nearest even.
function bf16(x) {
  const f = new Float32Array([x]);
  const u = new Uint32Array(f.buffer)[0];
  return (u + 0x7fff + ((u >> 16) & 1)) >>> 16;
}

// The MTP head's tensors for the model's text config, random normal(0, 0.02)
// linears from a fixed seed and zero (1 + w) norms.
function mtpTensors(cfg) {
  const H = cfg.hidden_size, D = cfg.head_dim, I = cfg.intermediate_size;
  const q = cfg.num_attention_heads * D * 2, kv = cfg.num_key_value_heads * D;
  const p = 'mtp.layers.0.';
  const specs = [
    ['mtp.fc.weight', [H, 2 * H]], ['mtp.pre_fc_norm_embedding.weight', [H]], ['mtp.pre_fc_norm_hidden.weight', [H]],
    [p + 'input_layernorm.weight', [H]], [p + 'self_attn.q_proj.weight', [q, H]], [p + 'self_attn.k_proj.weight', [kv, H]],
    [p + 'self_attn.v_proj.weight', [kv, H]], [p + 'self_attn.o_proj.weight', [H, cfg.num_attention_heads * D]],
    [p + 'self_attn.q_norm.weight', [D]], [p + 'self_attn.k_norm.weight', [D]],
    [p + 'post_attention_layernorm.weight', [H]], [p + 'mlp.gate_proj.weight', [I, H]],
    [p + 'mlp.up_proj.weight', [I, H]], [p + 'mlp.down_proj.weight', [H, I]], ['mtp.norm.weight', [H]],
  ];
  let state = 0x2545f491;
  const uniform = () => {  // xorshift32 in [0, 1)
    state ^= state << 13; state >>>= 0;
    state ^= state >>> 17;
    state ^= state << 5; state >>>= 0;
    return state / 4294967296;
  };
  return specs.map(([name, shape]) => {
    const n = shape.reduce((a, b) => a * b, 1);
    const bytes = Buffer.alloc(2 * n);
    if (!name.endsWith('norm.weight') && !name.includes('pre_fc_norm')) {
      for (let i = 0; i < n; ++i) {
        const normal = (uniform() + uniform() + uniform() + uniform() - 2) * Math.sqrt(3);
        bytes.writeUInt16LE(bf16(0.02 * normal), 2 * i);
      }
    }
    return { name, dtype: 'BF16', shape, bytes };
  });
}

// A copy of the embedded model whose checkpoint also holds an MTP head.
function modelWithMtpHead() {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-mtp-'));
  const model = path.join(root, NAME);
  fs.mkdirSync(model);
  for (const f of fs.readdirSync(TINY)) {
    if (f !== 'config.json' && f !== 'model.safetensors') fs.symlinkSync(path.join(TINY, f), path.join(model, f));
  }
  const config = JSON.parse(fs.readFileSync(path.join(TINY, 'config.json'), 'utf8'));
  const text = config.text_config ?? config;
  text.mtp_num_hidden_layers = 1;
  fs.writeFileSync(path.join(model, 'config.json'), JSON.stringify(config, null, 2));

  const file = fs.readFileSync(path.join(TINY, 'model.safetensors'));
  const headerLen = Number(file.readBigUInt64LE(0));
  const header = JSON.parse(file.subarray(8, 8 + headerLen).toString('utf8'));
  const data = file.subarray(8 + headerLen);
  const out = {};
  const parts = [];
  let offset = 0;
  const add = (name, dtype, shape, bytes) => {
    out[name] = { dtype, shape, data_offsets: [offset, offset + bytes.length] };
    parts.push(bytes);
    offset += bytes.length;
  };
  for (const [name, t] of Object.entries(header)) {
    if (name === '__metadata__') continue;
    add(name, t.dtype, t.shape, data.subarray(t.data_offsets[0], t.data_offsets[1]));
  }
  for (const t of mtpTensors(text)) add(t.name, t.dtype, t.shape, t.bytes);
  if (header.__metadata__) out.__metadata__ = header.__metadata__;
  let json = JSON.stringify(out);
  json += ' '.repeat((8 - (json.length % 8)) % 8);
  const len = Buffer.alloc(8);
  len.writeBigUInt64LE(BigInt(json.length));
  fs.writeFileSync(path.join(model, 'model.safetensors'), Buffer.concat([len, Buffer.from(json, 'utf8'), ...parts]));
  return { root, model };
}

// Runs `hyllm serve` expecting it to refuse to start; returns its output.
function refusal(args) {
  return new Promise((resolve) => {
    const proc = spawn(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let log = '';
    proc.stdout.on('data', (d) => { log += d; });
    proc.stderr.on('data', (d) => { log += d; });
    proc.on('exit', (code) => resolve({ code, log }));
  });
}

let dir;
let plain;
let spec;
let plainClient;
let specClient;

before(async () => {
  dir = modelWithMtpHead();
  [plain, spec] = await Promise.all([
    startServer({ args: [dir.model, '--served-model-name', NAME] }),
    startServer({ args: [dir.model, '--served-model-name', NAME, '--speculative-config', SPEC] }),
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
    const plainMetrics = await (await fetch(`${plain.base}/metrics`)).text();
    assert.doesNotMatch(plainMetrics, /spec_decode/);
  });

  it('refuses a model without an MTP head and unsupported configs at startup', async () => {
    const noHead = await refusal([TINY, '--speculative-config', SPEC]);
    assert.notEqual(noHead.code, 0);
    assert.match(noHead.log, /needs the checkpoint's MTP head/);
    for (const bad of ['{"method": "eagle", "num_speculative_tokens": 2}', '{"method": "mtp", "num_speculative_tokens": 9}',
      'mtp', '{"method": "mtp", "num_speculative_tokens": 2, "model": "draft"}']) {
      const r = await refusal([dir.model, '--speculative-config', bad]);
      assert.notEqual(r.code, 0, bad);
      assert.match(r.log, /--speculative-config/, bad);
    }
  });
});
