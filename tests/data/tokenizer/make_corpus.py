#!/usr/bin/env python3
"""Deterministic tokenizer-parity corpus for boltrt.

    make_corpus.py OUT.bin

Writes >= 2,000 byte strings (not all valid UTF-8) as a little-endian record file:
    b"BTCORPUS" u32 version=1 u32 count, then per string: u32 length, bytes.
The goldens in this directory were made from exactly this output; changing anything here
(order, seeds, content) invalidates them — regenerate them with golden_tokenizer (see README.md).
Uses its own splitmix64 generator so the output never depends on Python's `random` module.
"""
import struct
import sys

MASK = (1 << 64) - 1


class Rng:
    def __init__(self, seed):
        self.state = seed & MASK

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % n

    def pick(self, seq):
        return seq[self.below(len(seq))]

    def chance(self, num, den):
        return self.below(den) < num


# Short phrases in 40+ languages and scripts (our own wording).
LANGUAGES = {
    "english": ["Hello, how are you today?", "The quick brown fox jumps over the lazy dog.",
                "I'll be there at 5 o'clock, won't you?", "It's a well-known fact: don't panic!"],
    "german": ["Größenwahn ist überall.", "Die Straße führt über die Brücke.", "Schöne Grüße aus München!"],
    "french": ["Où est la bibliothèque ?", "C'est déjà l'été, n'est-ce pas ?", "Œuvre à côté du garçon."],
    "spanish": ["¿Dónde está el baño?", "¡Qué día tan bonito! Mañana llueve.", "El niño comió piña."],
    "portuguese": ["Não há coração sem emoção.", "A ação começou às três horas."],
    "italian": ["Perché non andiamo al caffè più vicino?", "Città è già piena."],
    "dutch": ["Het is een mooie dag in ’s-Hertogenbosch.", "Ijsjes zijn lekker."],
    "polish": ["Zażółć gęślą jaźń.", "Chrząszcz brzmi w trzcinie."],
    "czech": ["Příliš žluťoučký kůň úpěl ďábelské ódy.", "Dobrý den, jak se máte?"],
    "turkish": ["Pijamalı hasta yağız şoföre çabucak güvendi.", "İstanbul'da ılık bir gün."],
    "vietnamese": ["Tiếng Việt có nhiều dấu thanh.", "Xin chào, bạn khỏe không?"],
    "indonesian": ["Selamat pagi, apa kabar?", "Saya suka makan nasi goreng."],
    "swahili": ["Habari za asubuhi?", "Ninapenda kusoma vitabu."],
    "finnish": ["Hyvää huomenta, mitä kuuluu?", "Äänestäjät lähtivät kävelylle."],
    "hungarian": ["Árvíztűrő tükörfúrógép.", "Jó napot kívánok!"],
    "icelandic": ["Þetta er íslenska með ð og þ.", "Góðan daginn."],
    "yoruba": ["Ẹ kú àárọ̀, ṣé dáadáa ni?", "Ọjọ́ ayọ̀."],
    "greek": ["Καλημέρα, τι κάνεις;", "Ξεσκεπάζω την ψυχοφθόρα βδελυγμία."],
    "russian": ["Съешь же ещё этих мягких французских булок.", "Привет, как дела?"],
    "ukrainian": ["Чуєш їх, доцю, га? Кумедна ж ти, прощайся без ґольфів!", "Добрий день."],
    "bulgarian": ["Жълтата дюля беше щастлива.", "Здравейте!"],
    "serbian": ["Љубазни фењерџија чађавог лица.", "Ђак."],
    "armenian": ["Բարև, ինչպե՞ս ես։", "Հայերեն լեզու"],
    "georgian": ["გამარჯობა, როგორ ხარ?", "ქართული ენა"],
    "hebrew": ["שלום, מה שלומך?", "עברית נכתבת מימין לשמאל."],
    "arabic": ["مرحبا، كيف حالك؟", "اللغة العربية جميلة جداً."],
    "persian": ["سلام، حال شما چطور است؟", "زبان فارسی"],
    "urdu": ["آپ کیسے ہیں؟", "اردو زبان"],
    "hindi": ["नमस्ते, आप कैसे हैं?", "हिन्दी भाषा बहुत सुंदर है।"],
    "bengali": ["নমস্কার, আপনি কেমন আছেন?", "বাংলা ভাষা"],
    "punjabi": ["ਸਤ ਸ੍ਰੀ ਅਕਾਲ, ਤੁਸੀਂ ਕਿਵੇਂ ਹੋ?", "ਪੰਜਾਬੀ"],
    "gujarati": ["નમસ્તે, તમે કેમ છો?", "ગુજરાતી ભાષા"],
    "tamil": ["வணக்கம், எப்படி இருக்கிறீர்கள்?", "தமிழ் மொழி"],
    "telugu": ["నమస్కారం, మీరు ఎలా ఉన్నారు?", "తెలుగు భాష"],
    "kannada": ["ನಮಸ್ಕಾರ, ಹೇಗಿದ್ದೀರಿ?", "ಕನ್ನಡ"],
    "malayalam": ["നമസ്കാരം, സുഖമാണോ?", "മലയാളം"],
    "sinhala": ["ආයුබෝවන්, ඔබට කොහොමද?", "සිංහල"],
    "thai": ["สวัสดีครับ คุณสบายดีไหม", "ภาษาไทยไม่มีช่องว่างระหว่างคำ"],
    "lao": ["ສະບາຍດີ, ເຈົ້າສະບາຍດີບໍ?", "ພາສາລາວ"],
    "khmer": ["សួស្តី តើអ្នកសុខសប្បាយទេ?", "ភាសាខ្មែរ"],
    "burmese": ["မင်္ဂလာပါ၊ နေကောင်းလား။", "မြန်မာဘာသာ"],
    "tibetan": ["བཀྲ་ཤིས་བདེ་ལེགས།", "བོད་ཡིག"],
    "chinese_simplified": ["你好，你今天怎么样？", "我们一起去吃饭吧。", "机器学习模型的分词器"],
    "chinese_traditional": ["您好，歡迎光臨。", "繁體中文與簡體中文"],
    "japanese": ["こんにちは、お元気ですか？", "東京は日本の首都です。", "カタカナとひらがなと漢字"],
    "korean": ["안녕하세요, 잘 지내세요?", "한국어는 한글로 씁니다."],
    "mongolian": ["Сайн байна уу?", "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ"],
    "amharic": ["ሰላም፣ እንዴት ነህ?", "አማርኛ ቋንቋ"],
    "cherokee": ["ᎣᏏᏲ, ᏙᎯᏧ?", "ᏣᎳᎩ ᎦᏬᏂᎯᏍᏗ"],
    "inuktitut": ["ᐊᐃᖓᐃ, ᖃᓄᐃᑉᐱᑦ?", "ᐃᓄᒃᑎᑐᑦ"],
    "zalgo": ["Z̴͉̈a̵̛͎l̷̰͐g̶̣̈́o̸͚͑ ̵t̸e̷x̶t̴", "e\u0301e\u0300e\u0302\u0303\u0304"],
    "math": ["∀x∈ℝ: x² ≥ 0 ⇒ √(x²) = |x|", "∑ᵢ₌₁ⁿ i = n(n+1)/2", "𝔸𝕓𝒸𝓭 𝟘𝟙𝟚"],
}

