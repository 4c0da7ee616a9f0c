// The Responses API (POST /v1/responses) against the real server, through the
// official openai client: text whole and streamed (the same text, events in
// order and numbered), instructions and multi-turn input rendered as chat
// renders the same messages, json_schema output, a tool call fed back with
// its output, reasoning items, the output-token limit, the API key, and bad
// input answered with 400s, and a client that leaves mid-stream.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import OpenAI from 'openai';

import { PERSON, SEARCH as CHAT_SEARCH, WEATHER as CHAT_WEATHER, flatTool } from './agent_fixtures.mjs';
import { metric, metrics, sleep, startServer } from './harness.mjs';

const MODEL = 'hyllm-tiny';
const KEY = 'responses-test-key';
const ajv = new Ajv({ strict: false });

const WEATHER = flatTool(CHAT_WEATHER);
const SEARCH = flatTool(CHAT_SEARCH);

let agent;     // --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser qwen3_coder --api-key
let thinking;  // the same parsers, thinking on by default
let client;
let thinkingClient;

const clientFor = (server, apiKey = 'none') =>
  new OpenAI({ baseURL: `${server.base}/v1`, apiKey, maxRetries: 0, timeout: 120000 });

before(async () => {
  const agentArgs = ['--reasoning-parser', 'qwen3', '--enable-auto-tool-choice', '--tool-call-parser', 'qwen3_coder'];
  agent = await startServer({ args: [...agentArgs, '--api-key', KEY] });
  thinking = await startServer({ args: [...agentArgs, '--default-chat-template-kwargs', '{"enable_thinking": true}'] });
  client = clientFor(agent, KEY);
  thinkingClient = clientFor(thinking);
});
after(async () => {
  for (const s of [agent, thinking]) {
    const { code } = await s.stop();
    assert.equal(code, 0, s.log());
  }
});

