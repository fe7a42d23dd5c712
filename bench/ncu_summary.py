#!/usr/bin/env python3
"""Sums `ncu --csv --page raw --metrics gpu__time_duration.sum` output per kernel: where the GPU
time of a profiled run goes (bench/gpu-check.sh). Usage: ncu_summary.py LOG [TOP]"""
import csv
import re
import sys


def kernel_key(name):
    # "void boltrt::kernels::(anonymous namespace)::gemv_quant_kernel<boltrt::BlockQ4_K, 1, true>(...)"
    # -> "gemv_quant_kernel<BlockQ4_K, 1, true>"
    name = name.replace("(anonymous namespace)::", "")
    name = re.sub(r"\(.*$", "", name)
    name = re.sub(r"^void ", "", name)
    name = re.sub(r"[A-Za-z_]+::", "", name)
    return name[:90]


def main():
    path = sys.argv[1]
    top = int(sys.argv[2]) if len(sys.argv) > 2 else 15
    with open(path, newline="", errors="replace") as f:
        lines = [line for line in f if line.startswith('"')]  # ncu's CSV rows are quoted
    rows = list(csv.reader(lines))
    if len(rows) < 3:
        print("no ncu records")
        return
    header, units = rows[0], rows[1]
    name_col = header.index("Kernel Name")
    time_col = header.index("gpu__time_duration.sum")
    scale = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "msecond": 1e3, "ms": 1e3, "nsecond": 1e-3}.get(
        units[time_col].strip(), 1e-3)
    totals, counts = {}, {}
    for row in rows[2:]:
        try:
            t = float(row[time_col].replace(",", "")) * scale
        except (ValueError, IndexError):
            continue
        k = kernel_key(row[name_col])
        totals[k] = totals.get(k, 0.0) + t
        counts[k] = counts.get(k, 0) + 1
    all_us = sum(totals.values())
    print(f"{sum(counts.values())} kernel launches, {all_us / 1e3:.2f} ms of GPU time")
    print("| kernel | launches | total us | mean us | share |")
    print("|---|---|---|---|---|")
    for k, t in sorted(totals.items(), key=lambda kv: -kv[1])[:top]:
        print(f"| {k} | {counts[k]} | {t:.0f} | {t / counts[k]:.1f} | {100 * t / all_us:.1f} % |")


if __name__ == "__main__":
    main()
