#!/usr/bin/env python3
"""Goldens for a block-FP8 tiny Qwen3.5 model from HF transformers' own FP8 path.

The model is tests/data/tiny_models/dense_flat_aligned (every projection a
multiple of 128 rows and columns) quantised to Qwen's block FP8 by hyllm
itself, so the goldens are about exactly the bytes hyllm's tests quantise:

    build/hyllm quantize --model tests/data/tiny_models/dense_flat_aligned --format fp8-block \\
        --out .carry/fp8golden/fp8 --dequantized-out .carry/fp8golden/ref

On a machine with an sm_89+ GPU, torch and transformers >= 5 (the GPU machine):

    python3 tools/goldens/make_fp8_goldens.py --fp8 .carry/fp8golden/fp8 --ref .carry/fp8golden/ref \\
        --prompts tests/data/tiny_models/dense_flat_aligned/golden.json \\
        --out tests/data/tiny_models/dense_flat_aligned/golden_hf_fp8.json

It stops with an error at the first assumption that does not hold:
  1. the checkpoint is Qwen block FP8 (quant_method fp8, e4m3, [128, 128]
     blocks, dynamic activations) with every quantised linear 128-aligned;
  2. HF's fine-grained FP8 quantizer loads it on the GPU (bf16 activations)
     with exactly the checkpoint's quantised linears as FP8 modules, each
     holding the checkpoint's e4m3 codes and weight_scale_inv bit for bit,
     and every other linear in bf16 as stored. The exclude list is given to
     HF as full module names (HF's older matcher tests substrings, under which
     "mlp.gate" would also exclude every "mlp.gate_proj");
  3. HF's FP8 linears reach the Triton kernel kernels-community/finegrained-fp8
     through transformers' finegrained_fp8_linear (DeepGEMM off). transformers
     has no FP8 matmul of its own and loads that kernel from the HF Hub with
     the `kernels` package; where it cannot (the GPU machine has neither),
     hf_fp8_kernel.py computes the kernel's formula in torch in its place,
     after checking its torch code against a scalar transcription of the
     formula, and the golden's `reference.hf_fp8_kernel` says which ran;
     every FP8 module runs in every forward and each of its calls reaches
     that kernel (forward hooks and the kernel's wrapper count the calls);
  4. greedy decoding with HF's cache agrees with a full recompute wherever the
     margin is clear of the noise;
  5. FP8 inference is visible and sane: against the dequantised reference
     (bf16(Wq * s), run in fp32 on the CPU) the HF FP8 logits differ by more
     than twice what HF's bf16 run of that reference differs, and by less
     than half the logits' RMS.
Then it writes the golden (prompts, greedy tokens, per-step margins, top-5
logits, first-step logits, thresholds) and prints a summary last.

Thresholds (the rule of tools/goldens/make_goldens.py, with FP8's noise in
place of bf16's): margin_threshold = max(0.05, 2 x the largest change of a
step's top-1/top-2 margin between HF FP8 and the fp32 reference); a test
compares greedy tokens up to the first step below it (comparable_steps) and,
teacher-forced, the argmax at every step above it. logit_tolerance of a case
= max(0.1, 3 x HF bf16's largest logit error, 0.5 x HF FP8's largest logit
error), both against the fp32 reference: an implementation of the same FP8
arithmetic differs from HF's by bf16 roundings and the activation codes they
flip, well inside FP8's own noise.

`--selftest` checks the pure-Python helpers, hf_fp8_kernel.py's included (no torch).
"""

import argparse
import copy
import inspect
import json
import os
import shutil
import sys
import tempfile
import time
from collections import OrderedDict

import hf_fp8_kernel

try:
    import torch
except ImportError:  # --selftest runs without it
    torch = None

BLOCK = 128
NUM_NEW_TOKENS = 32
CANDIDATES_PER_SLOT = 4
MIN_MARGIN_THRESHOLD = 0.05
MIN_LOGIT_TOLERANCE = 0.1


class Mismatch(RuntimeError):
    """An assumption of this script does not hold: nothing is written."""


def require(cond, message):
    if not cond:
        raise Mismatch(message)


