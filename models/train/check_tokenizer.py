"""Check that tokenizer.py gives the same ids as llama.cpp's llama-tokenize on our GGUF.

check_tokenizer.py MODEL.gguf TOKENIZER_JSON HELDOUT_TXT [LLAMA_TOKENIZE_BIN]
Runs ~120 strings: held-out Austen lines, chat-formatted text with special tokens, digits,
space and newline runs, non-Latin text and emoji (byte fallback). Exit 1 on any mismatch.
"""
import os
import random
import subprocess
import sys
import tempfile

from tokenizer import Tokenizer

FIXED = [
    "", " ", "  ", "\n", "\n\n", "\n\n\n\n\n\n\n\n\n\n\n", " \n \n", "a\n\nb", "Hello world",
    "  leading spaces", "trailing spaces   ", "tab\tseparated\tvalues",
    "12345 + 67890 = 80235", "3.14159", "x=-1", "It's Mr. Darcy's; isn't it?",
    "Caf\u00e9 na\u00efve r\u00e9sum\u00e9", "\u65e5\u672c\u8a9e\u306e\u6587", "emoji \U0001F600\U0001F389 ok",
    "\u2581already has the marker", "<bos>text after bos", "<|turn>user\nHi<turn|>\n<|turn>model\n",
    "<|channel>thought\nLet me think.<channel|>Answer.<turn|>", "<|think|>", "<eos><pad><unk>",
    "<|tool_call>call:f{a:1}<tool_call|>", "<|\"|>quoted<|\"|>", "<unused5> and <mask>",
    "<|turn>system\n<|think|><turn|>\n<|turn>user\nWhat is 12 + 30?<turn|>\n<|turn>model\n",
    "not a <tag> and </s> and <|turn", "MIXED case WORDS and CamelCase",
    "--- *** ___ !!! ??? ...", "\"Quoted,\" said she.", "line one\nline two\n\nline four\n",
    "\r\nwindows newlines\r\n", "a" * 300, "ab " * 100, "\u2014em dash\u2014 and \u2018curly\u2019 quotes",
]


def llama_ids(bin_, model, text):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(text)
        name = f.name
    try:
        out = subprocess.run([bin_, "-m", model, "-f", name, "--ids", "--log-disable", "--no-escape"],
                             capture_output=True, text=True, check=True).stdout.strip()
    finally:
        os.unlink(name)
    return [int(v) for v in out.strip("[]").split(",") if v.strip()]


def main():
    model, tok_json, held = sys.argv[1:4]
    bin_ = sys.argv[4] if len(sys.argv) > 4 else os.path.expanduser("~/.cache/llama-ref/build/bin/llama-tokenize")
    tok = Tokenizer.load(tok_json)
    rng = random.Random(7)
    paras = [p for p in open(held).read().split("\n\n") if p.strip()]
    strings = FIXED + [rng.choice(paras)[:rng.randrange(20, 400)] for _ in range(60)]
    strings += ["\n\n".join(rng.sample(paras, 2))[:600] for _ in range(20)]
    bad = 0
    for s in strings:
        ours = tok.encode(s, add_bos=True, parse_special=True)
        ref = llama_ids(bin_, model, s)
        if ours != ref:
            bad += 1
            print(f"MISMATCH {s[:60]!r}\n  ours {ours[:30]}\n  ref  {ref[:30]}")
    print(f"{len(strings) - bad}/{len(strings)} strings tokenized identically")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
