// API keys on and off, and SIGTERM: new work is refused, in-flight requests
// finish within --shutdown-timeout (or are aborted with timeout 0), then the
// process exits cleanly.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import OpenAI from 'openai';

import { HYLLM_BIN, sleep, startServer } from './harness.mjs';

describe('startup', () => {
  const refused = [
    [['--tensor-parallel-size', '3'], /tensor parallel size 3 does not divide the model's num_attention_heads/],
    [['--pipeline-parallel-size', '2'], /pipeline-parallel-size 2: pipeline parallelism is not available/],
    [['--kv-cache-dtype', 'fp8_e5m2'], /kv-cache-dtype fp8_e5m2 is not supported/],
    [['--quantization', 'modelopt'], /--quantization modelopt/],
    [['--dtype', 'float16'], /--dtype float16/],
    [['--load-format', 'pt'], /load format/],
    [['--max-model-len', '100k'], /max_model_len \(100000\)/],
    [['--mamba-ssm-cache-dtype', 'bfloat16'], /--mamba-ssm-cache-dtype bfloat16: hyllm keeps the GDN recurrent state in float32/],
    [['--mamba-cache-dtype', 'float32'], /--mamba-cache-dtype float32: hyllm keeps the GDN conv state in bfloat16/],
    [['--num-gpu-blocks-override', '10'], /max seq len \(2048\) is larger than the maximum number of tokens that can be stored in KV cache \(160\)/],
    [['--max-model-len', '4294969344'], /max_model_len \(4294969344\)/],
    [['--chat-template', '/nonexistent/template.jinja'], /looks like a file path/],
    [['--reasoning-parser', 'granite'], /--reasoning-parser granite: unknown/],
    [['--tool-call-parser', 'pythonic'], /--tool-call-parser pythonic: unknown/],
    [['--enable-auto-tool-choice'], /needs --tool-call-parser/],
    [['/nonexistent/model'], /does not exist/],
    [[fileURLToPath(import.meta.url)], /is not a directory/],
    [['--tokenizer', '/nonexistent/tokenizer'], /tokenizer directory \/nonexistent\/tokenizer does not exist/],
    [['--host', '999.1.1.1'], /cannot listen on 999\.1\.1\.1:0: not an address of this host/],
  ];
  for (const [args, message] of refused) {
    it(`refuses ${args.join(' ')} with a clear message`, () => {
      const r = spawnSync(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', ...args], { encoding: 'utf8', timeout: 30000 });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, message);
    });
  }
  for (const flag of ['--num-gpu-blocks-override', '--max-cudagraph-capture-size']) {
    it(`refuses ${flag} below 1`, () => {
      const r = spawnSync(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', flag, '0'],
        { encoding: 'utf8', timeout: 30000 });
      assert.notEqual(r.status, 0);
      assert.match(r.stderr + r.stdout, new RegExp(`${flag}: Value 0 not in range 1 to`));
    });
  }
  it('refuses a log level it does not know (it would log nothing)', () => {
    const r = spawnSync(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', '--uvicorn-log-level', 'bogus'],
      { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr + r.stdout, /--uvicorn-log-level: bogus not in/);
  });
});

describe('fp8', () => {
  const cacheTokens = (log) => Number(log.match(/KV cache size: ([\d,]+) tokens/)[1].replaceAll(',', ''));
  it('stores the KV cache in fp8 (twice the tokens) and quantizes a BF16 model online', async () => {
    const plain = await startServer();
    const bf16Tokens = cacheTokens(plain.log());
    assert.equal((await plain.stop()).code, 0);
    const server = await startServer({ args: ['--kv-cache-dtype', 'fp8', '--quantization', 'fp8'] });
    try {
      assert.match(server.log(), /KV cache dtype: fp8_e4m3/);
      assert.match(server.log(), /quantizing the linear weights to FP8 on load/);
      const tokens = cacheTokens(server.log());
      assert.ok(tokens >= 2 * bf16Tokens - 64 && tokens <= 2 * bf16Tokens + 64, `${tokens} vs ${bf16Tokens}`);
      const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'x', maxRetries: 0 });
      const r = await client.completions.create({ model: 'hyllm-tiny', prompt: 'The for statement', max_tokens: 8 });
      assert.equal(r.usage.completion_tokens, 8);
      assert.ok(r.choices[0].text.length > 0);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });
});

describe('cache plan', () => {
  it('takes exactly --num-gpu-blocks-override KV blocks and gives the GDN slots the rest (and the vLLM state dtype flags that name what hyllm stores)', async () => {
    const server = await startServer({
      args: ['--num-gpu-blocks-override', '300', '--max-num-seqs', '8', '--mamba-ssm-cache-dtype', 'float32',
        '--mamba-cache-dtype', 'bfloat16', '--max-cudagraph-capture-size', '16'],
    });
    try {
      assert.match(server.log(), /KV cache size: 4,800 tokens \(300 blocks of 16 tokens/);
      assert.match(server.log(), /GDN state slots: 16 /);
      const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'x', maxRetries: 0 });
      const r = await client.completions.create({ model: 'hyllm-tiny', prompt: 'The for statement', max_tokens: 8 });
      assert.equal(r.usage.completion_tokens, 8);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });
});

describe('--config', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-config-'));
  const write = (name, text) => {
    const file = path.join(dir, name);
    fs.writeFileSync(file, text);
    return file;
  };
  it('reads flags from a YAML file, the command line winning', async () => {
    const file = write('serve.yaml', [
      '# vLLM-style serve config',
      'served-model-name: [alpha, beta]',
      'max_num_seqs: 8',
      'enable-prefix-caching: false',
      "speculative-config: '{\"method\": \"mtp\", \"num_speculative_tokens\": 1}'",
      '',
    ].join('\n'));
    const server = await startServer({ args: ['--config', file, '--max-num-seqs', '3'] });
    try {
      assert.match(server.log(), /GDN state slots: 3 /);
      assert.match(server.log(), /up to 1 draft tokens per step/);
      const models = await (await fetch(`${server.base}/v1/models`)).json();
      assert.deepEqual(models.data.map((m) => m.id), ['alpha', 'beta']);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });
  const refused = [
    ['bogus-flag: 3\n', /'bogus-flag' is not a serve flag/],
    ['max-num-seqs: many\n', /max-num-seqs: Could not convert/],
    ['compilation-config:\n  level: 3\n', /'compilation-config' is not a serve flag/],
  ];
  refused.forEach(([text, message], i) => {
    it(`refuses ${JSON.stringify(text)} naming the file and the key`, () => {
      const file = write(`bad${i}.yaml`, text);
      const r = spawnSync(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', '--config', file],
        { encoding: 'utf8', timeout: 30000 });
      assert.equal(r.status, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`--config ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: `));
      assert.match(r.stderr, message);
    });
  });
});

describe('access log', () => {
  it('leaves out the request lines of the paths listed, or all of them', async () => {
    const requestLines = async (args) => {
      const server = await startServer({ args });
      try {
        for (const path of ['/v1/models', '/version', '/tokenize']) {
          const r = await fetch(`${server.base}${path}`);
          await r.text();
        }
      } finally {
        assert.equal((await server.stop()).code, 0);
      }
      return server.log().split('\n').filter((l) => / - "GET \//.test(l)).join('\n');
    };
    const some = await requestLines(['--disable-access-log-for-endpoints', '/v1/models,/tokenize']);
    assert.match(some, /"GET \/version HTTP\/1\.1" 200/);
    assert.doesNotMatch(some, /GET \/v1\/models|GET \/tokenize/);
    assert.equal(await requestLines(['--disable-uvicorn-access-log']), '');
  });
  it('refuses an endpoint that is not a path', () => {
    const r = spawnSync(HYLLM_BIN, ['serve', '--device', 'cpu', '--port', '0', '--disable-access-log-for-endpoints', 'health'],
      { encoding: 'utf8', timeout: 30000 });
    assert.notEqual(r.status, 0);
    assert.match(r.stderr + r.stdout, /a request path starts with \/: health/);
  });
});

describe('api key', () => {
  it('guards everything but /health, /version and /metrics', async () => {
    const server = await startServer({ args: ['--api-key', 'sekrit'] });
    try {
      const get = (path, key) => fetch(`${server.base}${path}`, { headers: key ? { authorization: `Bearer ${key}` } : {} });
      assert.equal((await get('/v1/models')).status, 401);
      assert.equal((await get('/v1/models', 'wrong')).status, 401);
      assert.equal((await get('/v1/models', 'sekri')).status, 401);
      assert.equal((await get('/v1/models', 'sekrit')).status, 200);
      for (const open of ['/health', '/version', '/metrics']) assert.equal((await get(open)).status, 200, open);
      assert.equal((await get('/nonexistent')).status, 401);
      const tok = await fetch(`${server.base}/tokenize`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x' }),
      });
      assert.equal(tok.status, 401);
      const body = await (await get('/v1/models')).json();
      assert.equal(body.error.code, 401);

      const good = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'sekrit', maxRetries: 0 });
      const r = await good.completions.create({ model: 'hyllm-tiny', prompt: 'x', max_tokens: 2 });
      assert.equal(r.choices.length, 1);
      const bad = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'nope', maxRetries: 0 });
      await assert.rejects(bad.completions.create({ model: 'hyllm-tiny', prompt: 'x', max_tokens: 2 }), (e) => e.status === 401);
    } finally {
      assert.equal((await server.stop()).code, 0);
    }
  });

  it('takes the key from HYLLM_API_KEY, and is open without one', async () => {
    const server = await startServer({ env: { HYLLM_API_KEY: 'fromenv' } });
    try {
      assert.equal((await fetch(`${server.base}/v1/models`)).status, 401);
      const ok = await fetch(`${server.base}/v1/models`, { headers: { authorization: 'Bearer fromenv' } });
      assert.equal(ok.status, 200);
    } finally {
      await server.stop();
    }
    const open = await startServer();
    try {
      assert.equal((await fetch(`${open.base}/v1/models`)).status, 200);
    } finally {
      await open.stop();
    }
  });
});

