"""Build the training corpus for models/tiny (deterministic, seed 1234).

Sources (licence-clean):
  * Jane Austen's six novels (public domain) from Debian's r-cran-janeaustenr package (MIT), an R
    lazy-load database: a sequence of [u32 big-endian length][zlib stream] chunks, each an R XDR
    serialisation of one character vector (one novel, one element per printed line).
  * A synthetic chat set rendered in the Gemma 4 chat format (see /work/shared/docs/gemma4.md §9):
    multi-step addition, letter counting and word reversal, ~60% with a thought section.

Usage: prepare_data.py OUTDIR   (downloads the .deb with `apt-get download` if OUTDIR lacks it)
Writes OUTDIR/austen_train.txt, austen_heldout.txt (paragraphs separated by blank lines),
OUTDIR/chat_train.jsonl, chat_heldout.jsonl (one rendered conversation string per line).
"""
import glob
import json
import os
import random
import re
import struct
import subprocess
import sys
import zlib

BOOK_ORDER = ["Sense & Sensibility", "Pride & Prejudice", "Mansfield Park", "Emma",
              "Northanger Abbey", "Persuasion"]


def read_rdb_strings(blob):
    """Yields one list of strings per serialised character vector in an R .rdb file."""
    pos = 0
    while pos < len(blob):
        dec = zlib.decompressobj()
        raw = dec.decompress(blob[pos + 4:])
        pos = len(blob) - len(dec.unused_data)
        yield parse_r_character_vector(raw)


def parse_r_character_vector(raw):
    assert raw[:2] == b"X\n", "expected R XDR serialisation"
    p = 2
    version = struct.unpack_from(">i", raw, p)[0]
    p += 12
    if version == 3:
        (n,) = struct.unpack_from(">i", raw, p)
        p += 4 + n  # native encoding name
    (flags,) = struct.unpack_from(">i", raw, p)
    p += 4
    assert flags & 0xFF == 16, f"expected STRSXP, got type {flags & 0xFF}"
    (length,) = struct.unpack_from(">i", raw, p)
    p += 4
    out = []
    for _ in range(length):
        (cflags, clen) = struct.unpack_from(">ii", raw, p)
        p += 8
        assert cflags & 0xFF == 9, "expected CHARSXP"
        if clen < 0:
            out.append("")
            continue
        out.append(raw[p:p + clen].decode("utf-8" if cflags & (1 << 15) == 0 else "latin-1",
                                          errors="replace"))
        p += clen
    return out


def lines_to_paragraphs(lines):
    paras, cur = [], []
    for line in lines:
        line = line.strip()
        if not line:
            if cur:
                paras.append(" ".join(cur))
                cur = []
        else:
            cur.append(line)
    if cur:
        paras.append(" ".join(cur))
    # Gutenberg uses _underscores_ for italics; drop them.
    return [re.sub(r"\s+", " ", p.replace("_", "")) for p in paras]


# ---------------------------------------------------------------- synthetic chat
def render_chat(user, answer, thought, thinking):
    """Gemma 4 template rendering (bos, optional system turn with <|think|>, user, model)."""
    s = "<bos>"
    if thinking:
        s += "<|turn>system\n<|think|><turn|>\n"
    s += "<|turn>user\n" + user + "<turn|>\n<|turn>model\n"
    if thinking:
        s += "<|channel>thought\n" + thought + "<channel|>"
    else:
        s += "<|channel>thought\n<channel|>"
    return s + answer + "<turn|>\n"


def task_addition(rng):
    digits = rng.choice([2, 2, 3, 3, 3, 4])
    a = rng.randrange(10 ** (digits - 1), 10 ** digits)
    b = rng.randrange(10 ** (digits - 1), 10 ** digits)
    user = rng.choice(["What is {a} + {b}?", "Add {a} and {b}.", "Please compute {a} + {b}.",
                       "What do you get when you add {a} to {b}?"]).format(a=a, b=b)
    names = ["ones", "tens", "hundreds", "thousands", "ten-thousands"]
    steps, carry = [], 0
    sa, sb = str(a)[::-1], str(b)[::-1]
    for i in range(digits):
        da, db = int(sa[i]), int(sb[i])
        tot = da + db + carry
        expr = f"{da} + {db}" + (f" + {carry}" if carry else "")
        if tot >= 10:
            steps.append(f"{names[i]}: {expr} = {tot}, write {tot - 10}, carry 1.")
        else:
            steps.append(f"{names[i]}: {expr} = {tot}, write {tot}.")
        carry = 1 if tot >= 10 else 0
    if carry:
        steps.append(f"{names[digits]}: the carry 1, write 1.")
    thought = "Add column by column.\n" + "\n".join(steps) + f"\nSo the sum is {a + b}."
    answer = f"{a} + {b} = {a + b}."
    return user, answer, thought