def fnv1a64(path):
    """FNV-1a 64 of a file's bytes, as a 16-digit hex string (the C++ test recomputes it)."""
    h = 0xCBF29CE484222325
    with open(path, "rb") as f:
        data = f.read()
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def leading_run(margins, threshold):
    for i, m in enumerate(margins):
        if m < threshold:
            return i
    return len(margins)


# --------------------------------------------------------------------------
# 1. The checkpoint

def read_checkpoint(fp8_dir):
    from safetensors.torch import load_file
    path = os.path.join(fp8_dir, "model.safetensors")
    require(os.path.exists(path), f"{path} does not exist (hyllm quantize writes one file)")
    return load_file(path)


def check_checkpoint(fp8_dir, tensors):
    with open(os.path.join(fp8_dir, "config.json")) as f:
        config = json.load(f)
    qc = config.get("quantization_config")
    require(qc is not None, "config.json has no quantization_config")
    require(qc.get("quant_method") == "fp8", f"quant_method {qc.get('quant_method')!r}, expected 'fp8'")
    require(qc.get("fmt", "e4m3") == "e4m3", f"fmt {qc.get('fmt')!r}, expected e4m3")
    require(list(qc.get("weight_block_size", [])) == [BLOCK, BLOCK],
            f"weight_block_size {qc.get('weight_block_size')}, expected [128, 128]")
    require(qc.get("activation_scheme", "dynamic") == "dynamic", "activation_scheme is not dynamic")
    require("text_config" not in config and config.get("architectures") == ["Qwen3_5ForCausalLM"],
            f"expected a flat Qwen3_5ForCausalLM config, got {config.get('architectures')}")
    quantised = sorted(n[: -len(".weight_scale_inv")] for n in tensors if n.endswith(".weight_scale_inv"))
    require(quantised, "no weight_scale_inv tensors: not a block-FP8 checkpoint")
    for m in quantised:
        w, s = tensors[m + ".weight"], tensors[m + ".weight_scale_inv"]
        require(w.dtype == torch.float8_e4m3fn, f"{m}.weight is {w.dtype}, expected float8_e4m3fn")
        require(w.dim() == 2 and w.shape[0] % BLOCK == 0 and w.shape[1] % BLOCK == 0,
                f"{m}.weight {tuple(w.shape)} is not 128-aligned (HF's act_quant needs K % 128 == 0)")
        require(s.dtype == torch.float32 and tuple(s.shape) == (w.shape[0] // BLOCK, w.shape[1] // BLOCK),
                f"{m}.weight_scale_inv {s.dtype} {tuple(s.shape)} does not match the weight")
        require(bool(torch.isfinite(s).all()) and bool((s > 0).all()), f"{m}.weight_scale_inv has a bad value")
    fp8_other = [n for n, t in tensors.items()
                 if t.dtype == torch.float8_e4m3fn and n[: -len(".weight")] not in quantised]
    require(not fp8_other, f"e4m3 tensors without a scale: {fp8_other[:4]}")
    # Linears kept in bf16: 2-D float weights that are not embeddings (in_proj_a/b, lm_head).
    kept = sorted(n[: -len(".weight")] for n, t in tensors.items()
                  if n.endswith(".weight") and t.dim() == 2 and t.dtype != torch.float8_e4m3fn
                  and not n.endswith("embed_tokens.weight"))
    return config, quantised, kept


def write_hf_copy(fp8_dir, config, kept, work):
    """The checkpoint with an exclude list of full module names (see the docstring)."""
    out = os.path.join(work, "fp8_for_hf")
    os.makedirs(out, exist_ok=True)
    os.symlink(os.path.abspath(os.path.join(fp8_dir, "model.safetensors")), os.path.join(out, "model.safetensors"))
    c = copy.deepcopy(config)
    c["quantization_config"]["modules_to_not_convert"] = kept + ["model.embed_tokens"]
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(c, f, indent=2)
    return out, c["quantization_config"]["modules_to_not_convert"]


# --------------------------------------------------------------------------
# 2, 3. HF's FP8 model

def set_eager(model):
    try:
        model.set_attn_implementation("eager")
    except Exception:
        model.config._attn_implementation = "eager"


def load_hf_fp8(hf_dir, tensors, quantised, kept):
    import transformers
    model = transformers.Qwen3_5ForCausalLM.from_pretrained(hf_dir, dtype=torch.bfloat16, device_map="cuda").eval()
    set_eager(model)
    qc = getattr(model.config, "quantization_config", None)
    require(qc is not None, "the loaded model has no quantization_config: HF did not use its FP8 quantizer")
    require(not getattr(qc, "dequantize", False), "HF dequantized the FP8 weights (dequantize=True)")
    fp8_modules = OrderedDict()
    for name, m in model.named_modules():
        w = getattr(m, "weight", None)
        if isinstance(w, torch.Tensor) and w.dtype == torch.float8_e4m3fn:
            fp8_modules[name] = m
    require(sorted(fp8_modules) == quantised,
            "HF's FP8 modules differ from the checkpoint's quantised linears: only in HF "
            f"{sorted(set(fp8_modules) - set(quantised))[:4]}, only in the checkpoint "
            f"{sorted(set(quantised) - set(fp8_modules))[:4]}")
    classes = set()
    for name, m in fp8_modules.items():
        classes.add(f"{type(m).__module__}.{type(m).__name__}")
        scale = getattr(m, "weight_scale_inv", None)
        require(isinstance(scale, torch.Tensor), f"{name} ({type(m).__name__}) has no weight_scale_inv")
        require(torch.equal(m.weight.detach().cpu().view(torch.uint8), tensors[name + ".weight"].view(torch.uint8)),
                f"{name}: HF's e4m3 codes differ from the checkpoint's")
        require(torch.equal(scale.detach().float().cpu(), tensors[name + ".weight_scale_inv"]),
                f"{name}: HF's weight_scale_inv differs from the checkpoint's")
    modules = dict(model.named_modules())
    for name in kept:
        m = modules.get(name)
        require(m is not None and m.weight.dtype == torch.bfloat16, f"{name} is not a bf16 module in HF's model")
        require(torch.equal(m.weight.detach().cpu(), tensors[name + ".weight"]), f"{name}: HF's weight differs")
    forward_sources = sorted({inspect.getsourcefile(type(m).forward) or "?" for m in fp8_modules.values()})
    return model, fp8_modules, sorted(classes), forward_sources


class CallCounter:
    """Counts forward calls of the FP8 modules, and those of the FP8 kernel they reach."""

    def __init__(self, modules, kernel_calls):
        self.calls = {name: 0 for name in modules}
        self.kernel = kernel_calls
        self.handles = [m.register_forward_hook(self._hook(name)) for name, m in modules.items()]

    def _hook(self, name):
        def hook(module, args, output):
            self.calls[name] += 1
        return hook

    def reset(self):
        for k in self.calls:
            self.calls[k] = 0
        self.kernel.reset()

    def require_kernel_ran(self, what):
        modules = sum(self.calls.values())
        require(modules > 0 and self.kernel.calls == modules,
                f"{what}: {modules} FP8 module calls but {self.kernel.calls} calls of the FP8 kernel")


def logits_full(model, ids, device):
    x = torch.tensor([ids], dtype=torch.long, device=device)
    pos = torch.arange(len(ids), dtype=torch.long, device=device)[None]
    return model(input_ids=x, position_ids=pos, use_cache=False).logits[0].float().cpu()


def greedy_cached(model, prompt, n, device, counter):
    """Greedy decode with HF's cache; every FP8 module must run at every step."""
    x = torch.tensor([prompt], dtype=torch.long, device=device)
    pos = torch.arange(len(prompt), dtype=torch.long, device=device)[None]
    counter.reset()
    out = model(input_ids=x, position_ids=pos, use_cache=True)
    steps = 1
    cache = out.past_key_values
    step_logits = [out.logits[0, -1].float().cpu()]
    tokens = [int(step_logits[-1].argmax())]
    for i in range(1, n):
        p = len(prompt) + i - 1
        out = model(input_ids=torch.tensor([[tokens[-1]]], device=device),
                    position_ids=torch.tensor([[p]], device=device), past_key_values=cache, use_cache=True)
        steps += 1
        cache = out.past_key_values
        step_logits.append(out.logits[0, -1].float().cpu())
        tokens.append(int(step_logits[-1].argmax()))
    idle = [k for k, v in counter.calls.items() if v < steps]
    require(not idle, f"FP8 modules that did not run at every one of {steps} steps: {idle[:4]}")
    counter.require_kernel_ran("cached greedy decoding")
    return tokens, torch.stack(step_logits)


# --------------------------------------------------------------------------
# 4, 5. One prompt

def evaluate(hf, ref32, ref16, prompt, counter):
    tokens, cached = greedy_cached(hf, prompt, NUM_NEW_TOKENS, "cuda", counter)
    seq = prompt + tokens
    window = slice(len(prompt) - 1, len(prompt) - 1 + NUM_NEW_TOKENS)
    counter.reset()
    recompute = logits_full(hf, seq, "cuda")[window]
    counter.require_kernel_ran("the full recompute")
    ref = logits_full(ref32, seq, "cpu")[window]
    ref_bf16 = logits_full(ref16, seq, "cuda")[window]
    top2 = cached.topk(2, dim=-1)
    margins = (top2.values[:, 0] - top2.values[:, 1]).tolist()
    idx = torch.arange(NUM_NEW_TOKENS)
    t1, t2 = top2.indices[:, 0], top2.indices[:, 1]
    margin_err = ((ref[idx, t1] - ref[idx, t2]) - torch.tensor(margins)).abs().tolist()
    rms = float(ref.pow(2).mean().sqrt())
    return dict(
        tokens=tokens, cached=cached, margins=margins, margin_err=margin_err,
        recompute_tokens=recompute.argmax(-1).tolist(),
        recompute_max_abs_diff=float((recompute - cached).abs().max()),
        fp8_logit_max_abs_diff=float((cached - ref).abs().max()),
        bf16_logit_max_abs_diff=float((ref_bf16 - ref).abs().max()),
        fp8_rel_rms=float((cached - ref).pow(2).mean().sqrt()) / rms,
        bf16_rel_rms=float((ref_bf16 - ref).pow(2).mean().sqrt()) / rms,
    )


def choose(hf, ref32, ref16, golden_prompts, vocab, counter):
    """Per prompt slot: the golden.json prompt, then random ones of its length,
    keeping the one whose greedy run stays clear of FP8's noise longest."""
    gen = torch.Generator().manual_seed(2026)
    chosen = []
    for slot, base in enumerate(golden_prompts):
        best = None
        for c in range(CANDIDATES_PER_SLOT):
            prompt = base if c == 0 else torch.randint(0, vocab, (len(base),), generator=gen).tolist()
            r = evaluate(hf, ref32, ref16, prompt, counter)
            thr = max(MIN_MARGIN_THRESHOLD, 2.0 * max(r["margin_err"]))
            run = leading_run(r["margins"], thr)
            agree = all(a == b for a, b, m in zip(r["tokens"], r["recompute_tokens"], r["margins"]) if m >= thr)
            distinct = len(set(r["tokens"]))
            score = (agree, run if distinct >= 6 else run // 4, distinct)
            print(f"  slot {slot} candidate {c}: len {len(prompt)} run {run}/{NUM_NEW_TOKENS} thr {thr:.3f} "
                  f"agree {agree} distinct {distinct} fp8 rel RMS {r['fp8_rel_rms']:.4f} "
                  f"bf16 rel RMS {r['bf16_rel_rms']:.5f}", flush=True)
            if best is None or score > best[0]:
                best = (score, prompt, r, thr)
            if run == NUM_NEW_TOKENS and agree and distinct >= 6:
                break
        chosen.append(best)
    return chosen


def golden_record(chosen, meta, checks):
    threshold = max(thr for _, _, _, thr in chosen)
    cases = []
    for _, prompt, r, thr in chosen:
        top5 = r["cached"].topk(5, dim=-1)
        tol = max(MIN_LOGIT_TOLERANCE, 3.0 * r["bf16_logit_max_abs_diff"], 0.5 * r["fp8_logit_max_abs_diff"])
        cases.append(OrderedDict(
            prompt_ids=prompt,
            output_ids=r["tokens"],
            margins=[round(m, 5) for m in r["margins"]],
            top_logits=[[[int(i), round(float(v), 4)] for i, v in zip(ii, vv)]
                        for ii, vv in zip(top5.indices.tolist(), top5.values.tolist())],
            first_step_logits=[round(float(v), 4) for v in r["cached"][0].tolist()],
            comparable_steps=leading_run(r["margins"], threshold),
            case_margin_threshold=round(thr, 5),
            fp8_margin_error_max=round(max(r["margin_err"]), 5),
            fp8_logit_max_abs_diff=round(r["fp8_logit_max_abs_diff"], 5),
            bf16_logit_max_abs_diff=round(r["bf16_logit_max_abs_diff"], 5),
            fp8_rel_rms=round(r["fp8_rel_rms"], 5),
            bf16_rel_rms=round(r["bf16_rel_rms"], 6),
            recompute_max_abs_diff=round(r["recompute_max_abs_diff"], 5),
            logit_tolerance=round(tol, 4),
        ))
    return OrderedDict(
        format=1,
        generator="tools/goldens/make_fp8_goldens.py",
        model="dense_flat_aligned, quantised by `hyllm quantize --format fp8-block`",
        reference=meta,
        compute="HF transformers' fine-grained FP8 path on the GPU (e4m3 weights with their 128x128 "
                "weight_scale_inv, activations quantised per token per 128 columns, bf16 activations), greedy "
                "with the model's cache; eager attention; the FP8 linear's kernel is reference.hf_fp8_kernel",
        checks=checks,
        margin_threshold=round(threshold, 5),
        margin_threshold_rule="max(%g, 2 x the largest |margin(HF FP8) - margin(fp32 dequantised reference)| "
                              "over a case's steps), max over cases" % MIN_MARGIN_THRESHOLD,
        logit_tolerance_rule="max(%g, 3 x bf16_logit_max_abs_diff, 0.5 x fp8_logit_max_abs_diff) per case, "
                             "both against the fp32 dequantised reference" % MIN_LOGIT_TOLERANCE,
        compare_rule="greedy tokens equal output_ids up to comparable_steps; teacher-forced, the argmax equals "
                     "output_ids where the margin clears margin_threshold and the top-5 logits are within "
                     "logit_tolerance",
        cases=[c for c in cases],
    )


def run(args):
    require(torch is not None, "torch is not installed")
    import transformers
    require(int(transformers.__version__.split(".")[0]) >= 5,
            f"transformers {transformers.__version__}: Qwen3.5 needs >= 5")
    require(torch.cuda.is_available(), "no CUDA device: HF's FP8 path runs on the GPU only")
    major, minor = torch.cuda.get_device_capability()
    require((major, minor) >= (8, 9), f"compute capability {major}.{minor}: FP8 needs >= 8.9")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_grad_enabled(False)
    torch.set_num_threads(min(8, os.cpu_count() or 1))
    start = time.time()

    tensors = read_checkpoint(args.fp8)
    config, quantised, kept = check_checkpoint(args.fp8, tensors)
    checkpoint_hash = fnv1a64(os.path.join(args.fp8, "model.safetensors"))
    with open(args.prompts) as f:
        golden_prompts = [c["prompt_ids"] for c in json.load(f)["cases"]]
    require(golden_prompts, f"{args.prompts} has no cases")

    work = tempfile.mkdtemp(prefix="hyllm_fp8_golden_")
    try:
        hf_dir, excluded = write_hf_copy(args.fp8, config, kept, work)
        hf, fp8_modules, classes, sources = load_hf_fp8(hf_dir, tensors, quantised, kept)
        print(f"HF FP8 modules: {len(fp8_modules)} of classes {classes}, forward from {sources}", flush=True)
        import transformers.integrations.finegrained_fp8 as hf_fp8
        kernel_info, kernel_calls = hf_fp8_kernel.install(hf_fp8, "cuda")
        print(f"HF FP8 kernel: {kernel_info['hf_fp8_kernel']}", flush=True)
        for key in ("hub_kernel_error", "replacement_vs_scalar_reference"):
            if key in kernel_info:
                print(f"  {key}: {kernel_info[key]}", flush=True)
        ref32 = transformers.Qwen3_5ForCausalLM.from_pretrained(args.ref, dtype=torch.float32).eval()
        set_eager(ref32)
        ref16 = transformers.Qwen3_5ForCausalLM.from_pretrained(args.ref, dtype=torch.bfloat16,
                                                                device_map="cuda").eval()
        set_eager(ref16)
        counter = CallCounter(fp8_modules, kernel_calls)
        chosen = choose(hf, ref32, ref16, golden_prompts, config["vocab_size"], counter)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    for i, (_, prompt, r, thr) in enumerate(chosen):
        require(r["fp8_rel_rms"] > 2.0 * r["bf16_rel_rms"],
                f"case {i}: HF FP8 is as close to the reference as bf16 ({r['fp8_rel_rms']:.5f} vs "
                f"{r['bf16_rel_rms']:.5f}): its activations were not quantised")
        require(r["fp8_rel_rms"] < 0.5, f"case {i}: HF FP8 logits are {r['fp8_rel_rms']:.3f} RMS off the reference")
        require(all(a == b for a, b, m in zip(r["tokens"], r["recompute_tokens"], r["margins"]) if m >= thr),
                f"case {i}: HF's cached greedy tokens disagree with its full recompute at clear margins")
    checks = OrderedDict(
        checkpoint_is_block_fp8_128=True,
        fp8_modules_are_the_quantised_linears=len(fp8_modules),
        codes_and_scales_bit_exact_in_hf=True,
        bf16_linears_kept=kept,
        every_fp8_module_ran_every_step=True,
        every_fp8_module_call_reached_the_kernel=True,
        recompute_agrees_with_cache=True,
        fp8_noise_above_bf16=True,
    )
    meta = OrderedDict(
        transformers=transformers.__version__, torch=torch.__version__,
        triton=getattr(sys.modules.get("triton"), "__version__", "not imported"),
        device=torch.cuda.get_device_name(), fp8_module_classes=classes, fp8_forward_sources=sources,
        modules_to_not_convert=excluded,
        **kernel_info,
        fp8_checkpoint="model.safetensors of `hyllm quantize --format fp8-block`",
        fp8_checkpoint_fnv1a64=checkpoint_hash,
        reference_checkpoint="the --dequantized-out of the same run, in fp32 on the CPU",
    )
    record = golden_record(chosen, meta, checks)
    with open(args.out, "w") as f:
        json.dump(record, f, indent=1)
        f.write("\n")

    print("\n==== SUMMARY ====")
    print(f"transformers {transformers.__version__}, torch {torch.__version__}, {torch.cuda.get_device_name()}")
    print(f"checkpoint fnv1a64 {checkpoint_hash}; {len(fp8_modules)} FP8 modules ({classes})")
    print(f"FP8 kernel: {kernel_info['hf_fp8_kernel']}")
    print(f"margin_threshold {record['margin_threshold']}")
    print("cases (prompt_len, comparable_steps, min_margin, fp8_rel_rms, bf16_rel_rms, fp8_logit_diff, "
          "logit_tolerance, distinct):")
    for c in record["cases"]:
        print("  ", (len(c["prompt_ids"]), c["comparable_steps"], round(min(c["margins"]), 3), c["fp8_rel_rms"],
                     c["bf16_rel_rms"], c["fp8_logit_max_abs_diff"], c["logit_tolerance"],
                     len(set(c["output_ids"]))))
    print(f"wrote {args.out} ({os.path.getsize(args.out) / 1024:.0f} KiB) in {time.time() - start:.0f} s")
    return 0


def selftest():
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "x")
        with open(p, "wb") as f:
            f.write(b"a")
        assert fnv1a64(p) == "af63dc4c8601ec8c", fnv1a64(p)  # the published FNV-1a 64 of "a"
        with open(p, "wb") as f:
            f.write(b"")
        assert fnv1a64(p) == "cbf29ce484222325"
    assert leading_run([1.0, 0.5, 0.01, 2.0], 0.05) == 2
    assert leading_run([1.0], 0.05) == 1
    try:
        require(False, "x")
        raise AssertionError("require did not raise")
    except Mismatch:
        pass
    hf_fp8_kernel.selftest()
    print("selftest ok")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fp8", help="hyllm quantize --format fp8-block output directory")
    ap.add_argument("--ref", help="its --dequantized-out directory")
    ap.add_argument("--prompts", help="a golden.json whose prompt_ids seed the prompt slots")
    ap.add_argument("--out", help="where to write the golden")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return selftest()
    if not (args.fp8 and args.ref and args.prompts and args.out):
        ap.error("--fp8, --ref, --prompts and --out are required")
    try:
        return run(args)
    except (Mismatch, hf_fp8_kernel.KernelAssumption) as e:
        print(f"\nASSUMPTION FAILED, nothing written: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
