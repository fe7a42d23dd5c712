"""Gemma-4-style BPE tokenizer for models/tiny: training, encoding, decoding.

Vocabulary layout (ids):
  0..106   the control / special tokens of the real Gemma 4 vocabulary, copied by position with their
           token types (<pad> <eos> <bos> <unk> <mask>, <|tool> ... <|"|>, <|think|>, <|channel>,
           <channel|>, <|turn>, <turn|>, and the <unusedN> fillers)
  107..114 newline runs "\n" x 1..8 (as in Gemma 4, where 107 is "\n")
  115..370 byte-fallback tokens <0x00>..<0xFF>
  371..    single characters, then one token per merge (in merge order)

Encoding follows /work/shared/docs/gemma4.md §8.4 (the llama.cpp gemma4 BPE): split on special
tokens, spaces -> U+2581, split into runs of non-newlines / newlines, a newline run that is a
token is emitted whole, otherwise BPE over characters by lowest merge rank (leftmost first),
unknown symbols fall back to <0xXX> byte tokens.
"""
import heapq
import json
import re
import sys

SPACE = "\u2581"
TYPE_NORMAL, TYPE_UNKNOWN, TYPE_CONTROL, TYPE_USER_DEFINED, TYPE_UNUSED, TYPE_BYTE = 1, 2, 3, 4, 5, 6
N_GEMMA_SPECIAL = 107
N_NEWLINE_RUNS = 8
DEFAULT_VOCAB = 1920


class Tokenizer:
    def __init__(self, tokens, types, merges):
        self.tokens = tokens
        self.types = types
        self.merges = merges
        self.id_of = {t: i for i, t in enumerate(tokens)}
        self.rank = {}
        for r, m in enumerate(merges):
            p = m.index(" ", 1)
            self.rank[(m[:p], m[p + 1:])] = r
        self.specials = sorted((t for t, ty in zip(tokens, types)
                                if ty in (TYPE_CONTROL, TYPE_USER_DEFINED)), key=len, reverse=True)
        self.bos_id = self.id_of["<bos>"]
        self.eos_id = self.id_of["<eos>"]
        self._cache = {}

    # ------------------------------------------------------------------ io
    def save(self, path):
        with open(path, "w") as f:
            json.dump({"tokens": self.tokens, "types": self.types, "merges": self.merges}, f,
                      ensure_ascii=False)

    @staticmethod
    def load(path):
        """From our tokenizer.json, or from a GGUF file's tokenizer.ggml.* arrays."""
        if path.endswith(".gguf"):
            sys.path.insert(0, __file__.rsplit("/", 1)[0])
            import gguf_io
            meta, _ = gguf_io.read_gguf(path, want_tensors=False)
            return Tokenizer(meta["tokenizer.ggml.tokens"], meta["tokenizer.ggml.token_type"],
                             meta["tokenizer.ggml.merges"])
        d = json.load(open(path))
        return Tokenizer(d["tokens"], d["types"], d["merges"])

    # ------------------------------------------------------------------ encode
    def _split_special(self, text, parse_special):
        """Yields (is_special_id, piece): longest special token match first, left to right."""
        allowed = [s for s in self.specials
                   if parse_special or self.types[self.id_of[s]] == TYPE_USER_DEFINED]
        if not allowed:
            yield None, text
            return
        pat = re.compile("|".join(re.escape(s) for s in allowed))
        pos = 0
        for m in pat.finditer(text):
            if m.start() > pos:
                yield None, text[pos:m.start()]
            yield self.id_of[m.group(0)], None
            pos = m.end()
        if pos < len(text):
            yield None, text[pos:]

    def _bpe(self, word):
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        if word and set(word) == {"\n"} and word in self.id_of:
            out = [self.id_of[word]]
        else:
            syms = list(word)
            nxt = list(range(1, len(syms) + 1))
            prv = list(range(-1, len(syms) - 1))
            heap = []
            for i in range(len(syms) - 1):
                r = self.rank.get((syms[i], syms[i + 1]))
                if r is not None:
                    heap.append((r, i, syms[i] + syms[i + 1]))
            heapq.heapify(heap)
            while heap:
                r, i, text = heapq.heappop(heap)
                j = nxt[i] if i < len(syms) else -1
                if not syms[i] or j >= len(syms) or not syms[j] or syms[i] + syms[j] != text:
                    continue
                syms[i] = text
                syms[j] = ""
                nxt[i] = nxt[j]
                if nxt[j] < len(syms):
                    prv[nxt[j]] = i
                p = prv[i]
                if p >= 0:
                    rr = self.rank.get((syms[p], syms[i]))
                    if rr is not None:
                        heapq.heappush(heap, (rr, p, syms[p] + syms[i]))
                n = nxt[i]
                if n < len(syms):
                    rr = self.rank.get((syms[i], syms[n]))
                    if rr is not None:
                        heapq.heappush(heap, (rr, i, syms[i] + syms[n]))
            out = []
            for s in syms:
                if not s:
                    continue
                tid = self.id_of.get(s)
                if tid is not None:
                    out.append(tid)
                else:
                    for b in s.encode("utf-8"):
                        bid = self.id_of.get("<0x%02X>" % b)
                        if bid is not None:
                            out.append(bid)
        if len(word) < 64:
            self._cache[word] = out
        return out

    def encode(self, text, add_bos=True, parse_special=True):
        ids = [self.bos_id] if add_bos else []
        for sid, piece in self._split_special(text, parse_special):
            if sid is not None:
                ids.append(sid)
                continue
            piece = piece.replace(" ", SPACE)
            for run in re.findall(r"[^\n]+|\n+", piece):
                ids += self._bpe(run)
        return ids

    # ------------------------------------------------------------------ decode
    def decode(self, ids, render_special=False):
        out = bytearray()
        for i in ids:
            t, ty = self.tokens[i], self.types[i]
            if ty == TYPE_BYTE:
                out.append(int(t[3:5], 16))
            elif ty in (TYPE_CONTROL, TYPE_UNKNOWN, TYPE_UNUSED):
                if render_special:
                    out += t.encode()
            else:
                out += t.replace(SPACE, " ").encode()
        return out.decode("utf-8", errors="replace")


