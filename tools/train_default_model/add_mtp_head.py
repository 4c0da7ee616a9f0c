#!/usr/bin/env python3
"""Adds a trained MTP head (a safetensors file of `mtp.*` tensors, as
train_mtp.py writes it) to a model directory: the head's tensors join
model.safetensors (any earlier `mtp.*` tensors are replaced) and config.json
gets `mtp_num_hidden_layers: 1` with the shared embeddings.

Pure standard library, so the head trained on the GPU machine (which can send
back only small files) is merged here without torch:

  python3 add_mtp_head.py --model models/hyllm-tiny --head mtp_head.safetensors [--out DIR]

The safetensors layout: an 8-byte little-endian header length, a JSON header
of {name: {dtype, shape, data_offsets}} (plus `__metadata__`), then the data.
"""

import argparse
import json
import shutil
import struct
from pathlib import Path


def read_safetensors(path):
    """{name: (dtype, shape, bytes)} and the metadata of one file."""
    blob = Path(path).read_bytes()
    (size,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + size])
    data = memoryview(blob)[8 + size:]
    meta = header.pop("__metadata__", None)
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if not 0 <= begin <= end <= len(data):
            raise ValueError(f"{path}: tensor {name} lies outside the file")
        tensors[name] = (info["dtype"], info["shape"], bytes(data[begin:end]))
    return tensors, meta


def write_safetensors(path, tensors, meta):
    header, offset = {}, 0
    if meta is not None:
        header["__metadata__"] = meta
    names = sorted(tensors)
    for name in names:
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name in names:
            f.write(tensors[name][2])


def add_head(model_dir, head_file, out_dir=None):
    model_dir = Path(model_dir)
    target = Path(out_dir) if out_dir else model_dir
    if target != model_dir:
        if target.exists():
            shutil.rmtree(target)
        shutil.copytree(model_dir, target)
    tensors, meta = read_safetensors(target / "model.safetensors")
    head, _ = read_safetensors(head_file)
    if not head or any(not name.startswith("mtp.") for name in head):
        raise ValueError(f"{head_file}: expected only mtp.* tensors")
    tensors = {k: v for k, v in tensors.items() if not k.startswith("mtp.")}
    tensors.update(head)
    write_safetensors(target / "model.safetensors", tensors, meta)
    cfg_path = target / "config.json"
    cfg = json.loads(cfg_path.read_text())
    text = cfg.get("text_config", cfg)
    text["mtp_num_hidden_layers"] = 1
    text["mtp_use_dedicated_embeddings"] = False
    cfg_path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return target


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--head", required=True)
    ap.add_argument("--out", help="a copy of the model with the head (default: the model, in place)")
    args = ap.parse_args()
    print(f"wrote {add_head(args.model, args.head, args.out)}")


if __name__ == "__main__":
    main()