async function post(path, body, { server = agent, key = KEY } = {}) {
  const headers = { 'content-type': 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  const r = await fetch(`${server.base}${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
  return { status: r.status, text: await r.text() };
}

// Prompt tokens of chat messages rendered by the same template.
async function chatPromptTokens(messages, tools) {
  const r = await post('/tokenize', { messages, ...(tools ? { tools } : {}) });
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text).count;
}

// The text of a response's message items (the stream helper's final response
// has no output_text convenience).
const textOf = (response) => response.output.filter((o) => o.type === 'message')
  .flatMap((m) => m.content.filter((c) => c.type === 'output_text').map((c) => c.text)).join('');


describe('text', () => {
  it('a whole response: a message item, usage, and the request echoed', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'What does the json module do?', max_output_tokens: 400, temperature: 0, metadata: { run: 'e2e' } });
    assert.equal(r.object, 'response');
    assert.match(r.id, /^resp_/);
    assert.equal(r.model, MODEL);
    assert.ok(['completed', 'incomplete'].includes(r.status));
    assert.equal(r.output.length, 1);
    const item = r.output[0];
    assert.equal(item.type, 'message');
    assert.equal(item.role, 'assistant');
    assert.match(item.id, /^msg_/);
    assert.equal(item.content[0].type, 'output_text');
    assert.deepEqual(item.content[0].annotations, []);
    assert.ok(r.output_text.length > 0);
    assert.equal(r.output_text, item.content[0].text);
    assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
    assert.ok(r.usage.output_tokens > 0);
    assert.equal(r.usage.output_tokens_details.reasoning_tokens, 0);
    assert.equal(r.temperature, 0);
    assert.equal(r.max_output_tokens, 400);
    assert.deepEqual(r.metadata, { run: 'e2e' });
    assert.deepEqual(r.tools, []);
  });

  it('a stream: its deltas are the whole text, its events in order and numbered', async () => {
    const body = { model: MODEL, input: 'How do I sort a list?', max_output_tokens: 40, temperature: 0.8, seed: 3 };
    const whole = await client.responses.create(body);
    const events = [];
    for await (const e of await client.responses.create({ ...body, stream: true })) events.push(e);
    events.forEach((e, i) => assert.equal(e.sequence_number, i, JSON.stringify(e)));
    const kinds = events.map((e) => e.type);
    assert.deepEqual(kinds.slice(0, 4), ['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added']);
    assert.deepEqual(kinds.slice(-4), ['response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed']);
    assert.ok(kinds.slice(4, -4).every((k) => k === 'response.output_text.delta'), kinds.join(' '));
    assert.equal(events[0].response.status, 'in_progress');
    assert.deepEqual(events[0].response.output, []);
    const text = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('');
    assert.equal(text, whole.output_text);
    const done = events.at(-1).response;
    assert.equal(done.id, events[0].response.id);
    assert.equal(done.output[0].content[0].text, text);
    assert.equal(done.output[0].id, events[2].item.id);
    assert.equal(done.status, whole.status);
    assert.equal(done.usage.input_tokens, whole.usage.input_tokens);
    assert.equal(done.usage.output_tokens, whole.usage.output_tokens);

    // The client's stream helper rebuilds the same response from the events.
    const final = await client.responses.stream(body).finalResponse();
    assert.equal(textOf(final), whole.output_text);
  });

  it('raw SSE: each event names its type, and there is no [DONE]', async () => {
    const r = await post('/v1/responses', { model: MODEL, input: 'hi', max_output_tokens: 4, temperature: 0, stream: true });
    assert.equal(r.status, 200);
    const blocks = r.text.trim().split('\n\n');
    for (const block of blocks) {
      const [eventLine, dataLine] = block.split('\n');
      const type = eventLine.replace(/^event: /, '');
      assert.equal(JSON.parse(dataLine.replace(/^data: /, '')).type, type, block);
    }
    assert.ok(!r.text.includes('[DONE]'));
  });

  it('max_output_tokens stops it: status incomplete, whole and streamed', async () => {
    const body = { model: MODEL, input: 'Explain Python decorators in detail.', max_output_tokens: 3, temperature: 0 };
    const r = await client.responses.create(body);
    assert.equal(r.status, 'incomplete');
    assert.deepEqual(r.incomplete_details, { reason: 'max_output_tokens' });
    assert.equal(r.usage.output_tokens, 3);
    const final = await client.responses.stream(body).finalResponse();
    assert.equal(final.status, 'incomplete');
    assert.equal(textOf(final), r.output_text);
  });
});

describe('conversation', () => {
  it('instructions come first, as a system message', async () => {
    const r = await client.responses.create({ model: MODEL, instructions: 'Answer in one word.', input: 'What is a tuple?', max_output_tokens: 8, temperature: 0 });
    assert.equal(r.instructions, 'Answer in one word.');
    const expected = await chatPromptTokens([
      { role: 'system', content: 'Answer in one word.' }, { role: 'user', content: 'What is a tuple?' },
    ]);
    assert.equal(r.usage.input_tokens, expected);
  });

  it('a multi-turn input list renders as the same chat', async () => {
    const first = await client.responses.create({ model: MODEL, input: 'Name a sorting function.', max_output_tokens: 12, temperature: 0 });
    const input = [
      { role: 'user', content: 'Name a sorting function.' },
      ...first.output,  // the previous response's message item, as clients feed it back
      { role: 'user', content: [{ type: 'input_text', text: 'And how is it called?' }] },
    ];
    const r = await client.responses.create({ model: MODEL, input, max_output_tokens: 12, temperature: 0 });
    assert.ok(r.output_text.length > 0);
    const expected = await chatPromptTokens([
      { role: 'user', content: 'Name a sorting function.' },
      { role: 'assistant', content: first.output_text },
      { role: 'user', content: 'And how is it called?' },
    ]);
    assert.equal(r.usage.input_tokens, expected);
  });
});

describe('structured output', () => {
  it('text.format json_schema: the output parses and fits the schema', async () => {
    const validate = ajv.compile(PERSON);
    for (const seed of [1, 2]) {
      const r = await client.responses.create({
        model: MODEL, input: 'Describe a programmer as JSON.', max_output_tokens: 400, temperature: 0.8, seed,
        text: { format: { type: 'json_schema', name: 'person', strict: true, schema: PERSON } },
      });
      assert.equal(r.status, 'completed', r.output_text);
      const value = JSON.parse(r.output_text);
      assert.ok(validate(value), `${r.output_text}: ${ajv.errorsText(validate.errors)}`);
      assert.equal(r.text.format.type, 'json_schema');
    }
  });
});

describe('tool calls', () => {
  const ask = 'What is the weather in Paris this week?';
  const validArgs = ajv.compile(WEATHER.parameters);

  it('a named tool: a function_call item, then its output fed back', async () => {
    const r = await client.responses.create({
      model: MODEL, input: ask, tools: [WEATHER, SEARCH], tool_choice: { type: 'function', name: 'get_weather' },
      max_output_tokens: 120, temperature: 0.7, seed: 1,
    });
    assert.equal(r.status, 'completed');
    const calls = r.output.filter((o) => o.type === 'function_call');
    assert.equal(calls.length, 1, JSON.stringify(r.output));
    const call = calls[0];
    assert.equal(call.name, 'get_weather');
    assert.match(call.call_id, /^call_/);
    assert.match(call.id, /^fc_/);
    assert.ok(validArgs(JSON.parse(call.arguments)), call.arguments);
    assert.deepEqual(r.tools[0], WEATHER);

    const input = [
      { role: 'user', content: ask },
      ...r.output,
      { type: 'function_call_output', call_id: call.call_id, output: '{"temperature_c": 18, "sky": "clear"}' },
    ];
    const followUp = await client.responses.create({ model: MODEL, input, tools: [WEATHER, SEARCH], max_output_tokens: 16, temperature: 0 });
    assert.ok(['completed', 'incomplete'].includes(followUp.status));
    assert.ok(followUp.output.length >= 1);
    // The call and its result reached the prompt as chat renders them.
    const expected = await chatPromptTokens([
      { role: 'user', content: ask },
      { role: 'assistant', content: null, tool_calls: [{ id: call.call_id, type: 'function', function: { name: call.name, arguments: call.arguments } }] },
      { role: 'tool', tool_call_id: call.call_id, content: '{"temperature_c": 18, "sky": "clear"}' },
    ], [CHAT_WEATHER, CHAT_SEARCH]);
    assert.equal(followUp.usage.input_tokens, expected);
  });

  it('streamed calls: item added, argument deltas, done; the same calls as a whole response', async () => {
    const body = {
      model: MODEL, input: ask, tools: [WEATHER, SEARCH], tool_choice: 'required', max_output_tokens: 160, temperature: 0.9, seed: 7,
    };
    const whole = await client.responses.create(body);
    const events = [];
    for await (const e of await client.responses.create({ ...body, stream: true })) events.push(e);
    const added = events.filter((e) => e.type === 'response.output_item.added' && e.item.type === 'function_call');
    assert.ok(added.length >= 1);
    for (const a of added) {
      const deltas = events.filter((e) => e.type === 'response.function_call_arguments.delta' && e.item_id === a.item.id);
      const done = events.find((e) => e.type === 'response.function_call_arguments.done' && e.item_id === a.item.id);
      assert.equal(deltas.map((d) => d.delta).join(''), done.arguments);
      JSON.parse(done.arguments);
    }
    const strip = (output) => output.filter((o) => o.type === 'function_call').map((c) => ({ name: c.name, arguments: c.arguments }));
    assert.deepEqual(strip(events.at(-1).response.output), strip(whole.output));
    const final = await client.responses.stream(body).finalResponse();
    assert.deepEqual(strip(final.output), strip(whole.output));
  });
});

describe('reasoning', () => {
  it('thinking becomes a reasoning item, streamed and whole alike', async () => {
    let body;
    let r;
    for (let seed = 1; seed <= 12 && !r?.output.some((o) => o.type === 'reasoning'); ++seed) {
      body = { model: MODEL, input: 'What does the json module do?', max_output_tokens: 24, temperature: 0.9, seed, reasoning: { effort: 'low' } };
      r = await thinkingClient.responses.create(body);
    }
    const item = r.output.find((o) => o.type === 'reasoning');
    assert.ok(item, JSON.stringify(r.output));
    assert.match(item.id, /^rs_/);
    assert.equal(item.content[0].type, 'reasoning_text');
    assert.ok(item.content[0].text.length > 0);
    assert.ok(r.usage.output_tokens_details.reasoning_tokens > 0);
    assert.ok(r.usage.output_tokens_details.reasoning_tokens <= r.usage.output_tokens);
    assert.equal(r.reasoning.effort, 'low');

    let reasoning = '';
    let text = '';
    for await (const e of await thinkingClient.responses.create({ ...body, stream: true })) {
      if (e.type === 'response.reasoning_text.delta') reasoning += e.delta;
      if (e.type === 'response.output_text.delta') text += e.delta;
    }
    assert.equal(reasoning, item.content[0].text);
    assert.equal(text, r.output_text);
    const final = await thinkingClient.responses.stream(body).finalResponse();
    assert.equal(final.output.find((o) => o.type === 'reasoning').content[0].text, item.content[0].text);
  });
});

describe('lifecycle', () => {
  it('a client that leaves mid-stream has its request aborted and its cache freed', async () => {
    const abortedBefore = metric(await metrics(thinking.base), 'vllm:request_success_total', { finished_reason: 'abort' }) ?? 0;
    const controller = new AbortController();
    const stream = await thinkingClient.responses.create(
      { model: MODEL, input: 'A very long story:', max_output_tokens: 900, ignore_eos: true, stream: true },
      { signal: controller.signal });
    let deltas = 0;
    try {
      for await (const e of stream) {
        if (e.type.endsWith('.delta') && ++deltas === 3) controller.abort();
      }
    } catch { /* aborted on purpose */ }
    // Events the client had already read when the abort landed may still
    // come out of the iterator (as in load.test.mjs).
    assert.ok(deltas >= 3);
    const deadline = Date.now() + 3000;
    let m;
    for (;;) {
      m = await metrics(thinking.base);
      const idle = metric(m, 'vllm:num_requests_running') === 0 && metric(m, 'vllm:kv_cache_usage_perc') === 0;
      if (idle || Date.now() > deadline) break;
      await sleep(20);
    }
    assert.equal(metric(m, 'vllm:num_requests_running'), 0);
    assert.equal(metric(m, 'vllm:kv_cache_usage_perc'), 0);
    assert.equal(metric(m, 'vllm:request_success_total', { finished_reason: 'abort' }), abortedBefore + 1);
  });
});

describe('bad input', () => {
  const cases = [
    ['no input', {}],
    ['an empty input list', { input: [] }],
    ['an image', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://x/y.png' }] }] }],
    ['an unknown item type', { input: [{ type: 'computer_call', id: 'c' }] }],
    ['background mode', { input: 'x', background: true }],
    ['previous_response_id', { input: 'x', previous_response_id: 'resp_123' }],
    ['a built-in tool', { input: 'x', tools: [{ type: 'web_search_preview' }] }],
    ['a tool choice naming no given tool', { input: 'x', tools: [WEATHER], tool_choice: { type: 'function', name: 'other' } }],
    ['json_schema without a schema', { input: 'x', text: { format: { type: 'json_schema', name: 'p' } } }],
    ['a malformed schema', { input: 'x', text: { format: { type: 'json_schema', name: 'p', schema: { type: 'no-such-type' } } } }],
    ['max_output_tokens 0', { input: 'x', max_output_tokens: 0 }],
    ['output logprobs', { input: 'x', include: ['message.output_text.logprobs'] }],
    ['a prompt over the context', { input: 'word '.repeat(2000) }],
  ];
  for (const [name, body] of cases) {
    it(`400: ${name}`, async () => {
      const r = await post('/v1/responses', { model: MODEL, ...body });
      assert.equal(r.status, 400, r.text);
      const err = JSON.parse(r.text).error;
      assert.equal(err.type, 'BadRequestError');
      assert.ok(err.message.length > 0);
    });
  }

  it('the client sees a 400 as a BadRequestError, and an unknown model as 404', async () => {
    const e = await client.responses.create({ model: MODEL, input: 'x', background: true }).then(() => null, (x) => x);
    assert.equal(e?.status, 400);
    assert.match(e.message, /background/);
    const m = await client.responses.create({ model: 'no-such-model', input: 'x' }).then(() => null, (x) => x);
    assert.equal(m?.status, 404);
  });

  it('401 without the API key', async () => {
    const r = await post('/v1/responses', { model: MODEL, input: 'x' }, { key: null });
    assert.equal(r.status, 401);
  });

  it('the server keeps serving after all of that', async () => {
    const r = await client.responses.create({ model: MODEL, input: 'hi', max_output_tokens: 4, temperature: 0 });
    assert.ok(r.output_text.length > 0);
  });
});
