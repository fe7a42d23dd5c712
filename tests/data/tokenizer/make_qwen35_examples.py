#!/usr/bin/env python3
"""Ids of a few hand-picked strings, straight from llama.cpp's own command-line tokenizer, on the
qwen35 fixture vocabulary (tests/data/vocab/ggml-vocab-qwen35.gguf, from tools/fetch-test-data.sh):

    python3 tests/data/tokenizer/make_qwen35_examples.py > tests/data/tokenizer/qwen35-examples.json

Each string goes through `llama-tokenize -m VOCAB -f FILE --ids --log-disable` (special tokens
parsed, no BOS for this vocabulary). The larger corpus comparison is in ggml-vocab-qwen35.golden.
"""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(os.environ.get("LLAMA_REF_DIR", os.path.expanduser("~/.cache/llama-ref")),
                   "build", "bin", "llama-tokenize")
VOCAB = os.path.join(ROOT, "tests", "data", "vocab", "ggml-vocab-qwen35.gguf")

EXAMPLES = [
    "Hello world",
    " Hello  world!",
    "12345 abc",
    "line1\n\nline2",
    "don'T you'LL we'Re they've I'm she'd it's",
    "नमस्ते दुनिया",                      # Devanagari vowel signs are marks (\p{M})
    "cafe\u0301 re\u0301sume\u0301",      # decomposed accents stay in the word
    "مرحبا بالعالم",
    "你好，世界！今天天气很好。",
    "こんにちは世界 カタカナ",
    "안녕하세요 세계",
    "Привет, мир! Ёжик",
    "emoji 👍🏽 👨‍👩‍👧 🇫🇷 ✨",
    "3.14159 + 2,718 = 1e10; 0x1F 100000",
    "a   b\t\tc  \n  d\r\n\r\ne   ",
    "    indented\n\tcode();\n",
    "def f(x):\n    return x ** 2  # square\n",
    "if (a && b) { return \"ok\"; } // done",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<think>\nreasoning\n</think>\n\nanswer",
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
    "Ⅻ ½ ² ٣ ६",                          # other numbers: one digit each
    "\u00a0nbsp\u3000ideographic\u2003em",
]


def ids_of(text):
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write(text.encode("utf-8"))
        path = f.name
    try:
        out = subprocess.run([BIN, "-m", VOCAB, "-f", path, "--ids", "--log-disable"],
                             capture_output=True, check=True).stdout.decode()
    finally:
        os.unlink(path)
    return json.loads(out.strip().splitlines()[-1])


def main():
    rows = [{"text": t, "ids": ids_of(t)} for t in EXAMPLES]
    sys.stdout.write("[\n" + ",\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n]\n")


if __name__ == "__main__":
    main()
