"""Render a one-turn chat prompt with the chat template stored in a GGUF (jinja2).

chat_prompt.py MODEL.gguf "user message" on|off
Prints the prompt without the leading <bos> (llama-completion adds BOS itself).
"""
import sys

import jinja2

import gguf_io as G


def render(path, user, thinking):
    meta, _ = G.read_gguf(path, want_tensors=False)
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
    env.globals["raise_exception"] = lambda msg: (_ for _ in ()).throw(RuntimeError(msg))
    tmpl = env.from_string(meta["tokenizer.chat_template"])
    out = tmpl.render(messages=[{"role": "user", "content": user}], add_generation_prompt=True,
                      enable_thinking=thinking, bos_token="<bos>", eos_token="<eos>")
    return out[len("<bos>"):] if out.startswith("<bos>") else out


if __name__ == "__main__":
    sys.stdout.write(render(sys.argv[1], sys.argv[2], sys.argv[3] == "on"))
