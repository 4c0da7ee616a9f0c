// Malformed and hostile requests over raw HTTP: each gets the right status
// (and an OpenAI-shaped error body where there is a body), and the server
// stays healthy after every one.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';

import { bodyOf, rawRequest, startServer, statusOf } from './harness.mjs';

let server;
before(async () => { server = await startServer(); });
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

function post(path, body, { contentType = 'application/json', extra = '' } = {}) {
  const payload = Buffer.isBuffer(body) ? body : Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  return [
    Buffer.from(`POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: ${contentType}\r\n${extra}` +
      `Content-Length: ${payload.length}\r\nConnection: close\r\n\r\n`),
    payload,
  ];
}
const C = '/v1/completions';
const CHAT = '/v1/chat/completions';
const user = [{ role: 'user', content: 'hi' }];
const deep = '{"prompt":' + '['.repeat(5000) + ']'.repeat(5000) + '}';
const manyStops = Array.from({ length: 500 }, (_, i) => `s${i}`);
const manyMessages = Array.from({ length: 5000 }, () => ({ role: 'user', content: 'x' }));
const headerFlood = 'GET /health HTTP/1.1\r\nHost: x\r\n' +
  Array.from({ length: 300 }, (_, i) => `X-Flood-${i}: v\r\n`).join('') + '\r\n';

const cases = [
  ['invalid JSON', post(C, '{"prompt": '), 400],
  ['JSON array body', post(C, '[1,2,3]'), 400],
  ['missing prompt', post(C, { model: 'hyllm-tiny' }), 400],
  ['empty prompt', post(C, { prompt: '' }), 400],
  ['empty prompt list', post(C, { prompt: [] }), 400],
  ['prompt as object', post(C, { prompt: { a: 1 } }), 400],
  ['out-of-vocab token id', post(C, { prompt: [1, 2, 99999999] }), 400],
  ['negative token id', post(C, { prompt: [-5] }), 400],
  ['n = 0', post(C, { prompt: 'x', n: 0 }), 400],
  ['huge n', post(C, { prompt: 'x', n: 1000000 }), 400],
  ['negative max_tokens', post(C, { prompt: 'x', max_tokens: -1 }), 400],
  ['max_tokens past the context', post(C, { prompt: 'x', max_tokens: 1000000000 }), 400],
  ['max_tokens overflowing int64', post(C, '{"prompt":"x","max_tokens":1e300}'), 400],
  ['negative temperature', post(C, { prompt: 'x', temperature: -1 }), 400],
  ['top_p above 1', post(C, { prompt: 'x', top_p: 2 }), 400],
  ['logprobs above 20', post(C, { prompt: 'x', logprobs: 21 }), 400],
  // 7391 is the embedded model's one token for "aa": nothing is left to sample.
  ['every allowed token a bad word', post(C, { prompt: 'x', allowed_token_ids: [7391], bad_words: ['aa'] }), 400],
  ['min_tokens past the default max_tokens', post(C, { prompt: 'x', max_tokens: null, min_tokens: 5000 }), 400],
  ['500 stop strings', post(C, { prompt: 'x', stop: manyStops }), 400],
  ['empty stop string', post(C, { prompt: 'x', stop: [''] }), 400],
  ['stream_options without stream', post(C, { prompt: 'x', stream_options: { include_usage: true } }), 400],
  ['seed as a string', post(C, { prompt: 'x', seed: 'abc' }), 400],
  ['unknown model', post(C, { prompt: 'x', model: 'nope' }), 404],
  ['prompt over the context', post(C, { prompt: 'word '.repeat(3000), max_tokens: 1 }), 400],
  ['invalid UTF-8 in the body', post(C, Buffer.from([0x7b, 0x22, 0x70, 0x72, 0x6f, 0x6d, 0x70, 0x74, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d])), 400],
  ['JSON nested 5000 deep', post(C, deep), 400],
  ['chat without messages', post(CHAT, { model: 'hyllm-tiny' }), 400],
  ['chat with no messages', post(CHAT, { messages: [] }), 400],
  ['chat with 5000 messages', post(CHAT, { messages: manyMessages }), 400],
  ['chat message without role', post(CHAT, { messages: [{ content: 'x' }] }), 400],
  ['chat image content', post(CHAT, { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }] }), 400],
  ['top_logprobs without logprobs', post(CHAT, { messages: user, top_logprobs: 3 }), 400],
  ['empty tools list', post(CHAT, { messages: user, tools: [] }), 400],
  ['tool_choice without tools', post(CHAT, { messages: user, tool_choice: 'auto' }), 400],
  ['untrusted request chat template', post(CHAT, { messages: user, chat_template: '{{ 7*7 }}' }), 400],
  ['text/plain content type', post(C, { prompt: 'x' }, { contentType: 'text/plain' }), 400],
  ['gzip content encoding', post(C, { prompt: 'x' }, { extra: 'Content-Encoding: gzip\r\n' }), 415],
  ['declared 40 MB body', [Buffer.from(`POST ${C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 41943040\r\n\r\n`)], 413],
  ['GET on a POST route', [Buffer.from(`GET ${C} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`)], 405],
  ['unknown path', [Buffer.from('GET /v2/secret HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')], 404],
  ['path traversal', [Buffer.from('GET /../../etc/passwd HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')], 404],
  ['header flood', [Buffer.from(headerFlood)], 431],
  ['70 KB header line', [Buffer.from(`GET /health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(70000)}\r\n\r\n`)], 431],
  ['70 KB request line', [Buffer.from(`GET /${'a'.repeat(70000)} HTTP/1.1\r\nHost: x\r\n\r\n`)], 431],
  ['garbage request line', [Buffer.from('GARBAGE\r\n\r\n')], 400],
  ['Host header with a path', [Buffer.from('GET /v1/models HTTP/1.1\r\nHost: evil.com/v1\r\nConnection: close\r\n\r\n')], 400],
  ['body on a GET', [Buffer.from('GET /health HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello')], 400],
  // No Content-Length and no chunking, as `curl -X POST` sends it: an empty
  // body at once (the connection stays open), not a wait for its end.
  ['POST with no length, on a route without a body', [Buffer.from('POST /reset_prefix_cache HTTP/1.1\r\nHost: x\r\n\r\n')], 200],
  ['POST with no length, on a JSON route', [Buffer.from(`POST ${C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\r\n`)], 400],
  ['detokenize out of vocabulary', post('/detokenize', { tokens: [99999999] }), 400],
  ['tokenize without prompt', post('/tokenize', { nothing: true }), 400],
];

