#!/usr/bin/env python3
"""Checks `hyllm export-gguf --outtype q8_0` with llama.cpp's own gguf-py.

Reads the Q8_0 and the BF16 export of the same weights with gguf-py's
GGUFReader (from the pinned llama.cpp source, --gguf-py DIR) and requires
every Q8_0 tensor to be byte for byte what gguf-py's quantize() makes of the
BF16 export's values, every other tensor to hold the same values, and the
file type to be MOSTLY_Q8_0. Needs numpy (Debian: python3-numpy).

  q8_0_check.py --gguf-py SRC/gguf-py --q8 model-q8_0.gguf --bf16 model-bf16.gguf
"""
import argparse
import sys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf-py", required=True)
    ap.add_argument("--q8", required=True)
    ap.add_argument("--bf16", required=True)
    a = ap.parse_args()
    sys.path.insert(0, a.gguf_py)
    import numpy as np
    from gguf import GGUFReader
    from gguf.constants import GGMLQuantizationType as Q
    from gguf.quants import dequantize, quantize

    rq, rb = GGUFReader(a.q8), GGUFReader(a.bf16)
    by_name = {t.name: t for t in rb.tensors}
    bad, quantised, max_rel = [], 0, 0.0
    for t in rq.tensors:
        b = by_name[t.name]
        ref = dequantize(b.data, b.tensor_type).astype(np.float32).reshape(-1)
        if t.tensor_type == Q.Q8_0:
            want = quantize(ref.reshape(1, -1), Q.Q8_0).reshape(-1).view(np.uint8)
            if not np.array_equal(np.frombuffer(t.data.tobytes(), dtype=np.uint8), want):
                bad.append(t.name)
            deq = dequantize(t.data, Q.Q8_0).reshape(-1)
            max_rel = max(max_rel, float(np.max(np.abs(deq - ref)) / (np.max(np.abs(ref)) + 1e-30)))
            quantised += 1
        else:
            got = dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
            tol = 0.0 if t.tensor_type == b.tensor_type else 1e-3 * float(np.max(np.abs(ref)) + 1e-30)
            if np.max(np.abs(got - ref)) > tol:
                bad.append(t.name)
    file_type = int(rq.fields["general.file_type"].parts[-1][0])
    print(f"q8_0 check: {quantised} Q8_0 tensors, {len(rq.tensors) - quantised} others, file type {file_type}, "
          f"max |dequantised - bf16| / max|bf16| {max_rel:.5f}; mismatches: {bad or 'none'}")
    return 0 if not bad and file_type == 7 and quantised > 0 else 1


if __name__ == "__main__":
    sys.exit(main())
