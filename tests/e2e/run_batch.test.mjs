// `hyllm run-batch`: the real binary answers an OpenAI Batch API file on the
// CPU with the embedded model, in process. Each answered line holds what
// `hyllm serve` answers for the same body; refused lines keep their place,
// custom_id and status; only an unreadable input, an unwritable output or a
// model that does not load fail the run.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, it } from 'node:test';

import { HYLLM_BIN, startServer } from './harness.mjs';

const ENGINE_FLAGS = ['--device', 'cpu', '--max-model-len', '1024', '--kv-cache-memory', '256m'];

let dir;
let server;  // the reference: `hyllm serve` with the same engine flags

// Runs `hyllm run-batch` to its end: its exit code, stdout and stderr.
function runBatch(args, { input } = {}) {
  return new Promise((resolve) => {
    const proc = spawn(HYLLM_BIN, ['run-batch', ...ENGINE_FLAGS, ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d) => { stdout += d; });
    proc.stderr.on('data', (d) => { stderr += d; });
    proc.on('exit', (code) => resolve({ code, stdout, stderr }));
    proc.stdin.end(input ?? '');
  });
}

function line(customId, url, body, method = 'POST') {
  return JSON.stringify({ custom_id: customId, method, url, body });
}

const chatGreedy = { messages: [{ role: 'user', content: 'What does the json module do?' }], max_tokens: 12, temperature: 0 };
const completionGreedy = { prompt: 'The os module', max_tokens: 8, temperature: 0, logprobs: 2 };
const chatSeeded = { messages: [{ role: 'user', content: 'How do I sort a list?' }], max_tokens: 10, temperature: 0.8, seed: 7 };
const responsesGreedy = { input: 'What does the os module do?', max_output_tokens: 8, temperature: 0 };

// Everything of a response but its id and creation time, which differ per request.
function comparable(body) {
  const { id, created, ...rest } = body;
  return rest;
}

async function post(route, body) {
  const r = await fetch(`${server.base}${route}`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'hyllm-run-batch-'));
  server = await startServer();
});
after(async () => {
  const r = await server?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(r?.code, 0);
});

