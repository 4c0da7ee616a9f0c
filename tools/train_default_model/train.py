#!/usr/bin/env python3
"""Trains hyllm-tiny (a small Qwen3.5-architecture model) and writes it in the
real Qwen3.5 checkpoint format, with its held-out loss, samples and goldens.

Runs where torch 2.11, transformers 5.17 and tokenizers 0.23 are installed (the
GPU machine). Input: the directory written by prepare_corpus.py. Stages:
  1. byte-level BPE tokenizer with Qwen3.5's normaliser, pre-tokenizer and
     added tokens (tokenizer_files.py);
  2. a smoke run of the whole pipeline on a tiny config (catches API errors in
     seconds, before the real run spends its budget);
  3. training of Qwen3_5ForCausalLM for a wall-clock budget (packed 512-token
     windows, bf16 autocast, AdamW, cosine schedule, residual dropout), keeping
     the weights with the best held-out loss;
  4. export (export_checkpoint.py): nested Qwen3_5ForConditionalGeneration
     checkpoint, reload checks, held-out loss of the saved weights, samples,
     goldens.
"""

import argparse
import csv
import json
import math
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from chat_format import render
import tokenizer_files

T0 = time.time()


def log(*args):
    print(f"[{time.time() - T0:7.1f}s]", *args, flush=True)


MAIN_SHAPE = dict(hidden_size=320, intermediate_size=768, num_hidden_layers=8,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=64,
                  linear_num_key_heads=2, linear_num_value_heads=4,
                  linear_key_head_dim=64, linear_value_head_dim=64,
                  mrope_section=[3, 3, 2])
SMOKE_SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                   num_attention_heads=2, num_key_value_heads=1, head_dim=32,
                   linear_num_key_heads=2, linear_num_value_heads=4,
                   linear_key_head_dim=16, linear_value_head_dim=16,
                   mrope_section=[2, 1, 1])


def text_config(shape, vocab_size, eos_id, max_positions):
    from transformers import Qwen3_5TextConfig
    layers = shape["num_hidden_layers"]
    assert layers % 4 == 0, "Qwen3.5 interleaves 3 linear-attention layers per full one"
    rotary = int(shape["head_dim"] * 0.25)
    assert sum(shape["mrope_section"]) * 2 == rotary
    fields = {k: v for k, v in shape.items() if k != "mrope_section"}
    return Qwen3_5TextConfig(
        vocab_size=vocab_size, **fields,
        layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention"
                     for i in range(layers)],
        linear_conv_kernel_dim=4, hidden_act="silu", rms_norm_eps=1e-6,
        max_position_embeddings=max_positions, attention_bias=False,
        attention_dropout=0.0, tie_word_embeddings=True, eos_token_id=eos_id,
        rope_parameters={"rope_type": "default", "rope_theta": 10000000.0,
                         "partial_rotary_factor": 0.25, "mrope_interleaved": True,
                         "mrope_section": shape["mrope_section"]},
    )


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def encode_items(tok, texts, eot):
    encodings = tok.encode_batch(texts, add_special_tokens=False)
    return [np.array(e.ids + [eot], dtype=np.int32) for e in encodings]


class Corpus:
    """Token arrays of documents and chats; windows packed anew each epoch."""

    def __init__(self, tok, data_dir, eot):
        data_dir = Path(data_dir)
        self.items = {}
        for split in ("train", "valid"):
            docs = [d["text"] for d in read_jsonl(data_dir / f"{split}_docs.jsonl")]
            chats = [render(c["messages"]) for c in read_jsonl(data_dir / f"{split}_chat.jsonl")]
            self.items[f"{split}_docs"] = encode_items(tok, docs, eot)
            self.items[f"{split}_chat"] = encode_items(tok, chats, eot)
        self.train = self.items["train_docs"] + self.items["train_chat"]
        self.counts = {k: int(sum(len(a) for a in v)) for k, v in self.items.items()}

    @staticmethod
    def windows(items, seq_len, rng=None):
        order = rng.permutation(len(items)) if rng is not None else range(len(items))
        stream = np.concatenate([items[i] for i in order])
        n = (len(stream) - 1) // seq_len
        x = stream[:n * seq_len].reshape(n, seq_len)
        y = stream[1:n * seq_len + 1].reshape(n, seq_len)
        if rng is not None:
            perm = rng.permutation(n)
            x, y = x[perm], y[perm]
        return torch.from_numpy(x.astype(np.int64)), torch.from_numpy(y.astype(np.int64))


