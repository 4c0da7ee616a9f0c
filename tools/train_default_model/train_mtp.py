#!/usr/bin/env python3
"""Trains an MTP (multi-token-prediction) head for hyllm-tiny on its corpus,
with the language model frozen, and writes the model with the head added
(`mtp.*` tensors, `mtp_num_hidden_layers: 1`), so that `hyllm serve
--speculative-config '{"method": "mtp", "num_speculative_tokens": 2}'` drafts
with it.

Runs where train.py runs (torch 2.11, transformers 5.17, tokenizers 0.23, one
GPU). Inputs: the model directory (models/hyllm-tiny) and the corpus directory
written by prepare_corpus.py. Outputs in --out: hyllm-tiny/ (the model with
its head), mtp_head.safetensors (the head alone) and mtp_report.json (losses and teacher-forced acceptance).

  python3 train_mtp.py --model models/hyllm-tiny --data DATA --out OUT [--train-seconds 120]
  python3 train_mtp.py ... --smoke     # a few steps, to check the pipeline in seconds

The head (QWEN35.md 3.6; vLLM's qwen3_5_mtp.py): for the token at position p,
  x = fc([RMSNorm1p_emb(embed(t[p+1])) | RMSNorm1p_hid(h[p])])   (embedding first)
  x = one gated full-attention decoder layer with a SwiGLU MLP (RoPE at p)
  out = RMSNorm1p(x);  logits = out @ embed^T (tied lm_head)  ->  t[p+2]
where h[p] is the frozen model's final hidden state (after its final norm).
The module below is written from that spec, not taken from transformers
(which has no MTP module), in the layout hyllm loads.
"""

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from train import Corpus, log  # noqa: E402  (the same windows as the model's training)
import tokenizer_files  # noqa: E402


class RMSNorm1p(nn.Module):
    """Qwen3.5's zero-centred RMSNorm: x * rsqrt(mean(x^2) + eps) * (1 + w), in fp32."""

    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(n))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).to(x.dtype)


def partial_rope(x, positions, rotary_dim, theta):
    """NeoX RoPE on the first rotary_dim dims of each head; x [B, T, heads, D]."""
    half = rotary_dim // 2
    inv = 1.0 / theta ** (torch.arange(half, device=x.device, dtype=torch.float32) / half)
    angle = positions.float()[:, :, None] * inv  # [B, T, half]
    cos, sin = angle.cos()[:, :, None, :], angle.sin()[:, :, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:rotary_dim].float()
    rotated = torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).to(x.dtype)
    return torch.cat([rotated, x[..., rotary_dim:]], -1)


class MtpHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, D, I = cfg.hidden_size, cfg.head_dim, cfg.intermediate_size
        self.hq, self.hkv, self.d = cfg.num_attention_heads, cfg.num_key_value_heads, D
        eps = cfg.rms_norm_eps
        rope = getattr(cfg, "rope_parameters", None) or {}
        self.rotary_dim = int(D * rope.get("partial_rotary_factor", getattr(cfg, "partial_rotary_factor", 0.25)))
        self.theta = float(rope.get("rope_theta", getattr(cfg, "rope_theta", 1e7)))
        self.pre_fc_norm_embedding = RMSNorm1p(H, eps)
        self.pre_fc_norm_hidden = RMSNorm1p(H, eps)
        self.fc = nn.Linear(2 * H, H, bias=False)
        self.input_layernorm = RMSNorm1p(H, eps)
        self.q_proj = nn.Linear(H, self.hq * D * 2, bias=False)  # per head [q | gate]
        self.k_proj = nn.Linear(H, self.hkv * D, bias=False)
        self.v_proj = nn.Linear(H, self.hkv * D, bias=False)
        self.o_proj = nn.Linear(self.hq * D, H, bias=False)
        self.q_norm = RMSNorm1p(D, eps)
        self.k_norm = RMSNorm1p(D, eps)
        self.post_attention_layernorm = RMSNorm1p(H, eps)
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)
        self.norm = RMSNorm1p(H, eps)
        for m in self.modules():
            if isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, std=0.02)

    def forward(self, emb, hidden, positions):
        x = self.fc(torch.cat([self.pre_fc_norm_embedding(emb), self.pre_fc_norm_hidden(hidden)], -1))
        B, T, _ = x.shape
        h = self.input_layernorm(x)
        qg = self.q_proj(h).view(B, T, self.hq, 2 * self.d)
        q, gate = qg[..., :self.d], qg[..., self.d:]
        q = partial_rope(self.q_norm(q), positions, self.rotary_dim, self.theta)
        k = partial_rope(self.k_norm(self.k_proj(h).view(B, T, self.hkv, self.d)), positions, self.rotary_dim,
                         self.theta)
        v = self.v_proj(h).view(B, T, self.hkv, self.d)
        o = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True, enable_gqa=True)
        o = o.transpose(1, 2).reshape(B, T, self.hq * self.d) * torch.sigmoid(gate.reshape(B, T, -1))
        x = x + self.o_proj(o)
        h = self.post_attention_layernorm(x)
        x = x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))
        return self.norm(x)

    def checkpoint_tensors(self):
        """The head's weights under the checkpoint names hyllm and vLLM load."""
        p = "mtp.layers.0."
        names = {
            "fc": "mtp.fc", "pre_fc_norm_embedding": "mtp.pre_fc_norm_embedding",
            "pre_fc_norm_hidden": "mtp.pre_fc_norm_hidden", "norm": "mtp.norm",
            "input_layernorm": p + "input_layernorm", "post_attention_layernorm": p + "post_attention_layernorm",
            "q_proj": p + "self_attn.q_proj", "k_proj": p + "self_attn.k_proj", "v_proj": p + "self_attn.v_proj",
            "o_proj": p + "self_attn.o_proj", "q_norm": p + "self_attn.q_norm", "k_norm": p + "self_attn.k_norm",
            "gate_proj": p + "mlp.gate_proj", "up_proj": p + "mlp.up_proj", "down_proj": p + "mlp.down_proj",
        }
        out = {}
        for key, value in self.state_dict().items():
            module, leaf = key.rsplit(".", 1)
            out[f"{names[module]}.{leaf}"] = value.detach().to("cpu", torch.bfloat16).contiguous()
        return out


def base_outputs(lm, embed, xb):
    """The frozen model's final hidden states and greedy next tokens of a batch."""
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16):
        hidden = lm(input_ids=xb, use_cache=False).last_hidden_state
        greedy = (hidden @ embed.t()).argmax(-1)
    return hidden, greedy


def mtp_step(head, lm, embed, xb, yb):
    """MTP loss over a batch, and how often its argmax is the model's own greedy token.

    Position p (0 <= p < L - 1) pairs h[p] with t[p+1] = yb[:, p] and predicts
    t[p+2] = yb[:, p+1]. Acceptance: the head's argmax equals the frozen model's
    greedy token at p + 1, i.e. what a greedy verify step would accept at the
    first draft position given the true context."""
    hidden, greedy = base_outputs(lm, embed, xb)
    L = xb.shape[1]
    positions = torch.arange(L - 1, device=xb.device).expand(xb.shape[0], -1)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        out = head(F.embedding(yb[:, :L - 1], embed), hidden[:, :L - 1], positions)
        logits = out @ embed.t()
    loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), yb[:, 1:].reshape(-1))
    accept = (logits.argmax(-1) == greedy[:, 1:]).float().mean()
    return loss, accept


@torch.no_grad()
def evaluate(head, lm, embed, x, y, batch, device):
    head.eval()
    losses, accepts = [], []
    for i in range(0, len(x), batch):
        loss, accept = mtp_step(head, lm, embed, x[i:i + batch].to(device), y[i:i + batch].to(device))
        losses.append(loss.item())
        accepts.append(accept.item())
    head.train()
    return round(float(np.mean(losses)), 4), round(float(np.mean(accepts)), 4)


