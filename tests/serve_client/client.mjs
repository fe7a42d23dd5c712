// The official `openai` npm client against a running `boltrt serve` (tests/test_serve_client.cpp
// starts the server and runs: node client.mjs http://127.0.0.1:PORT/v1). Prints one line per
// check; exits 1 at the first failed one.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const baseURL = process.argv[2];
const client = new OpenAI({ baseURL, apiKey: 'not-needed', maxRetries: 0, timeout: 120_000 });
const messages = [{ role: 'user', content: 'Hello, who are you?' }];
const greedy = { model: 'any-name', temperature: 0, max_tokens: 40 };

async function check(name, body) {
  try {
    await body();
    console.log(`ok   ${name}`);
  } catch (e) {
    console.log(`FAIL ${name}: ${e?.stack ?? e}`);
    process.exit(1);
  }
}

async function streamedText(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true,
                                                       stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let usage = null;
  let role = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      if (choice.delta.role) role = choice.delta.role;
      if (choice.delta.content) text += choice.delta.content;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  return { text, finish, usage, role };
}

let plain;
await check('models.list names the served model', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].object, 'model');
  assert.ok(page.data[0].id.length > 0);
});

await check('chat.completions.create', async () => {
  plain = await client.chat.completions.create({ ...greedy, messages });
  assert.equal(plain.object, 'chat.completion');
  assert.equal(plain.choices[0].message.role, 'assistant');
  assert.equal(typeof plain.choices[0].message.content, 'string');
  assert.ok(plain.choices[0].message.content.length > 0);
  assert.ok(['stop', 'length'].includes(plain.choices[0].finish_reason));
  assert.equal(plain.usage.total_tokens, plain.usage.prompt_tokens + plain.usage.completion_tokens);
});

await check('streamed text equals the non-streamed text', async () => {
  const s = await streamedText({ ...greedy, messages });
  assert.equal(s.role, 'assistant');
  assert.equal(s.text, plain.choices[0].message.content);
  assert.equal(s.finish, plain.choices[0].finish_reason);
  assert.equal(s.usage.completion_tokens, plain.usage.completion_tokens);
  assert.equal(s.usage.prompt_tokens, plain.usage.prompt_tokens);
});

await check('chat.completions.stream helper (finalChatCompletion)', async () => {
  const runner = client.chat.completions.stream({ ...greedy, messages });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, plain.choices[0].message.content);
});

await check('a multi-turn request reuses the cached prefix', async () => {
  const turn2 = [...messages, { role: 'assistant', content: plain.choices[0].message.content },
                 { role: 'user', content: 'And then?' }];
  const r = await client.chat.completions.create({ ...greedy, messages: turn2 });
  assert.ok(r.usage.prompt_tokens > plain.usage.prompt_tokens);
  // The server pre-filled the reply as history once it had answered: turn 2 computes only
  // the new user turn and the generation prompt.
  const cached = r.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached > plain.usage.prompt_tokens && r.usage.prompt_tokens - cached <= 16,
            JSON.stringify(r.usage));
});

await check('completions.create, streamed and not', async () => {
  const params = { model: 'm', prompt: 'It is a truth universally', temperature: 0, max_tokens: 24 };
  const r = await client.completions.create(params);
  assert.equal(r.object, 'text_completion');
  let text = '';
  for await (const chunk of await client.completions.create({ ...params, stream: true }))
    text += chunk.choices[0]?.text ?? '';
  assert.equal(text, r.choices[0].text);
});

await check('chat.completions.parse with a json_schema response_format', async () => {
  const schema = {
    type: 'object',
    properties: { name: { type: 'string', maxLength: 12 },
                  age: { type: 'integer', minimum: 0, maximum: 120 } },
    required: ['name', 'age'],
    additionalProperties: false,
  };
  const r = await client.chat.completions.parse({
    ...greedy, max_tokens: 100, messages: [{ role: 'user', content: 'Who are you?' }],
    response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
  });
  const message = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, 'stop');
  assert.deepEqual(message.parsed, JSON.parse(message.content));
  assert.deepEqual(Object.keys(message.parsed).sort(), ['age', 'name']);
  assert.ok(Number.isInteger(message.parsed.age), message.content);
  assert.ok(message.parsed.age >= 0 && message.parsed.age <= 120, message.content);
  assert.equal(typeof message.parsed.name, 'string');
  assert.ok([...message.parsed.name].length <= 12, message.content);
});

