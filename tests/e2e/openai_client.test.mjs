// The official openai client against the real server: chat and completions,
// stream and non-stream equal under greedy decoding, usage, n, logprobs,
// stop strings and token ids, seeds.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import OpenAI from 'openai';

import { metric, metrics, sseEvents, startServer } from './harness.mjs';

let server;
let client;
const MODEL = 'hyllm-tiny';
const PROMPT = 'The list type supports';
const MESSAGES = [{ role: 'user', content: 'How do I sort a list in Python?' }];

before(async () => {
  server = await startServer();
  client = new OpenAI({ baseURL: `${server.base}/v1`, apiKey: 'none', maxRetries: 0, timeout: 60000 });
});
after(async () => {
  const { code } = await server.stop();
  assert.equal(code, 0, server.log());
});

async function collectStream(stream) {
  const chunks = [];
  for await (const chunk of stream) chunks.push(chunk);
  return chunks;
}

async function tokenize(prompt) {
  const r = await fetch(`${server.base}/tokenize`, {
    method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt }),
  });
  return (await r.json()).tokens;
}

describe('models and info', () => {
  it('lists the served model', async () => {
    const models = await client.models.list();
    assert.equal(models.data.length, 1);
    assert.equal(models.data[0].id, MODEL);
    assert.equal(models.data[0].object, 'model');
    assert.equal(models.data[0].max_model_len, 1024);
  });

  it('answers /version and /health', async () => {
    const v = await (await fetch(`${server.base}/version`)).json();
    assert.match(v.version, /^\d+\.\d+\.\d+/);
    const h = await fetch(`${server.base}/health`);
    assert.equal(h.status, 200);
  });

  it('tokenizes and detokenizes', async () => {
    const ids = await tokenize(PROMPT);
    assert.ok(ids.length > 1);
    const r = await fetch(`${server.base}/detokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: ids }),
    });
    assert.equal((await r.json()).prompt, PROMPT);
    const chat = await fetch(`${server.base}/tokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: MESSAGES, add_generation_prompt: true }),
    });
    const body = await chat.json();
    assert.equal(body.count, body.tokens.length);
    assert.equal(body.max_model_len, 1024);
  });
});

