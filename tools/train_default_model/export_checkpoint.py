"""Writes the trained text model as a real Qwen3.5 checkpoint and checks it.

Layout (as Qwen/Qwen3.5 repositories): config.json of
Qwen3_5ForConditionalGeneration (text_config nested, a vision_config), one
model.safetensors with the language model under "model.language_model.", a
vision tower under "model.visual." and no lm_head (tied embeddings),
tokenizer.json, tokenizer_config.json, chat_template.jinja,
generation_config.json. Weights are bf16 except linear_attn.A_log and
linear_attn.norm.weight, kept fp32 like Qwen3.5's own checkpoints.

The vision tower is a minimal random placeholder (depth 1, hidden 64): the
model is text-only, but loaders of the real format expect the tensors.
"""

import copy
import json
import shutil
import tarfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

import goldens
import tokenizer_files
from chat_format import render

HERE = Path(__file__).resolve().parent
VISION = dict(depth=1, hidden_size=64, intermediate_size=128, num_heads=2, in_channels=3,
              patch_size=16, temporal_patch_size=2, spatial_merge_size=2,
              num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
FP32_SUFFIXES = ("linear_attn.A_log", "linear_attn.norm.weight")
TEXT_CONFIG_EXTRAS = {"attn_output_gate": True, "full_attention_interval": 4,
                      "mamba_ssm_dtype": "float32", "mtp_num_hidden_layers": 0,
                      "mtp_use_dedicated_embeddings": False, "partial_rotary_factor": 0.25}
GENERATION = {"do_sample": True, "temperature": 0.7, "top_k": 20, "top_p": 0.8}
PART_BYTES = 15 * 1024 * 1024

COMPLETION_PROMPTS = ["The Python list", "A dictionary is", "The json module",
                      "To read a file line by line,", "Exceptions are"]
CHAT_PROMPTS = [
    [{"role": "user", "content": "What does the len() function do?"}],
    [{"role": "user", "content": "Who are you?"}],
    [{"role": "user", "content": "What is a list comprehension?"}],
    [{"role": "system", "content": "You are a helpful assistant."},
     {"role": "user", "content": "How do I sort a list?"}],
    [{"role": "user", "content": "What is the os module?"}],
]


def log(*args):
    print(time.strftime("[%H:%M:%S]"), *args, flush=True)


def check(failures, ok, message):
    """Records a failed check without stopping the export."""
    if not ok:
        failures.append(message)
        log("CHECK FAILED:", message)


def composite(text_model, text_cfg, ids):
    from transformers import Qwen3_5Config, Qwen3_5ForConditionalGeneration
    cfg = Qwen3_5Config(text_config=text_cfg,
                        vision_config=dict(VISION, out_hidden_size=text_cfg.hidden_size),
                        image_token_id=ids["<|image_pad|>"], video_token_id=ids["<|video_pad|>"],
                        vision_start_token_id=ids["<|vision_start|>"],
                        vision_end_token_id=ids["<|vision_end|>"], tie_word_embeddings=True)
    torch.manual_seed(0)
    model = Qwen3_5ForConditionalGeneration(cfg).float().eval()
    state = {k[len("model."):]: v.detach().float().cpu()
             for k, v in text_model.state_dict().items() if k.startswith("model.")}
    model.model.language_model.load_state_dict(state, strict=True)
    if model.lm_head.weight.data_ptr() != \
            model.model.language_model.embed_tokens.weight.data_ptr():
        raise RuntimeError("lm_head is not tied to embed_tokens")
    return model


def patch_config(out_dir):
    path = out_dir / "config.json"
    cfg = json.loads(path.read_text())
    cfg["architectures"] = ["Qwen3_5ForConditionalGeneration"]
    cfg["dtype"] = "bfloat16"
    text = cfg["text_config"]
    for key in ("architectures", "_name_or_path", "transformers_version"):
        text.pop(key, None)
    for key, value in TEXT_CONFIG_EXTRAS.items():
        text.setdefault(key, value)
    text["dtype"] = "bfloat16"
    path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    return cfg


def inspect_safetensors(path):
    from safetensors import safe_open
    tensors = {}
    with safe_open(str(path), "pt") as f:
        for key in f.keys():
            sl = f.get_slice(key)
            tensors[key] = (str(sl.get_dtype()), list(sl.get_shape()))
    return tensors


@torch.no_grad()
def eval_loss(model, x, y, batch, device):
    total, count = 0.0, 0
    for i in range(0, len(x), batch):
        xb, yb = x[i:i + batch].to(device), y[i:i + batch].to(device)
        logits = model(input_ids=xb, use_cache=False).logits.float()
        total += F.cross_entropy(logits.reshape(-1, logits.shape[-1]), yb.reshape(-1),
                                 reduction="sum").item()
        count += yb.numel()
    return total / max(count, 1)


@torch.no_grad()
def samples(model, hf, ids, device, quick):
    stop = [ids["<|im_end|>"], ids["<|endoftext|>"]]
    new_tokens = 8 if quick else 64
    out = []

    def run(prompt_text, kind, messages=None):
        enc = hf(prompt_text, return_tensors="pt", add_special_tokens=False).to(device)
        entry = {"kind": kind, "prompt": prompt_text, "messages": messages}
        for mode in ("greedy", "sampled"):
            torch.manual_seed(0)
            extra = dict(do_sample=False) if mode == "greedy" else dict(GENERATION)
            gen = model.generate(**enc, max_new_tokens=new_tokens, eos_token_id=stop,
                                 pad_token_id=ids["<|endoftext|>"], **extra)
            entry[mode] = hf.decode(gen[0, enc["input_ids"].shape[1]:],
                                    skip_special_tokens=False)
        out.append(entry)

    for prompt in COMPLETION_PROMPTS[:1 if quick else 3]:
        run(prompt, "completion")
    for messages in CHAT_PROMPTS[:1 if quick else 5]:
        run(hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
            "chat", messages)
    return out


def samples_markdown(entries):
    lines = ["# hyllm-tiny samples", ""]
    for e in entries:
        title = e["messages"][-1]["content"] if e["kind"] == "chat" else e["prompt"]
        lines += [f"## {e['kind']}: {title}", ""]
        for mode in ("greedy", "sampled"):
            lines += [f"{mode}:", "", "```", e["prompt"] + e[mode], "```", ""]
    return "\n".join(lines)


def tokenizer_checks(hf, tok, ids, corpus_chats, failures):
    for text in goldens.TOKENIZER_STRINGS:
        check(failures, hf.encode(text, add_special_tokens=False) ==
              tok.encode(text, add_special_tokens=False).ids,
              f"AutoTokenizer and tokenizer.json disagree on {text!r}")
    check(failures, hf.eos_token == "<|im_end|>" and hf.pad_token == "<|endoftext|>"
          and hf.bos_token is None, "eos/pad/bos tokens")
    for messages in corpus_chats[:40]:
        want = render(messages[:-1], add_generation_prompt=True)
        got = hf.apply_chat_template(messages[:-1], tokenize=False, add_generation_prompt=True)
        check(failures, got == want, f"apply_chat_template differs: {got!r} vs {want!r}")
        want = render(messages)
        got = hf.apply_chat_template(messages, tokenize=False)
        check(failures, got == want, f"apply_chat_template differs: {got!r} vs {want!r}")
    vectors = json.loads((HERE / "chat_template_cases.json").read_text())
    for v in vectors:
        kwargs = {k: v[k] for k in ("tools", "add_generation_prompt", "enable_thinking")
                  if k in v}
        try:
            got = hf.apply_chat_template(v["messages"], tokenize=False, **kwargs)
        except Exception as e:  # noqa: BLE001 - reported, not fatal
            got = f"error: {e}"
        check(failures, got == v["expected"], f"template case {v['name']}: {got!r}")
    return vectors


def export(text_model, tok, text_cfg, out_dir, corpus, args, info, report_dir, smoke):
    import transformers
    from transformers import AutoTokenizer, Qwen3_5ForConditionalGeneration
    out_dir, report_dir = Path(out_dir), Path(report_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    report_dir.mkdir(parents=True, exist_ok=True)
    failures = []
    ids = tokenizer_files.special_ids(tok)
    text_model = text_model.float().cpu().eval()
    model = composite(text_model, text_cfg, ids)
    probe = torch.from_numpy(corpus.items["valid_docs"][0][None, :96].astype("int64"))
    with torch.no_grad():
        diff = (text_model(input_ids=probe).logits - model(input_ids=probe).logits).abs().max()
    log(f"composite vs trained logits: max |diff| {diff:.2e}")
    if diff > 1e-4:
        raise RuntimeError("composite model does not reproduce the trained model")

    keep = {n: p.detach().clone() for n, p in model.named_parameters()
            if n.endswith(FP32_SUFFIXES)}
    model.to(torch.bfloat16)
    for name, param in model.named_parameters():
        if name in keep:
            param.data = keep[name]
    model.save_pretrained(out_dir)
    config = patch_config(out_dir)
    tokenizer_class = ("Qwen3_5Tokenizer" if hasattr(transformers, "Qwen3_5Tokenizer")
                       else "PreTrainedTokenizerFast")
    tokenizer_files.write(tok, out_dir, (HERE / "chat_template.jinja").read_text(),
                          tokenizer_class, args.max_positions)
    generation = dict(GENERATION, bos_token_id=ids["<|endoftext|>"],
                      eos_token_id=[ids["<|im_end|>"], ids["<|endoftext|>"]],
                      pad_token_id=ids["<|endoftext|>"],
                      transformers_version=transformers.__version__)
    (out_dir / "generation_config.json").write_text(
        json.dumps(generation, indent=2, sort_keys=True) + "\n")
    for stray in out_dir.iterdir():
        if stray.name not in {"config.json", "model.safetensors", "tokenizer.json",
                              "tokenizer_config.json", "chat_template.jinja",
                              "generation_config.json"}:
            log(f"removing unexpected file {stray.name}")
            stray.unlink()

    tensors = inspect_safetensors(out_dir / "model.safetensors")
    bad_prefix = [k for k in tensors if not k.startswith(("model.language_model.",
                                                           "model.visual."))]
    check(failures, not bad_prefix, f"tensors outside the expected prefixes: {bad_prefix}")
    for key, (dtype, _shape) in tensors.items():
        want = "F32" if key.endswith(FP32_SUFFIXES) else "BF16"
        check(failures, dtype == want, f"{key} stored as {dtype}, wanted {want}")

    # A fresh fp32 model with the exported weights: casting `model` back to fp32
    # would also carry bf16-rounded rotary frequencies (non-persistent buffers).
    reference = Qwen3_5ForConditionalGeneration(model.config).float().eval()
    reference.load_state_dict({k: v.float() for k, v in model.state_dict().items()})
    reloaded, loading = Qwen3_5ForConditionalGeneration.from_pretrained(
        out_dir, dtype=torch.float32, output_loading_info=True)
    reloaded.eval()
    problems = {k: sorted(map(str, v)) for k, v in loading.items() if v}
    check(failures, not problems, f"reload reported {problems}")
    with torch.no_grad():
        diff = (reference(input_ids=probe).logits - reloaded(input_ids=probe).logits).abs().max()
    log(f"reloaded checkpoint vs exported weights: max |diff| {diff:.2e}")
    if diff > 1e-4:
        raise RuntimeError("the reloaded checkpoint computes different logits")

    hf = AutoTokenizer.from_pretrained(out_dir)
    log(f"AutoTokenizer class {type(hf).__name__} (tokenizer_class {tokenizer_class})")
    valid_chats = [json.loads(l)["messages"]
                   for l in open(Path(args.data) / "valid_chat.jsonl", encoding="utf-8")]
    template_cases = tokenizer_checks(hf, tok, ids, valid_chats, failures)

    device = "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    gpu = copy.deepcopy(reloaded).to(device)
    vx, vy = corpus.windows(corpus.items["valid_docs"], args.seq_len)
    cx, cy = corpus.windows(corpus.items["valid_chat"], args.seq_len)
    heldout = {"valid_doc_loss": round(eval_loss(gpu, vx, vy, args.batch, device), 4),
               "valid_chat_loss": round(eval_loss(gpu, cx, cy, args.batch, device), 4)}
    log(f"held-out loss of the saved bf16 weights (fp32 compute): {heldout}")
    entries = samples(gpu, hf, ids, device, quick=smoke)
    del gpu

    torch.set_num_threads(8)
    long_prompt = corpus.items["valid_docs"][0][:300].tolist()
    golden = goldens.make(reloaded, tok, ids, long_prompt, transformers.__version__,
                          torch.__version__)
    for case in golden["cases"]:
        check(failures, case["recompute_agrees"], f"golden {case['name']}: cached greedy "
              "differs from full recompute")
    sizes = {p.name: p.stat().st_size for p in sorted(out_dir.iterdir())}
    text_params = sum(p.numel() for n, p in reloaded.named_parameters()
                      if not n.startswith("model.visual."))
    vision_params = sum(p.numel() for n, p in reloaded.named_parameters()
                        if n.startswith("model.visual."))
    summary = {
        "smoke": smoke, "heldout": heldout, "text_parameters": text_params,
        "vision_placeholder_parameters": vision_params, "files": sizes,
        "total_bytes": sum(sizes.values()), "tensors": len(tensors),
        "tokenizer_class": tokenizer_class, "failures": failures,
        "training": {k: v for k, v in info.items() if k != "rows"},
        "golden_min_margins": {c["name"]: c["min_margin"] for c in golden["cases"]},
        "text_config": config["text_config"],
    }
    (report_dir / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    (report_dir / "samples.json").write_text(json.dumps(entries, indent=1) + "\n")
    (report_dir / "samples.md").write_text(samples_markdown(entries))
    (report_dir / "goldens.json").write_text(
        json.dumps(goldens.team_format(golden), indent=1, ensure_ascii=False) + "\n")
    (report_dir / "tokenizer_cases.json").write_text(
        json.dumps(goldens.tokenizer_cases(tok), indent=1, ensure_ascii=False) + "\n")
    (report_dir / "chat_template_cases.json").write_text(json.dumps(
        [dict(v, ids=tok.encode(v["expected"], add_special_tokens=False).ids)
         for v in template_cases], indent=1, ensure_ascii=False) + "\n")
    log(f"export {'(smoke) ' if smoke else ''}done: {sum(sizes.values()) / 1e6:.2f} MB, "
        f"{len(failures)} failed checks")
    for e in entries:
        log(f"SAMPLE {e['kind']}: {e['prompt'][-60:]!r} -> {e['greedy'][:160]!r}")
    return summary


def pack(model_dir, report_dir, out, name="hyllm-tiny"):
    """One tar of the checkpoint and reports, cut into parts that fit $OUT."""
    tar_path = Path(report_dir).parent / f"{name}.tar"
    with tarfile.open(tar_path, "w") as tar:
        tar.add(model_dir, arcname=name)
        tar.add(report_dir, arcname="report")
    data = tar_path.read_bytes()
    for index in range(0, len(data), PART_BYTES):
        (Path(out) / f"{name}.tar.part{index // PART_BYTES}").write_bytes(
            data[index:index + PART_BYTES])
    if (Path(report_dir) / "summary.json").exists():
        shutil.copy(Path(report_dir) / "summary.json", Path(out) / "summary.json")
    log(f"packed {len(data) / 1e6:.1f} MB into {Path(out)}")
