#!/usr/bin/env python3
"""Golden conversions of f32 values to bf16, fp16, float8_e4m3fn and float8_e5m2
as PyTorch computes them (`tensor.to(dtype)`) on the CPU and on CUDA, plus the
decoding of every fp8 code. tests/unit/tensor/dtype_golden_test.cpp compares
hyllm's conversions with them.

Run on the GPU machine (needs torch and numpy):
    python3 tools/dtype_goldens.py OUT.bin

Output, little-endian:
    b"HYDTYPE1", u32 meta_len, meta JSON (torch version, device, sections),
    u32 n, f32 inputs[n],
    for device in (cpu, cuda): bf16 u16[n], fp16 u16[n], e4m3 u8[n], e5m2 u8[n],
    for device in (cpu, cuda): e4m3 decode u32[256], e5m2 decode u32[256] (f32 bits).
The input set is crafted: every rounding boundary of the fp8 formats (value,
midpoint and the f32 neighbours of the midpoint), the same for a sample of
fp16 / bf16 values, the overflow regions, special values and random bits.
"""

import json
import struct
import sys

import numpy as np
import torch

FORMATS = [("bf16", torch.bfloat16, np.uint16), ("fp16", torch.float16, np.uint16),
           ("e4m3", torch.float8_e4m3fn, np.uint8), ("e5m2", torch.float8_e5m2, np.uint8)]


def finite_values(dtype, bits):
    """The non-negative finite values of a format, sorted, as float64."""
    if bits == 8:
        codes = torch.from_numpy(np.arange(256, dtype=np.uint8))
    else:
        codes = torch.from_numpy(np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.int16))
    vals = codes.view(dtype).float().double()
    pos = vals[(vals >= 0) & torch.isfinite(vals)]
    return torch.unique(pos).numpy()


def boundary_probes(values, stride=1):
    """Each value, each midpoint, and the f32 neighbours of each midpoint (both signs)."""
    out = []
    v = values[::stride]
    nxt = values[np.minimum(np.arange(len(values))[::stride] + 1, len(values) - 1)]
    mids = ((v + nxt) / 2).astype(np.float32)
    for arr in (v.astype(np.float32), mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf))):
        out.append(arr)
        out.append(-arr)
    return np.concatenate(out)


def crafted_inputs():
    parts = []
    parts.append(boundary_probes(finite_values(torch.float8_e4m3fn, 8)))
    parts.append(boundary_probes(finite_values(torch.float8_e5m2, 8)))
    f16 = finite_values(torch.float16, 16)
    bf16 = finite_values(torch.bfloat16, 16)
    parts.append(boundary_probes(f16, stride=31))
    parts.append(boundary_probes(f16[:80]))    # subnormals
    parts.append(boundary_probes(f16[-40:]))   # the top, into overflow
    parts.append(boundary_probes(bf16, stride=37))
    parts.append(boundary_probes(bf16[:40]))
    parts.append(boundary_probes(bf16[-40:]))
    sweeps = [np.arange(440, 520, 0.5), np.arange(57000, 70000, 64.0), np.arange(65400, 65700, 1.0)]
    for s in sweeps:
        parts.append(s.astype(np.float32))
        parts.append(-s.astype(np.float32))
    special_bits = [0x00000000, 0x80000000, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00000, 0x7fa00000,
                    0x7f800001, 0xffffffff, 0x7f7fffff, 0xff7fffff, 0x00800000, 0x00000001, 0x80000001, 0x007fffff]
    parts.append(np.array(special_bits, dtype=np.uint32).view(np.float32))
    rng = np.random.default_rng(20240601)
    parts.append(rng.integers(0, 1 << 32, size=8192, dtype=np.uint64).astype(np.uint32).view(np.float32))
    for scale in (1e-6, 1e-3, 0.02, 1.0, 100.0, 3e4):
        parts.append((rng.standard_normal(1024) * scale).astype(np.float32))
    return np.concatenate(parts).astype(np.float32)


def main():
    out_path = sys.argv[1]
    x = crafted_inputs()
    n = len(x)
    xt = torch.from_numpy(x.copy())
    devices = ["cpu", "cuda"]
    sections = []
    blobs = []
    results = {}
    for dev in devices:
        src = xt.to(dev)
        for name, dtype, np_view in FORMATS:
            y = src.to(dtype)
            bits = y.view(torch.int16 if np_view == np.uint16 else torch.uint8).cpu().numpy().view(np_view)
            results[(dev, name)] = bits
            sections.append(f"{dev}.{name}")
            blobs.append(bits.astype(np_view).tobytes())
    for dev in devices:
        for name, dtype, _ in FORMATS[2:]:
            codes = torch.arange(256, dtype=torch.int32).to(torch.uint8).to(dev).view(dtype)
            f = codes.float().cpu().numpy().view(np.uint32)
            sections.append(f"{dev}.{name}.decode")
            blobs.append(f.astype(np.uint32).tobytes())

    meta = {"torch": torch.__version__, "cuda_device": torch.cuda.get_device_name(0), "n": n, "sections": sections}
    meta_bytes = json.dumps(meta).encode()
    with open(out_path, "wb") as fh:
        fh.write(b"HYDTYPE1")
        fh.write(struct.pack("<I", len(meta_bytes)))
        fh.write(meta_bytes)
        fh.write(struct.pack("<I", n))
        fh.write(x.tobytes())
        for b in blobs:
            fh.write(b)

    # Summary: where CUDA and the CPU disagree (NaN payloads aside).
    for name, dtype, np_view in FORMATS:
        a, b = results[("cpu", name)], results[("cuda", name)]
        da = torch.from_numpy(a.view(np.int16 if np_view == np.uint16 else np.uint8).copy()).view(dtype).float()
        db = torch.from_numpy(b.view(np.int16 if np_view == np.uint16 else np.uint8).copy()).view(dtype).float()
        both_nan = torch.isnan(da) & torch.isnan(db)
        differ = (a != b) & ~both_nan.numpy()
        nan_bits = ((a != b) & both_nan.numpy()).sum()
        print(f"{name}: {n} inputs, cpu vs cuda: {differ.sum()} value differences, {nan_bits} NaN-bit differences")
    print(f"wrote {out_path}: {n} inputs, torch {torch.__version__}, {meta['cuda_device']}")


if __name__ == "__main__":
    main()
