#include "server/chat_page.h"

namespace boltrt::server {

std::string_view chat_page_html() {
  // Kept small and dependency-free: the page must work offline, behind the loopback bind.
  static constexpr std::string_view kPage = R"page(<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>boltrt chat</title>
<style>
  :root { --bg: #f6f6f3; --fg: #1d1d1b; --muted: #6b6b66; --user: #dfe9f5; --bot: #ffffff;
          --line: #d8d8d2; --accent: #2d5d8a; }
  * { box-sizing: border-box; }
  body { margin: 0; font: 15px/1.45 system-ui, sans-serif; background: var(--bg); color: var(--fg);
         display: flex; flex-direction: column; height: 100vh; }
  header { padding: 8px 16px; border-bottom: 1px solid var(--line); display: flex; gap: 12px;
           align-items: center; flex-wrap: wrap; }
  header h1 { font-size: 16px; margin: 0 8px 0 0; }
  header label { color: var(--muted); font-size: 13px; }
  header input[type=number] { width: 64px; }
  #log { flex: 1; overflow-y: auto; padding: 16px; display: flex; flex-direction: column; gap: 10px; }
  .msg { max-width: 760px; padding: 10px 14px; border-radius: 10px; border: 1px solid var(--line);
         white-space: pre-wrap; word-wrap: break-word; }
  .user { align-self: flex-end; background: var(--user); }
  .assistant { align-self: flex-start; background: var(--bot); }
  .error { align-self: center; color: #9b1c1c; border-color: #e5b4b4; background: #fbeaea; }
  details.thinking { color: var(--muted); font-size: 13px; margin-bottom: 6px; }
  details.thinking summary { cursor: pointer; }
  .tool { font: 12px/1.4 ui-monospace, monospace; background: #f0f0ec; border-radius: 6px;
          padding: 6px 8px; margin-top: 6px; }
  .stats { color: var(--muted); font-size: 12px; margin-top: 6px; }
  form { display: flex; gap: 8px; padding: 12px 16px; border-top: 1px solid var(--line); }
  textarea { flex: 1; resize: none; height: 64px; font: inherit; padding: 8px; border-radius: 8px;
             border: 1px solid var(--line); }
  button { font: inherit; padding: 0 18px; border-radius: 8px; border: 1px solid var(--accent);
           background: var(--accent); color: white; cursor: pointer; }
  button.secondary { background: white; color: var(--accent); }
</style>
</head>
<body>
<header>
  <h1>boltrt chat</h1>
  <span id="model">…</span>
  <label><input type="checkbox" id="think"> thinking</label>
  <label>temperature <input type="number" id="temp" value="1" min="0" max="2" step="0.1"></label>
  <label>max tokens <input type="number" id="max" value="512" min="1"></label>
  <label>API key <input type="password" id="key" size="12"></label>
  <button type="button" class="secondary" id="reset">New chat</button>
</header>
<main id="log"></main>
<form id="form">
  <textarea id="input" placeholder="Message (Enter sends, Shift+Enter a new line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
'use strict';
const log = document.getElementById('log');
const input = document.getElementById('input');
const sendButton = document.getElementById('send');
const keyInput = document.getElementById('key');
keyInput.value = localStorage.getItem('boltrt-key') || '';
keyInput.addEventListener('change', () => localStorage.setItem('boltrt-key', keyInput.value));
let history = [];
let controller = null;

function headers() {
  const h = { 'Content-Type': 'application/json' };
  if (keyInput.value) h.Authorization = 'Bearer ' + keyInput.value;
  return h;
}

fetch('v1/models', { headers: headers() }).then((r) => r.json()).then((j) => {
  document.getElementById('model').textContent = j.data ? j.data[0].id : '';
}).catch(() => {});

function bubble(role, text) {
  const div = document.createElement('div');
  div.className = 'msg ' + role;
  if (text !== undefined) div.textContent = text;
  log.appendChild(div);
  log.scrollTop = log.scrollHeight;
  return div;
}

// The assistant's bubble: a collapsed thinking section, the answer, tool calls, statistics.
function assistantBubble() {
  const div = bubble('assistant');
  const thinking = document.createElement('details');
  thinking.className = 'thinking';
  thinking.hidden = true;
  thinking.innerHTML = '<summary>Thinking</summary>';
  const thought = document.createElement('div');
  thinking.appendChild(thought);
  const answer = document.createElement('div');
  const tools = document.createElement('div');
  const stats = document.createElement('div');
  stats.className = 'stats';
  div.append(thinking, answer, tools, stats);
  return { div, thinking, thought, answer, tools, stats };
}

async function send(text) {
  history.push({ role: 'user', content: text });
  bubble('user', text);
  const view = assistantBubble();
  const calls = [];
  let content = '';
  controller = new AbortController();
  sendButton.textContent = 'Stop';
  const started = performance.now();
  try {
    const response = await fetch('v1/chat/completions', {
      method: 'POST', headers: headers(), signal: controller.signal,
      body: JSON.stringify({
        model: 'boltrt', messages: history, stream: true,
        stream_options: { include_usage: true },
        reasoning: document.getElementById('think').checked ? 'on' : 'off',
        temperature: Number(document.getElementById('temp').value),
        max_tokens: Number(document.getElementById('max').value),
      }),
    });
    if (!response.ok) {
      const body = await response.json().catch(() => ({}));
      throw new Error((body.error && body.error.message) || response.statusText);
    }
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const event = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (!event.startsWith('data: ')) continue;
        const data = event.slice(6);
        if (data === '[DONE]') continue;
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message);
        if (chunk.usage) {
          const seconds = (performance.now() - started) / 1000;
          view.stats.textContent = chunk.usage.completion_tokens + ' tokens, ' +
            chunk.usage.prompt_tokens + ' prompt (' +
            chunk.usage.prompt_tokens_details.cached_tokens + ' cached), ' +
            (chunk.usage.completion_tokens / seconds).toFixed(1) + ' tok/s';
        }
        for (const choice of chunk.choices) {
          const d = choice.delta;
          if (d.reasoning_content) {
            view.thinking.hidden = false;
            view.thought.textContent += d.reasoning_content;
          }
          if (d.content) {
            content += d.content;
            view.answer.textContent = content;
          }
          for (const t of d.tool_calls || []) {
            if (!calls[t.index]) {
              calls[t.index] = { id: t.id, type: 'function',
                                 function: { name: t.function.name, arguments: '' } };
              const pre = document.createElement('div');
              pre.className = 'tool';
              view.tools.appendChild(pre);
              calls[t.index].view = pre;
            }
            calls[t.index].function.arguments += t.function.arguments || '';
            calls[t.index].view.textContent =
              'tool call ' + calls[t.index].function.name + '(' + calls[t.index].function.arguments + ')';
          }
        }
        log.scrollTop = log.scrollHeight;
      }
    }
  } catch (e) {
    if (e.name !== 'AbortError') bubble('error', String(e.message || e));
  } finally {
    controller = null;
    sendButton.textContent = 'Send';
    const turn = { role: 'assistant', content };
    if (calls.length) turn.tool_calls = calls.map(({ view, ...call }) => call);
    history.push(turn);
  }
}

document.getElementById('form').addEventListener('submit', (e) => {
  e.preventDefault();
  if (controller) { controller.abort(); return; }
  const text = input.value.trim();
  if (!text) return;
  input.value = '';
  send(text);
});
input.addEventListener('keydown', (e) => {
  if (e.key === 'Enter' && !e.shiftKey) {
    e.preventDefault();
    document.getElementById('form').requestSubmit();
  }
});
// ?q=TEXT sends TEXT at once (links that open a question; the page test uses it), ?temp=T and
// ?think=1 preset the controls.
const params = new URLSearchParams(location.search);
if (params.has('temp')) document.getElementById('temp').value = params.get('temp');
if (params.get('think') === '1') document.getElementById('think').checked = true;
if (params.get('q')) send(params.get('q'));
document.getElementById('reset').addEventListener('click', () => {
  if (controller) controller.abort();
  history = [];
  log.innerHTML = '';
});
</script>
</body>
</html>
)page";
  return kPage;
}

}  // namespace boltrt::server
