// The chat page at / of the real `hyllm serve` (embedded model, CPU), in
// Debian's headless Chromium: a message typed into the page streams an answer
// back, the stop button ends a long answer and the server stops working on
// it, the thinking part folds, and with --api-key the page asks for the key.
// HYLLM_SCREENSHOT=FILE saves the page after the first answer as a PNG.

import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { metric, metrics, sleep, startServer } from '../e2e/harness.mjs';
import { launchChromium } from './chromium.mjs';

const MODEL = 'hyllm-tiny';

// Records every change of the assistant's text while a reply is in flight,
// so that a test can tell a streamed answer from one that arrived whole.
const WATCH_STREAM = `(() => {
  window.seen = [];
  new MutationObserver(() => {
    const replies = document.querySelectorAll('.msg.assistant > div:not(.note)');
    const last = replies[replies.length - 1];
    if (last) window.seen.push({ length: last.textContent.length,
                                 streaming: document.getElementById('stop').checkVisibility() });
  }).observe(document.getElementById('log'), { childList: true, subtree: true, characterData: true });
})()`;

const lastReply = `(() => {
  const r = document.querySelectorAll('.msg.assistant');
  const last = r[r.length - 1];
  return last ? { text: last.querySelector(':scope > div:not(.note)').textContent,
                  note: last.querySelector('.note')?.textContent ?? '' } : null;
})()`;

const KEY = 'page-test-key';
let server, keyServer, browser, page;

// One browser for every test; the two servers start while it starts.
before(async () => {
  [browser, server, keyServer] = await Promise.all([
    launchChromium(), startServer(), startServer({ args: ['--api-key', KEY] })]);
  page = browser.page;
});
after(async () => {
  await browser?.close();
  await Promise.all([server?.stop(), keyServer?.stop()]);
});

const visible = (id) => page.eval(`document.getElementById('${id}').checkVisibility()`);

describe('chat page', () => {
  test('shows the model, streams an answer and reports tokens/s', async () => {
    await page.goto(`${server.base}/`);
    await page.waitFor(`document.getElementById('model').textContent === '${MODEL}'`, { what: 'the model name' });
    assert.equal(await visible('key-form'), false);
    assert.equal(await visible('stop'), false);
    await page.eval(WATCH_STREAM);
    await page.type('#prompt', 'What does the json module do?', { enter: true });
    await page.waitFor(`document.getElementById('send').checkVisibility() && document.querySelectorAll('.msg.assistant').length === 1`,
      { what: 'the answer to end' });
    const reply = await page.eval(lastReply);
    assert.ok(reply.text.length > 0, 'the answer is empty');
    assert.equal(reply.note, '', `the answer ended with "${reply.note}"`);
    // Text was on screen while the request still ran, in more than one step.
    const streamed = new Set((await page.eval('window.seen')).filter((s) => s.streaming && s.length > 0)
      .map((s) => s.length));
    assert.ok(streamed.size >= 2, `the answer arrived in ${streamed.size} step(s)`);
    assert.match(await page.eval(`document.getElementById('speed').textContent`),
      /^last answer: \d+ tokens, \d+\.\d tokens\/s$/);
    assert.deepEqual(await page.eval(`document.querySelector('.msg.user').textContent`),
      'What does the json module do?');
    if (process.env.HYLLM_SCREENSHOT) await page.screenshot(process.env.HYLLM_SCREENSHOT);
  });

  test('the stop button ends a long answer and the server stops generating', async () => {
    // The tiny model usually answers in a few dozen tokens; ignore_eos makes
    // this answer run to the context length unless it is stopped.
    const restore = await page.rewriteRequests('*/v1/chat/completions', (body) => ({ ...body, ignore_eos: true }));
    try {
      await page.type('#prompt', 'Tell me a long story.', { enter: true });
      await page.waitFor(`(() => { const r = ${lastReply}; return r && r.text.length > 20; })()`,
        { what: 'streamed text' });
      const running = await metrics(server.base);
      assert.equal(metric(running, 'vllm:num_requests_running'), 1);
      assert.equal(await visible('stop'), true);
      await page.click('#stop');
      await page.waitFor(`document.getElementById('send').checkVisibility()`, { what: 'the page to stop' });
      assert.equal(await visible('stop'), false);
      assert.equal((await page.eval(lastReply)).note, 'stopped');
    } finally {
      await restore();
    }
    // The server noticed the closed connection and aborted the request.
    let m;
    for (const deadline = Date.now() + 5000; ; await sleep(50)) {
      m = await metrics(server.base);
      if (metric(m, 'vllm:num_requests_running') === 0) break;
      assert.ok(Date.now() < deadline, 'the request still runs 5 s after the stop button');
    }
    assert.equal(metric(m, 'vllm:request_success_total', { finished_reason: 'abort' }), 1);
    const generated = metric(m, 'vllm:generation_tokens_total');
    await sleep(300);
    assert.equal(metric(await metrics(server.base), 'vllm:generation_tokens_total'), generated);
    // Far fewer tokens than the context would have allowed.
    assert.ok(generated < 800, `${generated} tokens generated`);
    // The conversation goes on after a stop.
    await page.type('#prompt', 'And the csv module?', { enter: true });
    await page.waitFor(`document.getElementById('send').checkVisibility() && document.querySelectorAll('.msg.assistant').length === 3`,
      { what: 'the next answer' });
    assert.ok((await page.eval(lastReply)).text.length > 0);
  });

  test('folds the thinking part: reasoning fields and <think> in the content', async () => {
    // The reasoning fields come from a server-side reasoning parser; these
    // answers are given to the page directly to cover both spellings.
    const events = (deltas) => deltas.map((d) => `data: ${JSON.stringify({
      id: 'x', object: 'chat.completion.chunk', created: 0, model: MODEL,
      choices: [{ index: 0, delta: d, finish_reason: null }],
      usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
    })}\n\n`).join('') + 'data: [DONE]\n\n';
    const cases = [
      [[{ role: 'assistant', content: '' }, { reasoning_content: 'Weigh ' }, { reasoning_content: 'it.' },
        { content: 'Use json.dumps.' }], 'Weigh it.', 'Use json.dumps.'],
      [[{ reasoning: 'Think twice.' }, { content: 'Done.' }], 'Think twice.', 'Done.'],
      [[{ content: 'Plan: ' }, { content: 'short.\n</think>\n\nHello!' }], 'Plan: short.', 'Hello!'],
      [[{ content: '<think>\nsteps' }, { content: '</think>' }, { content: 'Answer.' }], 'steps', 'Answer.'],
      [[{ content: 'No thinking here.' }], '', 'No thinking here.'],
    ];
    for (const [deltas, thinking, answer] of cases) {
      const restore = await page.answerRequests('*/v1/chat/completions',
        { contentType: 'text/event-stream', body: events(deltas) });
      try {
        const before = await page.eval(`document.querySelectorAll('.msg.assistant').length`);
        await page.type('#prompt', 'Show your thinking.', { enter: true });
        await page.waitFor(`document.getElementById('send').checkVisibility() && document.querySelectorAll('.msg.assistant').length === ${before + 1}`,
          { what: 'the answer' });
      } finally {
        await restore();
      }
      const shown = await page.eval(`(() => {
        const r = document.querySelectorAll('.msg.assistant');
        const last = r[r.length - 1];
        const d = last.querySelector('details');
        return { hidden: !d.checkVisibility(), open: d.open, thinking: d.querySelector('div').textContent,
                 answer: last.querySelector(':scope > div:not(.note)').textContent };
      })()`);
      assert.deepEqual(shown, { hidden: thinking === '', open: false, thinking, answer });
    }
  });

});