CODE = [
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "#include <stdio.h>\n\nint main(void) {\n\tprintf(\"hello, world\\n\");\n\treturn 0;\n}\n",
    "const add = (a, b) => a + b;\nconsole.log(`sum: ${add(2, 3)}`);\n",
    "fn main() {\n    let v: Vec<u32> = (0..10).map(|x| x * x).collect();\n    println!(\"{:?}\", v);\n}\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "<!DOCTYPE html>\n<html>\n  <body class=\"main\">\n    <p>Hi &amp; bye</p>\n  </body>\n</html>\n",
    "{\"key\": [1, 2.5, -3e10, true, null], \"nested\": {\"a\": \"b\\u00e9\"}}",
    "for f in *.txt; do\n  wc -l \"$f\" | awk '{print $1}' >> out.log 2>&1\ndone\n",
    "template <typename T>\nstd::vector<T> f(const std::vector<T>& xs) { return {xs.rbegin(), xs.rend()}; }",
    "    \t  mixed_indent = {'a': 1,\t'b': 2}\r\n\r\n",
    "if (x != y && z <= 0x7fffffff || !ok) { y ^= x >> 3; }",
    "import numpy as np\narr = np.zeros((3, 4), dtype=np.float32)  # comment\n",
    "/* block comment */ // line comment\n/// doc comment\n#pragma once",
    "matrix[i][j] += a[i][k] * b[k][j];;;\n\n\n}}}]]])))",
]