def export(head, model_dir, out):
    """The head alone (out/mtp_head.safetensors, small enough to send back from the GPU machine) and the
    model directory with the head added (add_mtp_head.py, which also merges the head elsewhere)."""
    from safetensors.torch import save_file
    from add_mtp_head import add_head
    out.mkdir(parents=True, exist_ok=True)
    head_file = out / "mtp_head.safetensors"
    save_file(head.checkpoint_tensors(), str(head_file), metadata={"format": "pt"})
    return add_head(model_dir, head_file, out / model_dir.name)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="models/hyllm-tiny")
    ap.add_argument("--data", required=True, help="the output directory of prepare_corpus.py")
    ap.add_argument("--out", required=True)
    ap.add_argument("--train-seconds", type=float, default=120)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--smoke", action="store_true", help="20 steps; checks the pipeline")
    args = ap.parse_args()
    from tokenizers import Tokenizer
    from transformers import Qwen3_5ForConditionalGeneration

    device = "cuda"
    model_dir, out = Path(args.model), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    ids = tokenizer_files.special_ids(tok)
    corpus = Corpus(tok, args.data, ids["<|endoftext|>"])
    model = Qwen3_5ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
    for p in model.parameters():
        p.requires_grad_(False)
    lm = model.model.language_model
    embed = lm.embed_tokens.weight  # the tied lm_head
    cfg = model.config.text_config
    head = MtpHead(cfg).to(device)
    log(f"MTP head: {sum(p.numel() for p in head.parameters()) / 1e6:.2f}M parameters")

    vx, vy = corpus.windows(corpus.items["valid_docs"], args.seq_len)
    cx, cy = corpus.windows(corpus.items["valid_chat"], args.seq_len)
    steps_per_epoch = len(corpus.windows(corpus.train, args.seq_len)[0]) // args.batch
    planned = 20 if args.smoke else None
    opt = torch.optim.AdamW(head.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.0)
    rng = np.random.default_rng(args.seed)
    before = {"valid_docs": evaluate(head, lm, embed, vx, vy, args.batch, device)}
    log(f"untrained: loss/acceptance {before}")
    start, step, rows = time.time(), 0, []
    done = False
    while not done:
        x, y = corpus.windows(corpus.train, args.seq_len, rng)
        for b in range(len(x) // args.batch):
            if planned is None and step == 30:
                rate = step / (time.time() - start)
                planned = max(31, int(rate * args.train_seconds))
                log(f"{rate:.2f} steps/s: planning {planned} steps ({planned / steps_per_epoch:.2f} epochs)")
            total = planned or 10 ** 9
            lr = args.lr * min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(1.0, step / total))))
            for group in opt.param_groups:
                group["lr"] = lr
            xb = x[b * args.batch:(b + 1) * args.batch].to(device, non_blocking=True)
            yb = y[b * args.batch:(b + 1) * args.batch].to(device, non_blocking=True)
            loss, accept = mtp_step(head, lm, embed, xb, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(head.parameters(), 1.0)
            opt.step()
            step += 1
            if step % 50 == 0 or step == planned:
                rows.append(dict(step=step, loss=round(loss.item(), 4), accept=round(accept.item(), 4),
                                 seconds=round(time.time() - start, 1)))
                log(rows[-1])
            if planned is not None and step >= planned:
                done = True
                break

    after = {"valid_docs": evaluate(head, lm, embed, vx, vy, args.batch, device),
             "valid_chat": evaluate(head, lm, embed, cx, cy, args.batch, device)}
    log(f"trained {step} steps: loss/acceptance {after}")
    target = export(head, model_dir, out / "smoke" if args.smoke else out)
    reloaded, info = Qwen3_5ForConditionalGeneration.from_pretrained(target, dtype=torch.float32,
                                                                     output_loading_info=True)
    probe = vx[:1, :64]
    with torch.no_grad():
        diff = (reloaded.eval()(input_ids=probe).logits - model.cpu()(input_ids=probe).logits).abs().max().item()
    log(f"the model with its head still loads in transformers (it ignores mtp.*): max |logit diff| {diff:.2e}, "
        f"unexpected {len(info.get('unexpected_keys', []))} keys")
    if diff > 1e-4:
        raise RuntimeError("adding the head changed the model's logits")
    report = dict(steps=step, seconds=round(time.time() - start, 1), untrained=before,
                  trained=after, rows=rows, note="loss/acceptance pairs: cross-entropy of t[p+2], and how "
                  "often the head's argmax is the model's greedy token there given the true context")
    (out / ("mtp_smoke_report.json" if args.smoke else "mtp_report.json")).write_text(json.dumps(report, indent=1) + "\n")
    log(f"wrote {target}")


if __name__ == "__main__":
    sys.exit(main())