describe('completions', () => {
  it('stream and non-stream agree under greedy decoding, with exact usage', async () => {
    const params = { model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0, ignore_eos: true };
    const whole = await client.completions.create(params);
    assert.equal(whole.object, 'text_completion');
    assert.equal(whole.choices.length, 1);
    assert.equal(whole.choices[0].finish_reason, 'length');
    const promptIds = await tokenize(PROMPT);
    assert.deepEqual(whole.usage.prompt_tokens, promptIds.length);
    assert.equal(whole.usage.completion_tokens, 12);
    assert.equal(whole.usage.total_tokens, promptIds.length + 12);

    const chunks = await collectStream(await client.completions.create({
      ...params, stream: true, stream_options: { include_usage: true }, return_token_ids: true,
    }));
    const withChoices = chunks.filter((c) => c.choices.length > 0);
    // One event per generated token, none before the first token.
    assert.equal(withChoices.length, 12);
    for (const c of withChoices) assert.equal(c.choices[0].token_ids.length, 1);
    for (const c of withChoices) assert.equal(c.usage, null);
    assert.equal(withChoices.map((c) => c.choices[0].text).join(''), whole.choices[0].text);
    assert.equal(withChoices.at(-1).choices[0].finish_reason, 'length');
    const last = chunks.at(-1);
    assert.deepEqual(last.choices, []);
    assert.deepEqual(last.usage.prompt_tokens, whole.usage.prompt_tokens);
    assert.deepEqual(last.usage.completion_tokens, 12);
    assert.ok(chunks.every((c) => c.id === chunks[0].id && c.created === chunks[0].created && c.model === MODEL));
  });

  it('takes token-id prompts and batches, numbering choices prompt * n + i', async () => {
    const ids = await tokenize(PROMPT);
    const byIds = await client.completions.create({ model: MODEL, prompt: ids, max_tokens: 5, temperature: 0 });
    const byText = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 5, temperature: 0 });
    assert.equal(byIds.choices[0].text, byText.choices[0].text);
    const batch = await client.completions.create({
      model: MODEL, prompt: [PROMPT, 'A dictionary'], n: 2, max_tokens: 4, temperature: 0,
    });
    assert.deepEqual(batch.choices.map((c) => c.index), [0, 1, 2, 3]);
    assert.equal(batch.choices[0].text, byText.choices[0].text.slice(0, batch.choices[0].text.length));
    assert.equal(batch.choices[0].text, batch.choices[1].text);
    assert.equal(batch.usage.completion_tokens, batch.choices.length * 4);
  });

  it('echoes the prompt and returns logprobs', async () => {
    const echo = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 3, temperature: 0, echo: true });
    assert.ok(echo.choices[0].text.startsWith(PROMPT));
    const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 3 });
    const lp = r.choices[0].logprobs;
    assert.equal(lp.tokens.length, 6);
    assert.equal(lp.token_logprobs.length, 6);
    assert.equal(lp.tokens.join(''), r.choices[0].text);
    for (let i = 0; i < 6; ++i) {
      assert.ok(lp.token_logprobs[i] <= 0);
      const top = lp.top_logprobs[i];
      assert.ok(Object.keys(top).length >= 1 && Object.keys(top).length <= 4);
      // Greedy: the sampled token is the most likely one.
      assert.equal(Math.max(...Object.values(top)), lp.token_logprobs[i]);
    }
    assert.equal(lp.text_offset[0], 0);
    // vLLM's return_tokens_as_token_ids: the same logprobs, tokens spelled by id.
    const byId = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 6, temperature: 0, logprobs: 3,
      return_tokens_as_token_ids: true, return_token_ids: true,
    });
    const ids = byId.choices[0].token_ids;
    assert.deepEqual(byId.choices[0].logprobs.tokens, ids.map((id) => `token_id:${id}`));
    assert.equal(byId.choices[0].text, r.choices[0].text);
    assert.deepEqual(byId.choices[0].logprobs.token_logprobs, lp.token_logprobs);
    for (const top of byId.choices[0].logprobs.top_logprobs) {
      for (const k of Object.keys(top)) assert.match(k, /^token_id:\d+$/);
    }
    const chat = await client.chat.completions.create({
      model: MODEL, messages: [{ role: 'user', content: PROMPT }], max_tokens: 3, temperature: 0,
      logprobs: true, top_logprobs: 2, return_tokens_as_token_ids: true,
    });
    for (const e of chat.choices[0].logprobs.content) {
      assert.match(e.token, /^token_id:\d+$/);
      for (const t of e.top_logprobs) assert.match(t.token, /^token_id:\d+$/);
    }
  });

  it('scores the prompt: prompt_logprobs, and echo with logprobs', async () => {
    const gen = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 4, temperature: 0, logprobs: 2, return_token_ids: true,
    });
    const promptIds = gen.choices[0].prompt_token_ids;
    const genIds = gen.choices[0].token_ids;
    assert.equal(gen.choices[0].prompt_logprobs, null);
    // The prompt and its greedy continuation, scored: each generated token's
    // prompt logprob is the logprob it was sampled with, at rank 1.
    const ids = [...promptIds, ...genIds];
    const scored = await client.completions.create({
      model: MODEL, prompt: ids, max_tokens: 1, temperature: 0, prompt_logprobs: 2,
    });
    const plp = scored.choices[0].prompt_logprobs;
    assert.equal(plp.length, ids.length);
    assert.equal(plp[0], null);
    for (let p = 1; p < ids.length; ++p) {
      const entry = plp[p];
      const own = entry[String(ids[p])];
      assert.ok(own, `position ${p} lists its prompt token`);
      assert.ok(own.logprob <= 0 && own.rank >= 1 && typeof own.decoded_token === 'string');
      const n = Object.keys(entry).length;
      assert.ok(n >= 2 && n <= 3, `position ${p}: ${n} entries`);
      const ranks = Object.values(entry).map((e) => e.rank);
      assert.ok(ranks.includes(1) && ranks.includes(2));
    }
    for (let j = 0; j < genIds.length; ++j) {
      const own = plp[promptIds.length + j][String(genIds[j])];
      assert.equal(own.rank, 1);
      assert.ok(Math.abs(own.logprob - gen.choices[0].logprobs.token_logprobs[j]) < 1e-3);
    }
    // Echo with logprobs: the prompt's tokens lead the logprobs, the first without one.
    const echo = await client.completions.create({
      model: MODEL, prompt: ids, max_tokens: 2, temperature: 0, echo: true, logprobs: 1,
    });
    const lp = echo.choices[0].logprobs;
    assert.equal(lp.tokens.length, ids.length + 2);
    assert.equal(lp.token_logprobs[0], null);
    assert.equal(lp.top_logprobs[0], null);
    assert.equal(lp.text_offset[0], 0);
    for (let p = 1; p < ids.length; ++p) {
      assert.ok(Math.abs(lp.token_logprobs[p] - plp[p][String(ids[p])].logprob) < 1e-5);
    }
    assert.equal(echo.choices[0].prompt_logprobs.length, ids.length);
    // Echo without generation (max_tokens 0, as vLLM): the prompt alone, with its logprobs.
    const only = await client.completions.create({
      model: MODEL, prompt: ids, max_tokens: 0, temperature: 0, echo: true, logprobs: 1, return_token_ids: true,
    });
    assert.equal(only.choices[0].text, await (await fetch(`${server.base}/detokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens: ids }),
    })).json().then((j) => j.prompt));
    assert.deepEqual(only.choices[0].logprobs.token_logprobs, lp.token_logprobs.slice(0, ids.length));
    assert.deepEqual(only.choices[0].token_ids, []);
    // Streamed, the first chunk carries them.
    const chunks = await collectStream(await client.completions.create({
      model: MODEL, prompt: ids, max_tokens: 2, temperature: 0, echo: true, logprobs: 1, stream: true,
    }));
    assert.deepEqual(chunks[0].choices[0].logprobs.token_logprobs.slice(0, ids.length), lp.token_logprobs.slice(0, ids.length));
    // Chat: the response's prompt_logprobs cover the templated prompt.
    const chat = await client.chat.completions.create({
      model: MODEL, messages: MESSAGES, max_tokens: 2, temperature: 0, prompt_logprobs: 0,
    });
    assert.equal(chat.prompt_logprobs.length, chat.usage.prompt_tokens);
    assert.equal(chat.prompt_logprobs[0], null);
    assert.equal(Object.keys(chat.prompt_logprobs[1]).length, 1);
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, prompt_logprobs: 1, stream: true }),
      (e) => e.status === 400 && /stream=True/.test(e.message));
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, prompt_logprobs: 21 }),
      (e) => e.status === 400 && /prompt logprobs of 21/.test(e.message));
  });

  it('truncates prompts to truncate_prompt_tokens, -1 meaning max_model_len', async () => {
    const kept = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 1, temperature: 0, truncate_prompt_tokens: 3,
    });
    assert.equal(kept.usage.prompt_tokens, 3);
    const whole = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 1, temperature: 0, truncate_prompt_tokens: -1,
    });
    assert.ok(whole.usage.prompt_tokens > 3);
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, truncate_prompt_tokens: 1025 }),
      (e) => e.status === 400 && /greater than max_model_len \(1024\)/.test(e.message));
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, truncate_prompt_tokens: 0 }),
      (e) => e.status === 400 && /truncate_prompt_tokens/.test(e.message));
  });

  it('applies logit_bias, in completions and chat alike', async () => {
    const base = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 3, temperature: 0, return_token_ids: true,
    });
    const first = base.choices[0].token_ids[0];
    const other = first === 300 ? 301 : 300;
    // +100 makes a token the argmax; -100 takes the greedy one out.
    const forced = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 3, temperature: 0, return_token_ids: true,
      logit_bias: { [other]: 100 },
    });
    assert.deepEqual(forced.choices[0].token_ids, [other, other, other]);
    const banned = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 1, temperature: 0, return_token_ids: true,
      logit_bias: { [first]: -100 },
    });
    assert.notEqual(banned.choices[0].token_ids[0], first);
    const chat = await client.chat.completions.create({
      model: MODEL, messages: MESSAGES, max_tokens: 2, temperature: 0, logit_bias: { [other]: 100 },
      return_token_ids: true,
    });
    assert.deepEqual(chat.choices[0].token_ids, [other, other]);
    await assert.rejects(
      client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, logit_bias: { 99999999: 1 } }),
      (e) => e.status === 400 && /out of vocabulary/.test(e.message));
  });

  it('samples only allowed_token_ids, and refuses what it does not implement', async () => {
    const allowed = [300, 301, 302];
    const r = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 6, temperature: 1, seed: 2, n: 2, return_token_ids: true,
      allowed_token_ids: allowed,
    });
    for (const c of r.choices) for (const id of c.token_ids) assert.ok(allowed.includes(id), `${id}`);
    const chat = await client.chat.completions.create({
      model: MODEL, messages: MESSAGES, max_tokens: 4, temperature: 0, allowed_token_ids: [301], return_token_ids: true,
    });
    assert.deepEqual(chat.choices[0].token_ids, [301, 301, 301, 301]);
    for (const extra of [{ use_beam_search: true }, { bad_words: [' '] }, { priority: 1 }, { allowed_token_ids: [] },
      { allowed_token_ids: [1], structured_outputs: { choice: ['a'] } },
      { bad_words: ['x'], structured_outputs: { choice: ['a'] } }]) {
      await assert.rejects(client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 1, ...extra }),
        (e) => e.status === 400, JSON.stringify(extra));
    }
  });

  it('logs the fields it ignored, as vLLM does', async () => {
    const r = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 1, guided_regex: 'a+', user: 'someone',
    });
    assert.equal(r.choices.length, 1);
    assert.match(server.log(), /The following fields were present in the request but ignored: \{'guided_regex'\}/);
  });

  it('never samples bad_words, a word or the words of a phrase in sequence', async () => {
    const base = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true,
    });
    const ids = base.choices[0].token_ids;
    const detok = async (tokens) => (await (await fetch(`${server.base}/detokenize`, {
      method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ tokens }),
    })).json()).prompt;
    // A greedy token that is one token both alone and after a space: banning its word bans it everywhere.
    let word = null;
    for (const id of ids) {
      const text = (await detok([id])).trim();
      if (!/^[A-Za-z]{2,}$/.test(text)) continue;
      const alone = await tokenize(text), spaced = await tokenize(` ${text}`);
      if (alone.length === 1 && spaced.length === 1 && [alone[0], spaced[0]].includes(id)) { word = { text, banned: [alone[0], spaced[0]] }; break; }
    }
    assert.ok(word, `no single-token word among ${ids}`);
    const r = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true,
      bad_words: [word.text],
    });
    for (const id of r.choices[0].token_ids) assert.ok(!word.banned.includes(id), `${word.text}: ${id}`);
    assert.notDeepEqual(r.choices[0].token_ids, ids);
    // A two-token phrase of the greedy text (one that tokenizes back to its
    // tokens, alone or after a space): its second token is banned only right after its first.
    let j = -1, phrase = null;
    for (let k = 1; k + 1 < ids.length && j < 0; ++k) {
      const text = (await detok(ids.slice(k, k + 2))).trimStart();
      for (const variant of [text, ` ${text}`]) {
        if (JSON.stringify(await tokenize(variant)) === JSON.stringify(ids.slice(k, k + 2))) { j = k; phrase = text; }
      }
    }
    assert.ok(j > 0, `no two-token phrase among ${ids}`);
    const p = await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 12, temperature: 0, ignore_eos: true, return_token_ids: true,
      bad_words: [phrase],
    });
    const out = p.choices[0].token_ids;
    assert.deepEqual(out.slice(0, j + 1), ids.slice(0, j + 1), 'the same tokens up to the phrase');
    assert.notEqual(out[j + 1], ids[j + 1]);
    const chat = await client.chat.completions.create({
      model: MODEL, messages: MESSAGES, max_tokens: 6, temperature: 0, bad_words: [word.text], allowed_token_ids: word.banned.concat([300]),
      return_token_ids: true,
    });
    assert.deepEqual(chat.choices[0].token_ids, [300, 300, 300, 300, 300, 300]);
  });

  it('stops at stop strings, in stream and non-stream alike', async () => {
    const base = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 20, temperature: 0, ignore_eos: true });
    const text = base.choices[0].text;
    // A stop string from the middle of the greedy text, spanning characters of
    // several tokens.
    const start = Math.floor(text.length / 2);
    const stop = text.slice(start, start + 4);
    const expected = text.slice(0, text.indexOf(stop));
    const stopped = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 20, temperature: 0, ignore_eos: true, stop: [stop] });
    assert.equal(stopped.choices[0].text, expected);
    assert.equal(stopped.choices[0].finish_reason, 'stop');
    assert.equal(stopped.choices[0].stop_reason, stop);
    assert.ok(stopped.usage.completion_tokens < 20);
    const chunks = await collectStream(await client.completions.create({
      model: MODEL, prompt: PROMPT, max_tokens: 20, temperature: 0, ignore_eos: true, stop: stop, stream: true,
    }));
    assert.equal(chunks.map((c) => c.choices[0]?.text ?? '').join(''), expected);
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'stop');
  });

  it('stops at stop_token_ids', async () => {
    const base = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 10, temperature: 0, ignore_eos: true, return_token_ids: true });
    const ids = base.choices[0].token_ids;
    const stopId = ids[3];
    const firstAt = ids.indexOf(stopId);
    const r = await client.completions.create({ model: MODEL, prompt: PROMPT, max_tokens: 10, temperature: 0, ignore_eos: true, stop_token_ids: [stopId], return_token_ids: true });
    assert.deepEqual(r.choices[0].token_ids, ids.slice(0, firstAt + 1));
    assert.equal(r.choices[0].finish_reason, 'stop');
    assert.equal(r.choices[0].stop_reason, stopId);
    assert.equal(r.usage.completion_tokens, firstAt + 1);
  });

  it('reproduces a seeded sample and gives n distinct choices', async () => {
    const params = { model: MODEL, prompt: PROMPT, max_tokens: 10, temperature: 1.0, top_p: 1, top_k: 0, seed: 1234, n: 3 };
    const a = await client.completions.create(params);
    const b = await client.completions.create(params);
    assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
    assert.deepEqual(a.choices.map((c) => c.index), [0, 1, 2]);
    const other = await client.completions.create({ ...params, seed: 99 });
    assert.notDeepEqual(other.choices.map((c) => c.text), a.choices.map((c) => c.text));
  });
});

describe('chat completions', () => {
  it('stream and non-stream agree under greedy decoding', async () => {
    const params = { model: MODEL, messages: MESSAGES, max_completion_tokens: 16, temperature: 0 };
    const whole = await client.chat.completions.create(params);
    assert.equal(whole.object, 'chat.completion');
    assert.equal(whole.choices[0].message.role, 'assistant');
    const content = whole.choices[0].message.content;
    assert.ok(['stop', 'length'].includes(whole.choices[0].finish_reason));

    const chunks = await collectStream(await client.chat.completions.create({
      ...params, stream: true, stream_options: { include_usage: true },
    }));
    assert.equal(chunks[0].object, 'chat.completion.chunk');
    assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
    assert.equal(text, content);
    const final = chunks.filter((c) => c.choices.length > 0).at(-1);
    assert.equal(final.choices[0].finish_reason, whole.choices[0].finish_reason);
    assert.deepEqual(chunks.at(-1).choices, []);
    // The stream repeats the request, so its prompt may come from the prefix cache.
    const counts = ({ prompt_tokens_details: _, ...u }) => u;
    assert.deepEqual(counts(chunks.at(-1).usage), counts(whole.usage));
    // Role chunk, then one chunk per generated token.
    assert.equal(chunks.length, 1 + whole.usage.completion_tokens + 1);
  });

  it('returns chat logprobs with top alternatives', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, messages: MESSAGES, max_completion_tokens: 5, temperature: 0, logprobs: true, top_logprobs: 2,
    });
    const content = r.choices[0].logprobs.content;
    assert.equal(content.length, r.usage.completion_tokens);
    for (const t of content) {
      assert.equal(t.top_logprobs.length, 2);
      assert.ok(t.logprob <= 0);
      assert.ok(Array.isArray(t.bytes));
      assert.equal(t.top_logprobs[0].logprob, t.logprob);
    }
  });

  it('gives n choices, stop strings and system prompts', async () => {
    const r = await client.chat.completions.create({
      model: MODEL, n: 2, temperature: 0.8, seed: 7, max_completion_tokens: 8,
      messages: [{ role: 'system', content: 'You are terse.' }, ...MESSAGES],
    });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
    const base = await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_completion_tokens: 16, temperature: 0 });
    const text = base.choices[0].message.content;
    if (text.length >= 4) {
      const stop = text.slice(2, 4);
      const r2 = await client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_completion_tokens: 16, temperature: 0, stop });
      assert.equal(r2.choices[0].message.content, text.slice(0, text.indexOf(stop)));
      assert.equal(r2.choices[0].finish_reason, 'stop');
    }
  });

  it('accepts content parts, tools and chat_template_kwargs', async () => {
    // Tools reach the template; without --enable-auto-tool-choice only
    // tool_choice "none" is accepted (vLLM).
    const r = await client.chat.completions.create({
      model: MODEL, max_completion_tokens: 4, temperature: 0,
      messages: [{ role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'there' }] }],
      tools: [{ type: 'function', function: { name: 'lookup', description: 'Look up a word', parameters: { type: 'object', properties: { word: { type: 'string' } } } } }],
      tool_choice: 'none',
      chat_template_kwargs: { enable_thinking: false },
    });
    assert.equal(r.choices.length, 1);
  });

  it('sends raw SSE framing exactly', async () => {
    const { status, headers, events } = await sseEvents(`${server.base}/v1/chat/completions`, {
      model: MODEL, messages: MESSAGES, max_tokens: 3, temperature: 0, ignore_eos: true, stream: true,
    });
    assert.equal(status, 200);
    assert.match(headers.get('content-type'), /^text\/event-stream/);
    for (const e of events) assert.match(e, /^data: [^\n]+$/);
    assert.equal(events.at(-1), 'data: [DONE]');
    const payloads = events.slice(0, -1).map((e) => JSON.parse(e.slice(6)));
    assert.equal(payloads.length, 1 + 3);
    assert.ok(payloads.every((p) => !('usage' in p)));
  });
});

describe('streaming delivery', () => {
  it('sends each event as it is generated, even to clients that accept gzip', async () => {
    const r = await fetch(`${server.base}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'accept-encoding': 'gzip, deflate, br' },
      body: JSON.stringify({ model: MODEL, prompt: PROMPT, max_tokens: 500, ignore_eos: true, stream: true }),
    });
    assert.equal(r.status, 200);
    assert.equal(r.headers.get('content-encoding'), null);
    const reader = r.body.getReader();
    const { value } = await reader.read();
    assert.match(new TextDecoder().decode(value), /^data: /);
    // The first event arrived while the request is still generating.
    assert.equal(metric(await metrics(server.base), 'vllm:num_requests_running'), 1);
    await reader.cancel();
  });
});

describe('errors through the client', () => {
  it('404 for an unknown model', async () => {
    await assert.rejects(client.completions.create({ model: 'gpt-9', prompt: 'x' }), (e) => {
      assert.equal(e.status, 404);
      assert.equal(e.message.includes('The model `gpt-9` does not exist.'), true);
      return true;
    });
  });

  it('400 for a prompt over the context', async () => {
    const long = 'word '.repeat(1500);
    await assert.rejects(client.completions.create({ model: MODEL, prompt: long, max_tokens: 10 }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /maximum context length is 1024/);
      return true;
    });
    await assert.rejects(client.chat.completions.create({ model: MODEL, messages: MESSAGES, max_tokens: 5000 }), (e) => {
      assert.equal(e.status, 400);
      assert.match(e.message, /maximum context length is/);
      return true;
    });
  });
});