EMOJI = [
    "😀", "😂🤣", "👍🏽", "👩‍💻", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🏴‍☠️", "🇺🇸🇬🇧🇯🇵🇩🇪🇫🇷", "🇺🇳", "1️⃣#️⃣*️⃣",
    "❤️", "❤", "✌🏿", "🧑🏻‍🤝‍🧑🏾", "👁️‍🗨️", "🐈‍⬛", "🫠🫥🫨", "☕️ and 🍰", "🏴󠁧󠁢󠁳󠁣󠁴󠁿", "🤷‍♀️🤷🏼‍♂️",
]

SPECIAL_TEXT = [
    "<bos>", "<eos>", "<pad>", "<unk>", "<mask>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>",
    "<|turn>", "<turn|>", "<|think|>", "<|channel>", "<channel|>", "<|tool>", "<tool|>", "<|tool_call>",
    "<tool_call|>", "<|tool_response>", "<tool_response|>", "<|\"|>", "<|image|>", "<|audio|>",
    "<|video|>", "<|image>", "<image|>", "<unused0>", "<unused99>", "<0x0A>", "<0xFF>", "[multimodal]",
    "<|turn", "turn|>", "<|", "|>", "<<|turn>>", "<|turn><turn|>", "<|turn|>", "<start_of_image>",
]

WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n ", "\t\t\n", "\u00a0",
              "\u3000", "\u2009", "\u200b", "\u2028", "\u202f", "\ufeff", "\x0b", "\x0c", "\x85"]

INVALID_UTF8 = [
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe0\x80\x80", b"\xed\xa0\x80", b"\xed\xbf\xbf",
    b"\xf0\x80\x80\x80", b"\xf4\x90\x80\x80", b"\xf5\x80\x80\x80", b"\xf8\x88\x80\x80\x80",
    b"\xfe", b"\xff", b"\xc3", b"\xe4\xbd", b"\xf0\x9f\x98", b"\xe4ab", b"\xf0\x9f", b"\xc3\x28",
    b"\xa0\xa1", b"\xe2\x82\x28", b"\xe2\x28\xa1", b"\xf0\x28\x8c\xbc", b"\xef\xbf\xbd", b"\xef\xbf\xbf",
]

PUNCT = ["", ".", ",", "!", "?", "...", " - ", " — ", ":", ";", "'", "\"", "(", ")", "’", "«", "»", "“", "”"]

NUMBERS = ["0", "7", "42", "123", "1234", "12345", "3.14159", "-0.5", "1e-9", "1,000,000", "2026-11-30",
           "0xDEADBEEF", "١٢٣", "४२", "一二三", "Ⅻ", "½", "²³"]


def utf8(s):
    return s.encode("utf-8")


def lang_phrase(rng):
    return rng.pick(LANGUAGES[rng.pick(sorted(LANGUAGES))])


def random_codepoint(rng):
    blocks = [(0x20, 0x7E), (0xA0, 0x24F), (0x370, 0x3FF), (0x400, 0x4FF), (0x590, 0x6FF),
              (0x900, 0x97F), (0xE00, 0xE7F), (0x1100, 0x11FF), (0x2000, 0x206F), (0x2190, 0x23FF),
              (0x2500, 0x27BF), (0x3040, 0x30FF), (0x4E00, 0x9FFF), (0xAC00, 0xD7A3), (0xE000, 0xE0FF),
              (0xFF00, 0xFFEF), (0x1F300, 0x1FAFF), (0x1D400, 0x1D7FF), (0x20000, 0x2A6DF),
              (0x0, 0x1F), (0xFFF0, 0xFFFF), (0x10FFF0, 0x10FFFF)]
    lo, hi = rng.pick(blocks)
    return chr(lo + rng.below(hi - lo + 1))