describe('hyllm run-batch', () => {
  it('answers every line in input order, as `hyllm serve` answers each body', async () => {
    const input = [
      line('chat-greedy', '/v1/chat/completions', chatGreedy),
      '',
      line('completion-greedy', '/v1/completions', completionGreedy),
      '{"custom_id": "broken", "method": "POST",',
      line('embeddings', '/v1/embeddings', { input: 'x' }),
      line('streamed', '/v1/chat/completions', { ...chatGreedy, stream: true }),
      line('bad-body', '/v1/chat/completions', { messages: 'not a list' }),
      line('unknown-model', '/v1/completions', { model: 'gpt-4', prompt: 'x' }),
      line('chat-seeded', '/v1/chat/completions', chatSeeded),
      line('get', '/v1/completions', { prompt: 'x' }, 'GET'),
      line('responses', '/v1/responses', responsesGreedy),
    ].join('\r\n') + '\n';
    const inFile = path.join(dir, 'in.jsonl');
    const outFile = path.join(dir, 'out.jsonl');
    fs.writeFileSync(inFile, input);
    const run = await runBatch(['-i', inFile, '-o', outFile]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(run.stdout, '');
    assert.match(run.stderr, /Running 10 requests, 10 at a time/);
    assert.match(run.stderr, /Batch complete: 10 requests, 4 answered 200, 6 failed/);

    const text = fs.readFileSync(outFile, 'utf8');
    assert.ok(text.endsWith('\n'));
    const out = text.trimEnd().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(out.map((o) => o.custom_id),
      ['chat-greedy', 'completion-greedy', null, 'embeddings', 'streamed', 'bad-body', 'unknown-model', 'chat-seeded', 'get', 'responses']);
    assert.deepEqual(out.map((o) => o.response.status_code), [200, 200, 400, 400, 400, 400, 404, 200, 400, 200]);
    for (const o of out) {
      assert.deepEqual(Object.keys(o), ['id', 'custom_id', 'response', 'error']);
      assert.deepEqual(Object.keys(o.response), ['status_code', 'request_id', 'body']);
      assert.match(o.id, /^hyllm-[0-9a-f]{32}$/);
      assert.match(o.response.request_id, /^hyllm-batch-[0-9a-f]{32}$/);
    }
    assert.equal(new Set(out.map((o) => o.id)).size, out.length);

    // Answered: the endpoint's body, no error; the same answer `hyllm serve` gives.
    const answered = { 0: ['/v1/chat/completions', chatGreedy], 1: ['/v1/completions', completionGreedy], 7: ['/v1/chat/completions', chatSeeded] };
    for (const [i, [route, body]] of Object.entries(answered)) {
      const o = out[i];
      assert.equal(o.error, null);
      assert.equal(o.response.body.object, route === '/v1/completions' ? 'text_completion' : 'chat.completion');
      assert.equal(o.response.body.usage.completion_tokens, body.max_tokens);
      const reference = await post(route, body);
      assert.equal(reference.status, 200);
      assert.deepEqual(comparable(o.response.body), comparable(reference.body), `${o.custom_id} differs from serve`);
    }
    assert.equal(out[1].response.body.choices[0].logprobs.tokens.length, 8);
    const responses = out[9].response.body;
    const responsesReference = (await post('/v1/responses', responsesGreedy)).body;
    assert.equal(out[9].error, null);
    assert.equal(responses.object, 'response');
    assert.equal(responses.usage.output_tokens, 8);
    // Token counts only: which prompt tokens come from the prefix cache depends on what ran before.
    assert.equal(responses.usage.input_tokens, responsesReference.usage.input_tokens);
    assert.equal(responses.usage.output_tokens, responsesReference.usage.output_tokens);
    assert.deepEqual(responses.output.map((item) => item.content), responsesReference.output.map((item) => item.content));

    // Never reached an endpoint: status 400, the reason as a string (vLLM's shape).
    for (const i of [2, 3, 4, 8]) assert.equal(out[i].response.body, null);
    assert.match(out[2].error, /^Line 4: Invalid batch request line: /);
    assert.equal(out[3].error, 'URL /v1/embeddings was used. Supported endpoints: /v1/chat/completions, /v1/completions, /v1/responses.');
    assert.equal(out[4].error, 'Request must not be sent in stream mode');
    assert.match(out[8].error, /only POST/);

    // Refused by the endpoint: its status and error object, as over HTTP.
    const badBody = await post('/v1/chat/completions', { messages: 'not a list' });
    assert.equal(out[5].response.body, null);
    assert.deepEqual(out[5].error, badBody.body);
    assert.equal(out[5].error.error.param, 'messages');
    const unknownModel = await post('/v1/completions', { model: 'gpt-4', prompt: 'x' });
    assert.deepEqual(out[6].error, unknownModel.body);
    assert.equal(out[6].error.error.type, 'NotFoundError');
  });

  it('keeps the input order when more lines than may run at once finish out of order', async () => {
    // --max-num-seqs 2 lets 4 lines run at once; longer lines come first.
    const lengths = [9, 7, 5, 3, 1, 8, 6, 4, 2, 1];
    const input = lengths.map((n, i) => line(`r${i}`, '/v1/completions',
      { prompt: `Line ${i} of the file`, max_tokens: n, temperature: 0, ignore_eos: true })).join('\n');
    const run = await runBatch(['-i', '-', '-o', '-', '--max-num-seqs', '2'], { input });
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, /Running 10 requests, 4 at a time/);
    const out = run.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(out.map((o) => o.custom_id), lengths.map((_, i) => `r${i}`));
    assert.deepEqual(out.map((o) => o.response.body.usage.completion_tokens), lengths);
  });

  it('reads stdin and writes stdout for -', async () => {
    const run = await runBatch(['-i', '-', '-o', '-'], {
      input: line('one', '/v1/completions', { prompt: 'The sys module', max_tokens: 3, temperature: 0 }) + '\n',
    });
    assert.equal(run.code, 0, run.stderr);
    const out = run.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    assert.equal(out.length, 1);
    assert.equal(out[0].custom_id, 'one');
    assert.equal(out[0].response.body.usage.completion_tokens, 3);
  });

  it('refuses a line with a number beyond a double and answers the others', async () => {
    // JSON.stringify cannot write 1e999; the line is spelled out.
    const big = '{"custom_id": "big", "method": "POST", "url": "/v1/completions", "body": {"prompt": "x", "temperature": 1e999}}';
    const input = [big, line('after', '/v1/completions', { prompt: 'The re module', max_tokens: 2, temperature: 0 })].join('\n');
    const run = await runBatch(['-i', '-', '-o', '-'], { input });
    assert.equal(run.code, 0, run.stderr);
    const out = run.stdout.trimEnd().split('\n').map((l) => JSON.parse(l));
    // A line that is not JSON has no custom_id to read: its line number names it.
    assert.deepEqual(out.map((o) => o.custom_id), [null, 'after']);
    assert.deepEqual(out.map((o) => o.response.status_code), [400, 200]);
    assert.match(out[0].error, /^Line 1: Invalid batch request line: .*number overflow/);
  });

  it('fails with a clear message when a file cannot be read or written, or the model is missing', async () => {
    const inFile = path.join(dir, 'one.jsonl');
    fs.writeFileSync(inFile, line('x', '/v1/completions', { prompt: 'x', max_tokens: 1 }) + '\n');
    // More output than the file's buffer holds: the write fails while requests still run.
    const manyFile = path.join(dir, 'many.jsonl');
    fs.writeFileSync(manyFile, Array.from({ length: 40 }, (_, i) => line(`m${i}`, '/v1/completions',
      { prompt: `Line ${i}`, max_tokens: 30, temperature: 0, ignore_eos: true })).join('\n'));
    const cases = [
      [['-i', manyFile, '-o', '/dev/full', '--max-num-seqs', '2'], /cannot write the output file \/dev\/full: No space left/],
      [['-i', path.join(dir, 'missing.jsonl'), '-o', path.join(dir, 'o1.jsonl')], /cannot read the input file .*missing\.jsonl/],
      [['-i', inFile, '-o', path.join(dir, 'no-such-dir', 'o.jsonl')], /cannot write the output file .*no-such-dir/],
      [['-i', 'https://example.com/in.jsonl', '-o', path.join(dir, 'o2.jsonl')], /URLs are not supported/],
      [['-i', inFile, '-o', path.join(dir, 'o3.jsonl'), '--model', path.join(dir, 'no-model')], /model directory .*no-model does not exist/],
      [['-i', inFile], /--output-file is required/],
    ];
    for (const [args, message] of cases) {
      const run = await runBatch(args);
      assert.notEqual(run.code, 0, args.join(' '));
      assert.match(run.stderr, message);
    }
  });
});
