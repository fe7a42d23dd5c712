"""Acceptance and speed of the tiny DFlash draft with boltrt (greedy), against plain decoding.

measure_dflash.py BOLTRT [--model models/tiny/tiny-q8_0.gguf] [--draft models/tiny/tiny-dflash.gguf]
                  [--threads 2] [--repeat 3]
For each prompt (tools/demo.sh's two, then held-out Austen openings and chat questions the draft
never saw) runs plain greedy decoding and speculative decoding (adaptive draft length, and a fixed
7), checks that the tokens are identical, and prints tokens per verify round (bonus included,
= (accepted + rounds) / rounds) and decode tokens/s (median of --repeat runs, the three modes
interleaved within each repeat).
"""
import argparse
import json
import statistics
import subprocess
import sys

PROMPTS = [
    ["-p", "It is a truth universally acknowledged, that", "-n", "64"],
    ["--chat", "--reasoning", "on", "-p", "Reverse the word: garden", "-n", "120"],
    ["--chat", "--reasoning", "off", "-p", "What is 347 + 586?", "-n", "48"],
    ["--chat", "--reasoning", "on", "-p", "How many 'e's are in 'excellent'?", "-n", "120"],
    ["-p", "Emma Woodhouse, handsome, clever, and rich", "-n", "64"],
    ["-p", "Captain Wentworth had no fortune.", "-n", "64"],
    ["-p", "The evening passed quietly, and Elinor", "-n", "64"],
    ["--chat", "--reasoning", "off", "-p", "Reverse the word: letter", "-n", "48"],
]


def run(args, extra):
    cmd = [args.boltrt, "generate", "-m", args.model, "-t", str(args.threads), "--temp", "0", "--json"] + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("boltrt")
    ap.add_argument("--model", default="models/tiny/tiny-q8_0.gguf")
    ap.add_argument("--draft", default="models/tiny/tiny-dflash.gguf")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    modes = {"plain": [], "adaptive": ["--draft", args.draft],
             "fixed7": ["--draft", args.draft, "--draft-max", "7", "--draft-min", "7"]}
    tot = {m: [0, 0, []] for m in modes}  # accepted, rounds, tok/s list
    print("| prompt | tokens | tau adaptive | tau fixed 7 | tok/s plain | adaptive | fixed 7 |")
    print("|---|---|---|---|---|---|---|")
    for p in PROMPTS:
        # modes interleaved within each repeat, so load changes on a shared machine hit all alike
        res = {m: [] for m in modes}
        for _ in range(args.repeat):
            for m in modes:
                res[m].append(run(args, p + modes[m]))
        plain = res["plain"][0]["tokens"]
        row = [" ".join(p), str(len(plain))]
        for m in ("adaptive", "fixed7"):
            for r in res[m]:
                if r["tokens"] != plain:
                    sys.exit(f"MISMATCH {m}: {p}")
            d = res[m][0]["draft"]
            tot[m][0] += d["accepted"]
            tot[m][1] += d["rounds"]
            row.append(f"{(d['accepted'] + d['rounds']) / max(d['rounds'], 1):.2f}")
        for m in modes:
            tps = statistics.median(r["tokens_per_second"] for r in res[m])
            tot[m][2].append(tps)
            row.append(f"{tps:.0f}")
        print("| " + " | ".join(row) + " |", flush=True)
    t = {m: (tot[m][0] + tot[m][1]) / max(tot[m][1], 1) for m in ("adaptive", "fixed7")}
    g = {m: statistics.geometric_mean(tot[m][2]) for m in modes}
    print(f"| all (outputs identical) | | {t['adaptive']:.2f} | {t['fixed7']:.2f} | {g['plain']:.0f} | "
          f"{g['adaptive']:.0f} ({g['adaptive'] / g['plain']:.2f}x) | {g['fixed7']:.0f} ({g['fixed7'] / g['plain']:.2f}x) |")


if __name__ == "__main__":
    main()