def add_residual_dropout(model, p):
    """Dropout on every mixer and MLP output, for training only (nothing saved)."""
    def drop(module, _inputs, output):
        if isinstance(output, tuple):
            return (F.dropout(output[0], p, module.training),) + tuple(output[1:])
        return F.dropout(output, p, module.training)
    for layer in model.model.layers:
        mixer = getattr(layer, "linear_attn", None) or getattr(layer, "self_attn")
        mixer.register_forward_hook(drop)
        layer.mlp.register_forward_hook(drop)


@torch.no_grad()
def mean_loss(model, x, y, batch, device, autocast=True):
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(x), batch):
        xb, yb = x[i:i + batch].to(device), y[i:i + batch].to(device)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            logits = model(input_ids=xb, use_cache=False).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), yb.reshape(-1),
                               reduction="sum")
        total += loss.item()
        count += yb.numel()
    model.train()
    return total / max(count, 1)


def train(args, corpus, cfg, budget_s, max_epochs, csv_path, device):
    from transformers import Qwen3_5ForCausalLM
    torch.manual_seed(args.seed)
    model = Qwen3_5ForCausalLM(cfg).to(device)
    add_residual_dropout(model, args.dropout)
    n_params = sum(p.numel() for p in model.parameters())
    log(f"model: {n_params / 1e6:.2f}M parameters (tied embeddings)")
    decay = [p for n, p in model.named_parameters() if p.ndim == 2]
    no_decay = [p for n, p in model.named_parameters() if p.ndim != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8, fused=True)
    rng = np.random.default_rng(args.seed)
    vx, vy = corpus.windows(corpus.items["valid_docs"], args.seq_len)
    cx, cy = corpus.windows(corpus.items["valid_chat"], args.seq_len)
    steps_per_epoch = (corpus.counts["train_docs"] + corpus.counts["train_chat"]) \
        // (args.seq_len * args.batch)
    planned = max(1, int(max_epochs * steps_per_epoch))
    warmup = min(args.warmup, max(planned // 10, 1))
    log(f"{steps_per_epoch} steps/epoch of {args.batch}x{args.seq_len} tokens; "
        f"at most {planned} steps; warmup {warmup}")

    def lr_at(step):
        if step < warmup:
            return args.lr * (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, planned - warmup))
        return args.lr * (args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 *
                          (1 + math.cos(math.pi * progress)))

    rows, best = [], (float("inf"), None, -1)
    start = time.time()
    step, epoch, timed_from = 0, 0, None
    loss_acc, loss_n = torch.zeros((), device=device), 0
    eval_every = None
    done = False
    model.train()
    while not done:
        x, y = corpus.windows(corpus.train, args.seq_len, rng)
        for b in range(len(x) // args.batch):
            if step == 10:
                torch.cuda.synchronize()
                timed_from = time.time()
            if step == 40 and timed_from is not None:
                torch.cuda.synchronize()
                rate = 30 / (time.time() - timed_from)
                left = budget_s - (time.time() - start)
                planned = min(planned, step + int(left * rate * 0.96))
                eval_every = max(25, planned // 12)
                log(f"{rate:.2f} steps/s = {rate * args.batch * args.seq_len / 1e3:.0f}k "
                    f"tokens/s; planning {planned} steps "
                    f"({planned / steps_per_epoch:.1f} epochs)")
            for group in opt.param_groups:
                group["lr"] = lr_at(step)
            xb = x[b * args.batch:(b + 1) * args.batch].to(device, non_blocking=True)
            yb = y[b * args.batch:(b + 1) * args.batch].to(device, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(input_ids=xb, use_cache=False).logits
            loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                   yb.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            loss_acc += loss.detach()
            loss_n += 1
            step += 1
            out_of_time = time.time() - start > budget_s
            last = step >= planned or out_of_time
            if (eval_every and step % eval_every == 0) or last or step == 1:
                train_loss = (loss_acc / loss_n).item()
                loss_acc.zero_()
                loss_n = 0
                vloss = mean_loss(model, vx, vy, args.batch, device)
                closs = mean_loss(model, cx, cy, args.batch, device)
                row = dict(step=step, epoch=round(step / steps_per_epoch, 3),
                           tokens=step * args.batch * args.seq_len, lr=lr_at(step - 1),
                           train_loss=round(train_loss, 4), valid_doc_loss=round(vloss, 4),
                           valid_chat_loss=round(closs, 4),
                           seconds=round(time.time() - start, 1))
                rows.append(row)
                log(" ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}"
                             for k, v in row.items()))
                if vloss < best[0]:
                    best = (vloss, {k: v.detach().to("cpu", copy=True)
                                    for k, v in model.state_dict().items()}, step)
            if last:
                done = True
                break
        epoch += 1
    with open(csv_path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    log(f"trained {step} steps ({step / steps_per_epoch:.2f} epochs) in "
        f"{time.time() - start:.0f}s; best held-out doc loss {best[0]:.4f} at step {best[2]}")
    model.load_state_dict(best[1])
    return model, dict(steps=step, epochs=round(step / steps_per_epoch, 2),
                       best_step=best[2], best_valid_doc_loss=round(best[0], 4),
                       train_seconds=round(time.time() - start, 1),
                       parameters=n_params, rows=rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--out", required=True, help="where the report files go")
    ap.add_argument("--train-seconds", type=float, default=150)
    ap.add_argument("--max-epochs", type=float, default=16)
    ap.add_argument("--vocab", type=int, default=8192)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--min-lr-ratio", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--dropout", type=float, default=0.1)
    ap.add_argument("--max-positions", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--smoke-only", action="store_true")
    ap.add_argument("--export-from", help="skip training: export a raw checkpoint "
                    "saved by a run whose export failed")
    args = ap.parse_args()
    import transformers
    import export_checkpoint
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"cuda {torch.cuda.get_device_name(0)}")
    work, out = Path(args.work), Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    out.mkdir(parents=True, exist_ok=True)
    device = "cuda"

    docs = [d["text"] for d in read_jsonl(Path(args.data) / "train_docs.jsonl")]
    chats = read_jsonl(Path(args.data) / "train_chat.jsonl")
    chat_text = [m["content"] for c in chats for m in c["messages"]]
    if args.export_from:
        from tokenizers import Tokenizer
        tok = Tokenizer.from_file(str(Path(args.export_from) / "tokenizer.json"))
    else:
        tok = tokenizer_files.train_tokenizer(docs + chat_text, args.vocab)
    ids = tokenizer_files.special_ids(tok)
    log(f"tokenizer: {tok.get_vocab_size()} tokens; specials {ids['<|endoftext|>']}.."
        f"{ids['</think>']}")
    corpus = Corpus(tok, args.data, ids["<|endoftext|>"])
    log("tokens: " + ", ".join(f"{k} {v}" for k, v in corpus.counts.items()))

    report = work / "report"
    report.mkdir(parents=True, exist_ok=True)
    if args.export_from:
        raw = Path(args.export_from)
        from transformers import Qwen3_5ForCausalLM
        model = Qwen3_5ForCausalLM.from_pretrained(raw, dtype=torch.float32)
        info = json.loads((raw / "info.json").read_text())
        shutil.copy(raw / "loss.csv", report / "loss.csv")
        finish(model, tok, model.config, corpus, args, info, work, report, out)
        return

    # Smoke: the whole pipeline on a tiny model, so that an API mismatch costs
    # seconds, not the training budget.
    smoke_cfg = text_config(SMOKE_SHAPE, tok.get_vocab_size(), ids["<|endoftext|>"],
                            args.max_positions)
    model, info = train(args, corpus, smoke_cfg, budget_s=6, max_epochs=0.05,
                        csv_path=work / "smoke_loss.csv", device=device)
    export_checkpoint.export(model, tok, smoke_cfg, work / "smoke-model", corpus, args,
                             info, report_dir=work / "smoke-report", smoke=True)
    log("smoke pipeline OK")
    if args.smoke_only:
        return

    cfg = text_config(MAIN_SHAPE, tok.get_vocab_size(), ids["<|endoftext|>"],
                      args.max_positions)
    model, info = train(args, corpus, cfg, budget_s=args.train_seconds,
                        max_epochs=args.max_epochs, csv_path=report / "loss.csv",
                        device=device)
    info["token_counts"] = corpus.counts
    finish(model, tok, cfg, corpus, args, info, work, report, out)


def finish(model, tok, cfg, corpus, args, info, work, report, out):
    """Exports and packs; if the export fails, ships the raw weights instead so
    that a short --export-from run can redo it without retraining."""
    import export_checkpoint
    raw = work / "raw"
    try:
        export_checkpoint.export(model, tok, cfg, work / "hyllm-tiny", corpus, args, info,
                                 report_dir=report, smoke=False)
    except Exception:
        log("export failed; shipping the raw trained weights")
        model.save_pretrained(raw)
        tok.save(str(raw / "tokenizer.json"))
        (raw / "info.json").write_text(json.dumps(info, indent=1) + "\n")
        shutil.copy(report / "loss.csv", raw / "loss.csv")
        export_checkpoint.pack(raw, report, out, name="raw")
        raise
    export_checkpoint.pack(work / "hyllm-tiny", report, out)
    log("done")


if __name__ == "__main__":
    sys.exit(main())
