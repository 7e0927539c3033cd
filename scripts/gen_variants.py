#!/usr/bin/env python3
"""Writes N distinct, correct candidates for stencil2d_f32 (block shapes x an unroll factor x a
tag), to measure harness throughput: `ksol eval --candidate` over all of them through one worker."""
import os, sys

out = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 100
src = open(os.path.join(os.path.dirname(__file__), "..", "tasks/scientific/stencil2d_f32/naive.cu")).read()
shapes = [(32, 8), (32, 4), (32, 16), (64, 4), (64, 2), (128, 2), (128, 1), (256, 1), (32, 2), (16, 16)]
os.makedirs(out, exist_ok=True)
for i in range(n):
    bx, by = shapes[i % len(shapes)]
    v = src.replace("constexpr int kBX = 32, kBY = 8;", f"constexpr int kBX = {bx}, kBY = {by};  // variant {i}")
    with open(os.path.join(out, f"v{i:03d}_{bx}x{by}.cu"), "w") as f:
        f.write(v)
