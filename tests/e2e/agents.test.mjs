// Agents against the real server, through the official openai client:
// structured output (json_schema validated by ajv; regex and choice), tool
// calls forced and fed back (streamed and not), reasoning split from content,
// and bad agent input answered with 400s. The embedded model's own template
// renders tools and thinking (Qwen3.5's conventions), so no --chat-template
// is needed.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import Ajv from 'ajv';
import OpenAI from 'openai';

import { PERSON, SEARCH, WEATHER } from './agent_fixtures.mjs';
import { startServer } from './harness.mjs';

const MODEL = 'hyllm-tiny';
const ajv = new Ajv({ strict: false });

let qwen;    // --reasoning-parser qwen3 --enable-auto-tool-choice --tool-call-parser qwen3_coder
let hermes;  // --tool-call-parser hermes, thinking on by default, no auto tool choice
let client;
let hermesClient;

const clientFor = (server) => new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120000 });

before(async () => {
  qwen = await startServer({ args: ['--reasoning-parser', 'qwen3', '--enable-auto-tool-choice', '--tool-call-parser', 'qwen3_coder'] });
  hermes = await startServer({
    args: ['--reasoning-parser', 'qwen3', '--tool-call-parser', 'hermes', '--default-chat-template-kwargs', '{"enable_thinking": true}'],
  });
  client = clientFor(qwen);
  hermesClient = clientFor(hermes);
});
after(async () => {
  for (const s of [qwen, hermes]) {
    const { code } = await s.stop();
    assert.equal(code, 0, s.log());
  }
});

async function post(server, body) {
  const r = await fetch(`${server.base}/v1/chat/completions`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

describe('structured output', () => {
  const messages = [{ role: 'user', content: 'Describe a programmer as JSON.' }];

  it('json_schema output validates, where the same request unconstrained does not', async () => {
    const validate = ajv.compile(PERSON);
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create({
        model: MODEL, messages, max_tokens: 400, temperature: 0.8, seed,
        response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: PERSON } },
      });
      const text = r.choices[0].message.content;
      assert.equal(r.choices[0].finish_reason, 'stop', text);
      const value = JSON.parse(text);
      assert.ok(validate(value), `${text}: ${ajv.errorsText(validate.errors)}`);
    }
    const free = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 200, temperature: 0.8, seed: 1 });
    let fits = false;
    try { fits = validate(JSON.parse(free.choices[0].message.content)); } catch { fits = false; }
    assert.equal(fits, false, 'the embedded model should not produce this JSON on its own');
  });

  it('streams the same constrained text', async () => {
    const body = {
      model: MODEL, messages, max_tokens: 200, temperature: 0.8, seed: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema: PERSON } },
    };
    const whole = await client.chat.completions.create(body);
    let text = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(text, whole.choices[0].message.content);
  });

  it('json_object, structured_outputs regex and choice', async () => {
    const obj = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 120, temperature: 0.7, seed: 3, response_format: { type: 'json_object' },
    });
    if (obj.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(obj.choices[0].message.content), 'object');
    const re = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'A version number?' }], max_tokens: 20, temperature: 1, seed: 4,
      structured_outputs: { regex: '[0-9]\\.[0-9]{1,2}\\.[0-9]' },
    });
    assert.match(re.choices[0].message.content, /^[0-9]\.[0-9]{1,2}\.[0-9]$/);
    const choice = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: 'Is Python typed?' }], max_tokens: 20, temperature: 1, seed: 9, n: 3,
      structured_outputs: { choice: ['statically typed', 'dynamically typed'] },
    });
    for (const c of choice.choices) assert.ok(['statically typed', 'dynamically typed'].includes(c.message.content));
  });

  it('completions take the same structured outputs, for every prompt of a batch', async () => {
    const choice = await client.completions.create({
      model: MODEL, prompt: ['Is Python typed? Answer:', 'Is C typed? Answer:'], max_tokens: 20, temperature: 1, seed: 5,
      n: 2, structured_outputs: { choice: ['statically typed', 'dynamically typed'] },
    });
    assert.equal(choice.choices.length, 4);
    for (const c of choice.choices) assert.ok(['statically typed', 'dynamically typed'].includes(c.text), c.text);
    const re = await client.completions.create({
      model: MODEL, prompt: 'Version:', max_tokens: 20, temperature: 1, seed: 6,
      response_format: { type: 'json_schema', json_schema: { name: 'v', schema: { type: 'object', properties: { major: { type: 'integer' } }, required: ['major'], additionalProperties: false } } },
    });
    if (re.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(re.choices[0].text).major, 'number');
    const bad = await client.completions.create({ model: MODEL, prompt: 'x', structured_outputs: { regex: '(unclosed' } })
      .then(() => null, (e) => e);
    assert.equal(bad?.status, 400);
  });
});