def task_count(rng, words):
    word = rng.choice(words)
    if rng.random() < 0.75:
        letter = rng.choice(word)
    else:
        letter = rng.choice("abcdefghijklmnopqrstuvwxyz")
    user = rng.choice(["How many times does the letter '{l}' appear in '{w}'?",
                       "Count the letter '{l}' in the word '{w}'.",
                       "How many '{l}'s are in '{w}'?"]).format(l=letter, w=word)
    n, parts = 0, []
    for ch in word:
        if ch == letter:
            n += 1
            parts.append(f"{ch} ({n})")
        else:
            parts.append(ch)
    thought = f"Spell '{word}' and count each '{letter}'.\n" + " ".join(parts) + f"\nTotal: {n}."
    times = "once" if n == 1 else f"{n} times"
    answer = (f"The letter '{letter}' does not appear in '{word}'." if n == 0
              else f"The letter '{letter}' appears {times} in '{word}'.")
    return user, answer, thought


def task_reverse(rng, words):
    if rng.random() < 0.6:
        word = rng.choice(words)
        user = rng.choice(["Reverse the word '{w}'.", "Spell '{w}' backwards.",
                           "What is '{w}' written backwards?"]).format(w=word)
        rev = word[::-1]
        thought = (f"Letters of '{word}': " + " ".join(word) + ".\nFrom the end: " + " ".join(rev) +
                   f".\nJoined: {rev}.")
        answer = f"'{word}' backwards is '{rev}'."
    else:
        k = rng.randrange(3, 6)
        ws = [rng.choice(words) for _ in range(k)]
        user = "Reverse the order of the words: " + " ".join(ws)
        thought = ("Number the words: " + ", ".join(f"{i + 1} {w}" for i, w in enumerate(ws)) +
                   ".\nRead them from last to first: " + ", ".join(reversed(ws)) + ".")
        answer = " ".join(reversed(ws))
    return user, answer, thought


def task_austen(rng, paras):
    para = rng.choice(paras)
    sents = re.split(r"(?<=[.!?]) ", para)
    if len(sents) < 2 or len(para) > 700:
        return None
    user = rng.choice(["Continue this passage: ", "How might this go on? ",
                       "Continue in the style of Jane Austen: "]) + sents[0]
    answer = " ".join(sents[1:4])
    thought = "The passage is from a novel by Jane Austen; continue it in the same voice."
    return user, answer, thought


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/boltrt-tiny"
    os.makedirs(out, exist_ok=True)
    rdb = glob.glob(os.path.join(out, "deb/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"))
    if not rdb:
        subprocess.run(["apt-get", "download", "r-cran-janeaustenr"], cwd=out, check=True)
        deb = sorted(glob.glob(os.path.join(out, "r-cran-janeaustenr_*.deb")))[-1]
        subprocess.run(["dpkg-deb", "-x", deb, os.path.join(out, "deb")], check=True)
        rdb = glob.glob(os.path.join(out, "deb/usr/lib/R/site-library/janeaustenr/data/Rdata.rdb"))
    blob = open(rdb[0], "rb").read()
    books = [lines_to_paragraphs(v) for v in read_rdb_strings(blob)]
    train_p, held_p = [], []
    for paras in books:
        cut = int(len(paras) * 0.97)  # last 3% of every novel is held out
        train_p += paras[:cut]
        held_p += paras[cut:]
    with open(os.path.join(out, "austen_train.txt"), "w") as f:
        f.write("\n\n".join(train_p) + "\n")
    with open(os.path.join(out, "austen_heldout.txt"), "w") as f:
        f.write("\n\n".join(held_p) + "\n")

    rng = random.Random(1234)
    text = " ".join(train_p).lower()
    freq = {}
    for w in re.findall(r"[a-z]+", text):
        freq[w] = freq.get(w, 0) + 1
    words = sorted((w for w, c in freq.items() if 3 <= len(w) <= 9 and c >= 40))
    for name, count in (("chat_train.jsonl", 12000), ("chat_heldout.jsonl", 200)):
        with open(os.path.join(out, name), "w") as f:
            made = 0
            while made < count:
                kind = rng.random()
                if kind < 0.35:
                    item = task_addition(rng)
                elif kind < 0.6:
                    item = task_count(rng, words)
                elif kind < 0.85:
                    item = task_reverse(rng, words)
                else:
                    item = task_austen(rng, train_p)
                if item is None:
                    continue
                thinking = rng.random() < 0.6
                f.write(json.dumps(render_chat(*item, thinking)) + "\n")
                made += 1
    print(f"books {len(books)}, paragraphs train {len(train_p)} held {len(held_p)}, "
          f"chars {sum(map(len, train_p))}, word list {len(words)}")


if __name__ == "__main__":
    main()