await check('n choices: identical at temperature 0; seeded ones streamed by index', async () => {
  const r = await client.chat.completions.create({ ...greedy, messages, n: 3 });
  assert.equal(r.choices.length, 3);
  r.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.message.content, plain.choices[0].message.content);
  });
  assert.equal(r.usage.completion_tokens, 3 * plain.usage.completion_tokens);
  assert.equal(r.usage.prompt_tokens, plain.usage.prompt_tokens);
  const seeded = { model: 'm', messages, temperature: 1, seed: 11, n: 3, max_tokens: 24 };
  const whole = await client.chat.completions.create(seeded);
  assert.equal(new Set(whole.choices.map((c) => c.message.content)).size, 3);
  // The SDK's stream helper puts the chunks together by choice index.
  const final = await client.chat.completions.stream(seeded).finalChatCompletion();
  assert.equal(final.choices.length, 3);
  final.choices.forEach((c, i) => {
    assert.equal(c.index, i);
    assert.equal(c.message.content, whole.choices[i].message.content, `choice ${i}`);
    assert.equal(c.finish_reason, whole.choices[i].finish_reason);
  });
  const completions = await client.completions.create({ model: 'm', prompt: 'Once upon a time',
                                                        temperature: 0, max_tokens: 12, n: 2 });
  assert.equal(completions.choices.length, 2);
  assert.equal(completions.choices[0].text, completions.choices[1].text);
});

await check('logit_bias: -100 on the greedy token changes the first token', async () => {
  const params = { model: 'm', prompt: 'It is a truth universally', temperature: 0, max_tokens: 1,
                   logprobs: 2 };
  const r = await client.completions.create(params);
  const top = r.choices[0].logprobs.top_logprobs[0];
  const greedyPiece = r.choices[0].logprobs.tokens[0];
  const runnerUp = Object.keys(top).find((piece) => piece !== greedyPiece);
  // Token ids are not in the response: " in" is id 496 in the tiny vocabulary (test_serve
  // checks the ids with `boltrt tokenize`); the bias moves the choice to the runner-up.
  assert.equal(greedyPiece, ' in');
  const biased = await client.completions.create({ ...params, logit_bias: { 496: -100 } });
  assert.equal(biased.choices[0].logprobs.tokens[0], runnerUp);
  await assert.rejects(
    client.completions.create({ ...params, logit_bias: { 496: -101 } }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === 'logit_bias');
});

await check('a bad field is a BadRequestError naming it', async () => {
  await assert.rejects(
    client.chat.completions.create({ ...greedy, messages, temperature: 'hot' }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'temperature');
});

await check('breaking out of a stream, then the server still answers', async () => {
  const stream = await client.chat.completions.create({ ...greedy, max_tokens: 200, messages,
                                                        stream: true });
  for await (const chunk of stream) {
    if (chunk.choices[0]?.delta?.content) break;  // aborts the request
  }
  const r = await client.chat.completions.create({ ...greedy, messages });
  assert.equal(r.choices[0].message.content, plain.choices[0].message.content);
});

await check('16 concurrent streams equal their sequential results', async () => {
  const prompts = Array.from({ length: 16 }, (_, i) => `Question number ${i % 4}: what is it?`);
  const sequential = [];
  for (const p of prompts.slice(0, 4)) {
    const r = await client.chat.completions.create({ ...greedy, max_tokens: 24,
                                                     messages: [{ role: 'user', content: p }] });
    sequential.push(r.choices[0].message.content);
  }
  const results = await Promise.all(prompts.map((p) => streamedText({
    ...greedy, max_tokens: 24, messages: [{ role: 'user', content: p }] })));
  results.forEach((r, i) => assert.equal(r.text, sequential[i % 4], `stream ${i}`));
});