describe('tool calls', () => {
  const ask = [{ role: 'user', content: 'What is the weather in Paris this week?' }];
  const validArgs = ajv.compile(WEATHER.function.parameters);

  it('named tool choice: a call, then the tool result fed back through the template', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: ask, tools: [WEATHER, SEARCH], max_tokens: 120, temperature: 0.7, seed: 1,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
    });
    const m = r.choices[0].message;
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    assert.equal(m.tool_calls.length, 1);
    const call = m.tool_calls[0];
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    assert.match(call.id, /^chatcmpl-tool-/);
    const args = JSON.parse(call.function.arguments);
    assert.ok(validArgs(args), `${call.function.arguments}: ${ajv.errorsText(validArgs.errors)}`);

    const followUp = await client.chat.completions.create({
      model: MODEL, tools: [WEATHER, SEARCH], max_tokens: 16, temperature: 0,
      messages: [...ask, m, { role: 'tool', tool_call_id: call.id, content: '{"temperature_c": 18, "sky": "clear"}' }],
    });
    assert.equal(followUp.choices.length, 1);
    assert.ok(['stop', 'length', 'tool_calls'].includes(followUp.choices[0].finish_reason));
    // The tool result and the earlier call reached the prompt.
    const tok = await fetch(`${qwen.base}/tokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [...ask, m, { role: 'tool', tool_call_id: call.id, content: 'RESULT-42' }], tools: [WEATHER] }),
    }).then((x) => x.json());
    const detok = await fetch(`${qwen.base}/detokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: tok.tokens }),
    }).then((x) => x.json());
    assert.match(detok.prompt, /<function=get_weather>/);
    assert.match(detok.prompt, /<tool_response>\nRESULT-42\n<\/tool_response>/);
  });

  it('streamed calls accumulate in the client to the non-streamed ones', async () => {
    const body = {
      model: MODEL, messages: ask, tools: [WEATHER, SEARCH], max_tokens: 160, temperature: 0.9, seed: 7,
      tool_choice: 'required',
    };
    const whole = await client.chat.completions.create(body);
    const stream = client.chat.completions.stream(body);
    const final = await stream.finalChatCompletion();
    assert.equal(final.choices[0].finish_reason, whole.choices[0].finish_reason);
    const strip = (calls) => calls.map((c) => ({ name: c.function.name, arguments: c.function.arguments }));
    assert.deepEqual(strip(final.choices[0].message.tool_calls), strip(whole.choices[0].message.tool_calls));
    assert.ok(whole.choices[0].message.tool_calls.length >= 1);
    for (const c of final.choices[0].message.tool_calls) {
      assert.ok(['get_weather', 'search_docs'].includes(c.function.name));
      JSON.parse(c.function.arguments);
    }
    // Raw deltas: id, type and name come first, arguments after.
    const seen = new Set();
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      for (const d of chunk.choices[0]?.delta?.tool_calls ?? []) {
        if (!seen.has(d.index)) {
          assert.ok(d.id && d.type === 'function' && d.function.name, JSON.stringify(d));
          seen.add(d.index);
        } else {
          assert.equal(d.id, undefined);
        }
      }
    }
  });

  it('required without parallel calls gives exactly one', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: ask, tools: [WEATHER, SEARCH], max_tokens: 200, temperature: 1, seed: 11,
      tool_choice: 'required', parallel_tool_calls: false,
    });
    assert.equal(r.choices[0].message.tool_calls.length, 1);
  });

  it('refuses a forced call whose tools make a grammar past the cap', async () => {
    // 300 tools of 1 KB schemas each: every request field is within its own
    // cap, but the forced call's grammar would hold them all.
    const tools = Array.from({ length: 300 }, (_, i) => ({
      type: 'function',
      function: { name: `tool_${i}`, parameters: { type: 'object', description: 'x'.repeat(1000), properties: {} } },
    }));
    await assert.rejects(
      client.chat.completions.create({ model: MODEL, messages: ask, tools, max_tokens: 4, tool_choice: 'required' }),
      (e) => e.status === 400 && /larger than 262144 bytes/.test(e.message));
  });

  it('hermes format: a forced call parses from JSON inside <tool_call>', async () => {
    const r = await hermesClient.chat.completions.create({
      model: MODEL, messages: ask, tools: [WEATHER], max_tokens: 200, temperature: 0.7, seed: 2,
      tool_choice: { type: 'function', function: { name: 'get_weather' } },
      chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(r.choices[0].finish_reason, 'tool_calls');
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, 'get_weather');
    assert.ok(validArgs(JSON.parse(call.function.arguments)), call.function.arguments);
  });
});

