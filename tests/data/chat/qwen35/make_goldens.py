#!/usr/bin/env python3
"""Renders cases.json with Qwen3.5's real chat template and Python's Jinja (Debian python3-jinja2),
configured as Hugging Face transformers renders chat templates: trim_blocks, lstrip_blocks, the
loopcontrols extension, raise_exception(), and `tojson` as json.dumps(ensure_ascii=False) with
keys in their given order (also what llama.cpp's Jinja engine does). Tool-call arguments given as
JSON text are parsed into objects first, as llama.cpp does before rendering.

    python3 tests/data/chat/qwen35/make_goldens.py \
        ~/.cache/llama-ref/src/models/templates/Qwen3.5-4B.jinja > tests/data/chat/qwen35/goldens.json

Output: {case name: {"prompt": text, "generation_prompt": text} or {"error": message}}.
The template itself is not committed.
"""
import json
import sys

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def main():
    source = open(sys.argv[1], encoding="utf-8").read()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(source)
    cases = json.load(open(sys.argv[2] if len(sys.argv) > 2 else __file__.replace(
        "make_goldens.py", "cases.json"), encoding="utf-8"))
    out = {}
    for case in cases:
        messages = json.loads(json.dumps(case["messages"]))
        for m in messages:
            for call in m.get("tool_calls", []):
                f = call["function"]
                if isinstance(f.get("arguments"), str):
                    f["arguments"] = json.loads(f["arguments"])
        kwargs = dict(messages=messages,
                      add_generation_prompt=case.get("add_generation_prompt", True),
                      enable_thinking=case.get("enable_thinking", True))
        if case.get("tools"):
            kwargs["tools"] = case["tools"]
        try:
            prompt = template.render(**kwargs)
            gen = template.render(**dict(kwargs, add_generation_prompt=True))
            no_gen = template.render(**dict(kwargs, add_generation_prompt=False))
            assert gen.startswith(no_gen)
            out[case["name"]] = {"prompt": prompt, "generation_prompt": gen[len(no_gen):]}
        except TemplateError as e:
            out[case["name"]] = {"error": str(e)}
    json.dump(out, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