def make_strings():
    rng = Rng(0x5EED_B017)
    out = []

    # 1. every phrase on its own, and with a leading space
    for name in sorted(LANGUAGES):
        for p in LANGUAGES[name]:
            out.append(utf8(p))
            out.append(utf8(" " + p))
    # 2. mixtures of 1-4 phrases from random languages with random separators
    for _ in range(700):
        parts = []
        for _ in range(1 + rng.below(4)):
            parts.append(lang_phrase(rng))
            parts.append(rng.pick(WHITESPACE + [" ", " ", " ", ""]))
            if rng.chance(1, 4):
                parts.append(rng.pick(PUNCT) + rng.pick(NUMBERS))
        out.append(utf8("".join(parts)))
    # 3. code, whole and cut at random places, with indentation changes
    for c in CODE:
        out.append(utf8(c))
        out.append(utf8(c.replace("    ", "\t")))
    for _ in range(150):
        c = rng.pick(CODE)
        a = rng.below(len(c))
        b = a + 1 + rng.below(len(c) - a)
        out.append(utf8(c[a:b]))
    # 4. emoji alone, joined, and in text
    for e in EMOJI:
        out.append(utf8(e))
    for _ in range(120):
        s = "".join(rng.pick(EMOJI) + rng.pick(["", " ", "", "\n"]) for _ in range(1 + rng.below(5)))
        if rng.chance(1, 2):
            s = lang_phrase(rng) + " " + s
        out.append(utf8(s))
    # 5. whitespace and newline runs
    for n in [1, 2, 3, 4, 5, 8, 16, 30, 31, 32, 33, 63, 64, 100, 257]:
        for ch in [" ", "\n", "\t", "\r\n", " \n"]:
            out.append(utf8(ch * n))
            out.append(utf8("a" + ch * n + "b"))
    for _ in range(150):
        s = "".join(rng.pick(WHITESPACE) * (1 + rng.below(6)) + rng.pick(["", "x", "word", "世界", "1"])
                    for _ in range(1 + rng.below(6)))
        out.append(utf8(s))
    # 6. special-token text, alone, adjacent and inside words
    for t in SPECIAL_TEXT:
        out.append(utf8(t))
        out.append(utf8(" " + t + " "))
        out.append(utf8("a" + t + "b"))
    for _ in range(250):
        parts = []
        for _ in range(1 + rng.below(5)):
            r = rng.below(4)
            if r == 0:
                parts.append(rng.pick(SPECIAL_TEXT))
            elif r == 1:
                parts.append(lang_phrase(rng))
            elif r == 2:
                parts.append(rng.pick(WHITESPACE))
            else:
                parts.append("user\n" if rng.chance(1, 2) else "model\n")
        out.append(utf8("".join(parts)))
    # 7. invalid UTF-8, alone and between valid text
    for b in INVALID_UTF8:
        out.append(b)
        out.append(b"x" + b + b"y")
        out.append(b + b" " + b)
    for _ in range(120):
        s = b""
        for _ in range(1 + rng.below(5)):
            r = rng.below(3)
            if r == 0:
                s += rng.pick(INVALID_UTF8)
            elif r == 1:
                s += utf8(lang_phrase(rng))
            else:
                s += bytes(rng.below(256) for _ in range(1 + rng.below(6)))
        out.append(s)
    # 8. numbers and punctuation
    for _ in range(150):
        s = "".join(rng.pick(NUMBERS) + rng.pick(PUNCT) + rng.pick(["", " "]) for _ in range(1 + rng.below(6)))
        out.append(utf8(s))
    # 9. random code points from many blocks (incl. controls, private use, astral, noncharacters)
    for _ in range(250):
        out.append(utf8("".join(random_codepoint(rng) for _ in range(1 + rng.below(24)))))
    # 10. prose paragraphs with newlines
    for _ in range(100):
        lines = []
        for _ in range(1 + rng.below(5)):
            lines.append(" ".join(lang_phrase(rng) for _ in range(1 + rng.below(3))))
        out.append(utf8(rng.pick(["\n", "\n\n", "\r\n", "\n\n\n"]).join(lines)))
    # 11. long lines without a newline (> 100 KB each)
    words = [p for name in sorted(LANGUAGES) for p in LANGUAGES[name]]
    s = []
    n = 0
    while n < 110_000:
        w = rng.pick(words)
        s.append(w)
        n += len(utf8(w)) + 1
    out.append(utf8(" ".join(s)))
    out.append(b"a" * 120_000)
    out.append(utf8("的" * 40_000))
    out.append(b" " * 101_000)
    out.append(utf8("".join(rng.pick(EMOJI) for _ in range(20_000))))
    out.append(utf8(("x = f(y) + 1; " * 8_000)))
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_corpus.py OUT.bin")
    strings = make_strings()
    with open(sys.argv[1], "wb") as f:
        f.write(b"BTCORPUS" + struct.pack("<II", 1, len(strings)))
        for s in strings:
            f.write(struct.pack("<I", len(s)) + s)


if __name__ == "__main__":
    main()