describe('chat page with --api-key', () => {
  test('the page is public; the API still needs the key, and the page asks for it', async () => {
    const html = await fetch(`${keyServer.base}/`);
    assert.equal(html.status, 200);
    assert.ok(!(await html.text()).includes(KEY));
    assert.equal((await fetch(`${keyServer.base}/v1/models`)).status, 401);
    assert.equal((await fetch(`${keyServer.base}/v1/chat/completions`, {
      method: 'POST', headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ messages: [{ role: 'user', content: 'hi' }] }),
    })).status, 401);

    await page.goto(`${keyServer.base}/`);
    await page.waitFor(`document.getElementById('key-form').checkVisibility()`, { what: 'the key form' });
    assert.equal(await visible('key-form'), true);
    assert.equal(await page.eval(`document.getElementById('model').textContent`), 'this server needs an API key');
    await page.type('#key', 'wrong-key', { enter: true });
    await page.waitFor(`document.getElementById('model').textContent === 'the API key was refused'`,
      { what: 'the wrong key to be refused' });
    await page.eval(`document.getElementById('key').value = ''`);
    await page.type('#key', KEY, { enter: true });
    await page.waitFor(`document.getElementById('model').textContent === '${MODEL}'`, { what: 'the model name' });
    assert.equal(await visible('key-form'), false);
    await page.type('#prompt', 'Hello?', { enter: true });
    await page.waitFor(`document.getElementById('send').checkVisibility() && document.querySelectorAll('.msg.assistant').length === 1`,
      { what: 'the answer' });
    const reply = await page.eval(lastReply);
    assert.ok(reply.text.length > 0);
    assert.equal(reply.note, '');
  });
});

describe('the page, all along', () => {
  test('loaded nothing from elsewhere and logged no errors', () => {
    const foreign = page.requests.filter((u) => !u.startsWith(`${server.base}/`)
      && !u.startsWith(`${keyServer.base}/`) && !u.startsWith('data:') && u !== 'about:blank');
    assert.deepEqual(foreign, []);
    assert.ok(page.requests.length > 5);
    // Refused keys show up as failed loads (401); nothing else may.
    assert.deepEqual(page.errors.filter((e) => !/status of 401/.test(e)), []);
  });
});