# ---------------------------------------------------------------------- training
CHUNK_RE = re.compile(SPACE + r"*[A-Za-z]+|" + SPACE + r"*[^\sA-Za-z0-9" + SPACE + r"]+|[0-9]|" +
                      SPACE + r"+|\s+")


def train(texts, gemma_vocab_path, vocab_size=DEFAULT_VOCAB, min_char_count=5):
    """texts: iterable of strings (specials are cut out before counting)."""
    sys.path.insert(0, __file__.rsplit("/", 1)[0])
    import gguf_io
    meta, _ = gguf_io.read_gguf(gemma_vocab_path, want_tensors=False)
    tokens = list(meta["tokenizer.ggml.tokens"][:N_GEMMA_SPECIAL])
    types = list(meta["tokenizer.ggml.token_type"][:N_GEMMA_SPECIAL])
    for k in range(1, N_NEWLINE_RUNS + 1):
        tokens.append("\n" * k)
        types.append(TYPE_NORMAL)
    for b in range(256):
        tokens.append("<0x%02X>" % b)
        types.append(TYPE_BYTE)
    special_re = re.compile("|".join(re.escape(t) for t in tokens[:N_GEMMA_SPECIAL]))

    word_count = {}
    char_count = {}
    for text in texts:
        for piece in special_re.split(text):
            piece = piece.replace(" ", SPACE)
            for ch in piece:
                char_count[ch] = char_count.get(ch, 0) + 1
            for w in CHUNK_RE.findall(piece):
                if "\n" in w:
                    continue
                word_count[w] = word_count.get(w, 0) + 1
    base = set(chr(c) for c in range(33, 127)) | {SPACE, "\t"}
    base |= {c for c, n in char_count.items() if n >= min_char_count and c != "\n"}
    for c in sorted(base):
        tokens.append(c)
        types.append(TYPE_NORMAL)

    words = [list(w) for w in word_count]
    counts = list(word_count.values())
    pair_count = {}
    pair_where = {}

    def add_pairs(wi, sign):
        w = words[wi]
        for a, b in zip(w, w[1:]):
            if a.isdigit() or b.isdigit():
                continue  # digits stay single tokens (helps arithmetic)
            pair_count[(a, b)] = pair_count.get((a, b), 0) + sign * counts[wi]
            if sign > 0:
                pair_where.setdefault((a, b), set()).add(wi)

    for wi in range(len(words)):
        add_pairs(wi, +1)
    merges = []
    have = set(tokens)
    while len(tokens) < vocab_size and pair_count:
        best = max(pair_count.items(), key=lambda kv: (kv[1], kv[0]))
        (a, b), n = best
        if n < 2:
            break
        merges.append(a + " " + b)
        new = a + b
        if new not in have:
            tokens.append(new)
            types.append(TYPE_NORMAL)
            have.add(new)
        for wi in list(pair_where.get((a, b), ())):
            add_pairs(wi, -1)
            w, out, i = words[wi], [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(new)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            words[wi] = out
            add_pairs(wi, +1)
        pair_where.pop((a, b), None)
        for k in [k for k, v in pair_count.items() if v <= 0]:
            del pair_count[k]
    return Tokenizer(tokens, types, merges)


if __name__ == "__main__":
    # tokenizer.py DATA_DIR GEMMA_VOCAB_GGUF OUT_JSON
    import os
    data, gemma_vocab, out = sys.argv[1:4]
    texts = [open(os.path.join(data, "austen_train.txt")).read()]
    texts += [json.loads(l) for l in open(os.path.join(data, "chat_train.jsonl"))]
    tok = train(texts, gemma_vocab)
    tok.save(out)
    sample = texts[0][:2000]
    ids = tok.encode(sample)
    assert tok.decode(ids) == sample, "round trip failed"
    print(f"vocab {len(tok.tokens)}, merges {len(tok.merges)}, chars/token {len(sample) / len(ids):.2f}")