describe('reasoning', () => {
  const messages = [{ role: 'user', content: 'What does the json module do?' }];

  it('thinking on: the output goes to reasoning, streamed and whole alike', async () => {
    // The model may close its thought at once; some seed makes it think.
    let body;
    let m;
    for (let seed = 1; seed <= 12 && !m?.reasoning; ++seed) {
      body = { model: MODEL, messages, max_tokens: 24, temperature: 0.9, seed, chat_template_kwargs: { enable_thinking: true } };
      m = (await client.chat.completions.create(body)).choices[0].message;
    }
    assert.ok(m.reasoning && m.reasoning.length > 0, JSON.stringify(m));
    let reasoning = '';
    let content = '';
    for await (const chunk of await client.chat.completions.create({ ...body, stream: true })) {
      reasoning += chunk.choices[0]?.delta?.reasoning ?? '';
      content += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(reasoning, m.reasoning);
    assert.equal(content, m.content ?? '');
  });

  it('thinking off: all content, reasoning null', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 16, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(r.choices[0].message.reasoning, null);
    assert.ok(r.choices[0].message.content.length > 0);
  });

  it('--default-chat-template-kwargs turns thinking on unless the request turns it off', async () => {
    const on = await hermesClient.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
    assert.ok(on.choices[0].message.reasoning.length > 0);
    const off = await hermesClient.chat.completions.create({
      model: MODEL, messages, max_tokens: 12, temperature: 0, chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(off.choices[0].message.reasoning, null);
  });

  it('a constrained answer comes after free reasoning', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages, max_tokens: 300, temperature: 0.7, seed: 1, chat_template_kwargs: { enable_thinking: true },
      structured_outputs: { choice: ['yes', 'no'] }, stop: ['\n\n\n'],
    });
    const m = r.choices[0].message;
    // Until </think> nothing is constrained; after it only the choices fit.
    if (m.content !== null) assert.ok(['yes', 'no'].includes(m.content.trim()), JSON.stringify(m));
  });
});

describe('bad agent input', () => {
  const user = [{ role: 'user', content: 'hi' }];
  const cases = [
    ['malformed JSON schema', { response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'no-such-type' } } } }],
    ['json_schema without schema', { response_format: { type: 'json_schema', json_schema: { name: 'x' } } }],
    ['unknown response_format type', { response_format: { type: 'yaml' } }],
    ['invalid regex', { structured_outputs: { regex: '(unclosed' } }],
    ['invalid grammar', { structured_outputs: { grammar: 'root ::= undefined_rule' } }],
    ['two structured outputs', { structured_outputs: { regex: 'a', choice: ['a'] } }],
    ['empty choice', { structured_outputs: { choice: [] } }],
    ['tool parameters that are no schema', { tools: [{ type: 'function', function: { name: 'f', parameters: 'nope' } }] }],
    ['tool without a name', { tools: [{ type: 'function', function: { description: 'x' } }] }],
    ['named tool that is not given', { tools: [WEATHER], tool_choice: { type: 'function', function: { name: 'other' } } }],
    ['required tool choice with a response_format', { tools: [WEATHER], tool_choice: 'required', response_format: { type: 'json_object' } }],
  ];
  for (const [name, extra] of cases) {
    it(`400: ${name}`, async () => {
      const r = await post(qwen, { model: MODEL, messages: user, max_tokens: 4, ...extra });
      assert.equal(r.status, 400, JSON.stringify(r.body));
      assert.ok(r.body.error.message.length > 0);
    });
  }

  it('400: auto tool choice without --enable-auto-tool-choice', async () => {
    const r = await post(hermes, { model: MODEL, messages: user, tools: [WEATHER] });
    assert.equal(r.status, 400);
    assert.match(r.body.error.message, /enable-auto-tool-choice/);
  });

  it('the server keeps serving after all of that', async () => {
    const r = await client.chat.completions.create({ model: MODEL, messages: user, max_tokens: 4, temperature: 0 });
    assert.equal(r.choices.length, 1);
  });
});
