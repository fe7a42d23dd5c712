// Load test and agent replay for `boltrt serve` (or any OpenAI-compatible server), with Node's
// own fetch (no packages):
//
//   node bench/serve_load.mjs http://127.0.0.1:8080/v1 [--clients 1,4,16,32] [--requests 4]
//        [--max-tokens 64] [--turns 10] [--no-cache-prompt] [--label NAME]
//
// For each client count: that many concurrent streaming clients, each sending --requests chat
// requests one after another (greedy, different prompts); prints total generated tokens/s,
// time to first token and inter-token latency (p50 / p99), and checks every stream is
// well-formed (role chunk, finish_reason, usage, [DONE]). Then an agent replay: one
// conversation of --turns turns whose history grows (each turn resends everything), printing
// per turn the prompt tokens and how many of them came from the cache (cached_tokens).
// --clients 0 skips the load part, --turns 0 the replay. --no-cache-prompt sends llama-server's
// per-request `cache_prompt: false` (for boltrt serve, start it with --no-prefix-cache instead).
// --label prefixes every line (bench/side_by_side.sh --serve runs this against two servers).
const base = process.argv[2];
if (!base) {
  console.error('usage: node bench/serve_load.mjs BASE_URL [--clients 1,4,16,32] ...');
  process.exit(2);
}
const option = (name, fallback) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const clientCounts = option('--clients', '1,4,16,32').split(',').map(Number).filter((n) => n > 0);
const requestsPerClient = Number(option('--requests', '4'));
const maxTokens = Number(option('--max-tokens', '64'));
const turns = Number(option('--turns', '10'));
const noCachePrompt = process.argv.includes('--no-cache-prompt');
const label = option('--label', '');
const say = (line) => console.log(label ? `${label} ${line}` : line);

const percentile = (values, p) => {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
};

// One streamed chat request: timings and the checks of its framing.
async function streamOnce(messages) {
  const t0 = performance.now();
  const response = await fetch(`${base}/chat/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json', Authorization: 'Bearer x' },
    body: JSON.stringify({ model: 'm', messages, temperature: 0, max_tokens: maxTokens,
                           stream: true, stream_options: { include_usage: true },
                           ...(noCachePrompt ? { cache_prompt: false } : {}) }),
  });
  if (response.status !== 200) throw new Error(`status ${response.status}: ${await response.text()}`);
  const decoder = new TextDecoder();
  let buffer = '', text = '', usage = null, finish = null, role = null, done = false;
  let first = null, last = null;
  const gaps = [];
  for await (const bytes of response.body) {
    buffer += decoder.decode(bytes, { stream: true });
    let end;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      if (event.startsWith(':')) continue;
      if (!event.startsWith('data: ')) throw new Error(`bad event ${event}`);
      const data = event.slice(6);
      if (data === '[DONE]') { done = true; continue; }
      const chunk = JSON.parse(data);
      if (chunk.usage) usage = chunk.usage;
      for (const c of chunk.choices) {
        if (c.delta.role) role = c.delta.role;
        if (c.finish_reason) finish = c.finish_reason;
        // A thought streams as reasoning_content (boltrt, when the model opens one): its deltas
        // are tokens the client sees arrive, so they count for the first token and the gaps.
        if (c.delta.content || c.delta.reasoning_content) {
          const now = performance.now();
          if (first === null) first = now; else gaps.push(now - last);
          last = now;
          if (c.delta.content) text += c.delta.content;
        }
      }
    }
  }
  if (!done || !usage || !finish || role !== 'assistant') throw new Error('malformed stream');
  return { ttft: (first ?? performance.now()) - t0, gaps, tokens: usage.completion_tokens, text,
           usage };
}

// One untimed request first: model pages, thread pools and the HTTP path warm.
if (clientCounts.length > 0) await streamOnce([{ role: 'user', content: 'Warm up.' }]);

for (const clients of clientCounts) {
  const ttft = [], gaps = [];
  let tokens = 0, errors = 0;
  const t0 = performance.now();
  await Promise.all(Array.from({ length: clients }, async (_, c) => {
    for (let r = 0; r < requestsPerClient; ++r) {
      try {
        const s = await streamOnce([{ role: 'user',
                                      content: `Client ${c} asks question ${r}: tell me a story.` }]);
        ttft.push(s.ttft);
        gaps.push(...s.gaps);
        tokens += s.tokens;
      } catch (e) {
        ++errors;
        console.error(String(e));
      }
    }
  }));
  const seconds = (performance.now() - t0) / 1000;
  say(`clients ${String(clients).padStart(2)}: ${(tokens / seconds).toFixed(1)} tok/s total, ` +
              `TTFT p50 ${percentile(ttft, 50).toFixed(1)} ms p99 ${percentile(ttft, 99).toFixed(1)} ms, ` +
              `ITL p50 ${percentile(gaps, 50).toFixed(2)} ms p99 ${percentile(gaps, 99).toFixed(2)} ms, ` +
              `${clients * requestsPerClient} requests, ${errors} errors`);
}

const history = [{ role: 'system', content: 'You are a careful assistant in a long conversation.' }];
for (let t = 1; t <= turns; ++t) {
  history.push({ role: 'user', content: `Turn ${t}: what happens next in the story?` });
  const s = await streamOnce(history);
  const cached = s.usage.prompt_tokens_details?.cached_tokens ?? 0;
  say(`turn ${String(t).padStart(2)}: prompt ${s.usage.prompt_tokens} tokens, cached ${cached} ` +
              `(${((100 * cached) / s.usage.prompt_tokens).toFixed(0)} %), computed ` +
              `${s.usage.prompt_tokens - cached}`);
  history.push({ role: 'assistant', content: s.text });
}