describe('hostile requests', () => {
  it(`has at least 30 cases (${cases.length})`, () => assert.ok(cases.length >= 30));
  for (const [name, bytes, expected] of cases) {
    it(`${name} -> ${expected}`, async () => {
      const raw = await rawRequest(server.port, bytes);
      assert.equal(statusOf(raw), expected, `${name}: ${raw.slice(0, 400)}`);
      const body = bodyOf(raw);
      if (body.length > 0) {
        const err = JSON.parse(body).error;
        assert.equal(err.code, expected);
        assert.equal(typeof err.message, 'string');
        assert.equal(typeof err.type, 'string');
      }
      const health = await fetch(`${server.base}/health`);
      assert.equal(health.status, 200, `unhealthy after ${name}`);
    });
  }

  it('accepts a chunked request body', async () => {
    const body = JSON.stringify({ prompt: 'The list', max_tokens: 2 });
    const raw = await rawRequest(server.port, [
      Buffer.from(`POST ${C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n`),
      Buffer.from(`${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`),
    ]);
    assert.equal(statusOf(raw), 200, raw.slice(0, 300));
  });

  it('refuses an endless chunked body at the cap', async () => {
    const chunk = Buffer.alloc(1 << 20, 0x20);
    const parts = [Buffer.from(`POST ${C} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n`)];
    for (let i = 0; i < 40; ++i) parts.push(Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from('\r\n'));
    const raw = await rawRequest(server.port, parts, { ms: 10000 });
    assert.equal(statusOf(raw), 413, raw.slice(0, 300));
  });

  it('still serves a normal request', async () => {
    const r = await fetch(`${server.base}/v1/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: 'The list', max_tokens: 3 }),
    });
    assert.equal(r.status, 200);
    assert.equal((await r.json()).usage.completion_tokens <= 3, true);
  });
});