describe('SIGTERM', () => {
  async function startStreams(server, count, maxTokens) {
    const client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });
    // Resolves once every stream has its first token: a request still in
    // flight when SIGTERM lands is rightly refused with 503.
    let allStarted;
    const gotFirst = new Promise((r) => { allStarted = r; });
    let started = 0;
    const runs = Array.from({ length: count }, async () => {
      const stream = await client.completions.create({
        model: 'hyllm-tiny', prompt: 'Draining:', max_tokens: maxTokens, ignore_eos: true, stream: true,
        stream_options: { include_usage: true },
      });
      let tokens = 0;
      let finish = null;
      for await (const chunk of stream) {
        if (chunk.choices.length) {
          tokens += 1;
          if (tokens === 1 && ++started === count) allStarted();
          finish = chunk.choices[0].finish_reason ?? finish;
        }
      }
      return { tokens, finish };
    });
    // A request that fails before its first token fails the test here.
    await Promise.race([gotFirst, Promise.all(runs)]);
    return runs;
  }

  it('drains in-flight requests within --shutdown-timeout, refusing new ones', async () => {
    const server = await startServer({ args: ['--shutdown-timeout', '60'] });
    const runs = await startStreams(server, 4, 150);
    server.proc.kill('SIGTERM');
    await sleep(100);
    // New work is refused while draining (503), or the listener is already gone.
    try {
      const r = await fetch(`${server.base}/v1/completions`, {
        method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: 'x' }),
      });
      assert.equal(r.status, 503);
      const h = await fetch(`${server.base}/health`);
      assert.equal(h.status, 503);
    } catch (e) {
      assert.match(String(e.cause?.code ?? e), /ECONNREFUSED|ECONNRESET|UND_ERR_SOCKET/);
    }
    const results = await Promise.all(runs);
    for (const r of results) {
      assert.equal(r.finish, 'length');
      assert.equal(r.tokens, 150);
    }
    const { code } = await server.exited;
    assert.equal(code, 0, server.log());
  });

  it('aborts in-flight requests at once with --shutdown-timeout 0', async () => {
    const server = await startServer();
    const runs = await startStreams(server, 2, 900);
    const t0 = Date.now();
    server.proc.kill('SIGTERM');
    const results = await Promise.all(runs);
    for (const r of results) {
      assert.equal(r.finish, 'abort');
      assert.ok(r.tokens < 900);
    }
    const { code } = await server.exited;
    assert.equal(code, 0, server.log());
    assert.ok(Date.now() - t0 < 8000);
  });
});
