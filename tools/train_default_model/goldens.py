"""Greedy goldens of hyllm-tiny from the transformers reference.

The checkpoint's bf16 (and fp32) tensors are loaded into fp32 and run on the CPU
in fp32. Each case decodes greedily with the model's cache (prefill of the
whole prompt, then one token a step, EOS ignored), recording per step the chosen
id, its logit and log-probability, the runner-up and the top-5. A full
recompute of prompt + output (no cache) must choose the same tokens.
"""

import torch

from chat_format import render

NEW_TOKENS = 48

TOKENIZER_STRINGS = [
    "The Python list",
    "Hello, world!\n",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\n",
    "  two leading spaces and trailing   ",
    "Numbers 1234567 and 3.14159 and 1e-10",
    "CRLF line\r\nnext line\r\n\r\n",
    "tabs\tand\ttabs",
    "naïve café résumé",
    "e\u0301 (decomposed e-acute, NFC composes it)",
    "Ω≈ç√∫ ∑ 日本語のテキスト 한국어 Ελληνικά",
    "emoji 🐍🎉 and symbols ©®™",
    "I'm you're he'll we've they'd IT'S",
    "<|im_start|>user\nWhat does len() do?<|im_end|>\n<|im_start|>assistant\n"
    "<think>\n\n</think>\n\n",
    "<tool_call>\n<function=f>\n<parameter=x>\n1\n</parameter>\n</function>\n</tool_call>",
    "literal <|im_start without closing and <think",
    "",
]


def tokenizer_cases(tok):
    cases = []
    for text in TOKENIZER_STRINGS:
        enc = tok.encode(text, add_special_tokens=False)
        cases.append({"text": text, "ids": enc.ids,
                      "decoded": tok.decode(enc.ids, skip_special_tokens=False)})
    return {"tokenizer": "models/hyllm-tiny/tokenizer.json",
            "note": "ids from HF tokenizers (add_special_tokens=false); 'decoded' is "
                    "decode(ids, skip_special_tokens=false), which NFC-normalises",
            "cases": cases}


def _cases(tok, long_prompt):
    chat1 = [{"role": "user", "content": "What does the len() function do?"}]
    chat2 = [{"role": "system", "content": "You are a helpful assistant."},
             {"role": "user", "content": "Who are you?"}]
    chat3 = [{"role": "user", "content": "What is a tuple?"}]
    out = []
    for name, text in [("completion_python_list", "The Python list"),
                       ("completion_dictionary", "A dictionary is a"),
                       ("completion_code", "def fibonacci(n):\n    ")]:
        out.append({"name": name, "kind": "completion", "prompt_text": text,
                    "prompt_ids": tok.encode(text, add_special_tokens=False).ids})
    out.append({"name": "completion_long_heldout", "kind": "completion",
                "prompt_text": tok.decode(long_prompt, skip_special_tokens=False),
                "prompt_ids": list(long_prompt)})
    for name, messages, thinking in [("chat_len", chat1, False),
                                     ("chat_system_identity", chat2, False),
                                     ("chat_tuple_thinking_on", chat3, True)]:
        text = render(messages, add_generation_prompt=True, enable_thinking=thinking)
        out.append({"name": name, "kind": "chat", "messages": messages,
                    "enable_thinking": thinking, "prompt_text": text,
                    "prompt_ids": tok.encode(text, add_special_tokens=False).ids})
    return out


@torch.no_grad()
def greedy(model, prompt_ids, n):
    model.model.rope_deltas = None
    ids = torch.tensor([prompt_ids])
    out = model(input_ids=ids, position_ids=torch.arange(len(prompt_ids))[None],
                use_cache=True)
    cache, logits = out.past_key_values, out.logits[0, -1].float()
    generated, step_logits = [], []
    for s in range(n):
        step_logits.append(logits)
        token = int(torch.argmax(logits))
        generated.append(token)
        if s == n - 1:
            break
        pos = len(prompt_ids) + s
        out = model(input_ids=torch.tensor([[token]]), position_ids=torch.tensor([[pos]]),
                    past_key_values=cache, use_cache=True)
        cache, logits = out.past_key_values, out.logits[0, -1].float()
    return generated, step_logits


def _step_record(logits):
    top = torch.topk(logits, 5)
    lse = torch.logsumexp(logits, 0)
    ids, vals = top.indices.tolist(), top.values.tolist()
    return {"id": ids[0], "logit": round(vals[0], 5),
            "logprob": round(vals[0] - float(lse), 5),
            "top2_id": ids[1], "top2_logit": round(vals[1], 5),
            "margin": round(vals[0] - vals[1], 5),
            "top5": [[i, round(v, 5)] for i, v in zip(ids, vals)]}


@torch.no_grad()
def make(model, tok, ids, long_prompt, transformers_version, torch_version):
    model = model.float().cpu().eval()
    eos = {ids["<|im_end|>"], ids["<|endoftext|>"]}
    cases = []
    for case in _cases(tok, long_prompt):
        generated, step_logits = greedy(model, case["prompt_ids"], NEW_TOKENS)
        full = model(input_ids=torch.tensor([case["prompt_ids"] + generated[:-1]]),
                     use_cache=False).logits[0].float()
        start = len(case["prompt_ids"]) - 1
        recompute = full[start:start + NEW_TOKENS]
        agrees = bool((recompute.argmax(-1) == torch.tensor(generated)).all())
        max_diff = float((recompute - torch.stack(step_logits)).abs().max())
        steps = [_step_record(l) for l in step_logits]
        case["first_step_logits"] = [round(float(v), 4) for v in step_logits[0].tolist()]
        first_eos = next((i for i, t in enumerate(generated) if t in eos), None)
        cases.append(dict(case, output_ids=generated,
                          output_text=tok.decode(generated, skip_special_tokens=False),
                          first_eos_step=first_eos, min_margin=min(s["margin"] for s in steps),
                          recompute_agrees=agrees, recompute_max_abs_diff=round(max_diff, 6),
                          steps=steps))
    return {
        "format": "hyllm-goldens/1",
        "model_dir": "models/hyllm-tiny",
        "reference": {
            "library": f"transformers {transformers_version}, torch {torch_version}",
            "class": "Qwen3_5ForConditionalGeneration",
            "weights": "checkpoint tensors (bf16; A_log and GDN norm fp32) loaded as fp32",
            "compute": "fp32 on CPU, default (sdpa) attention, torch GDN fallback",
            "decode": f"greedy argmax over raw logits, {NEW_TOKENS} new tokens, EOS not "
                      "stopping, prompt prefilled in one forward then one token a step "
                      "with the cache; position ids 0..n-1",
        },
        "fields": {
            "prompt_ids": "input token ids (chat prompts rendered by chat_template.jinja "
                          "with add_generation_prompt=true)",
            "output_ids": "greedy tokens",
            "steps[i]": "id/logit/logprob of output token i, runner-up top2_id/top2_logit, "
                        "margin = logit - top2_logit, top5 [[id, logit], ...]",
            "min_margin": "smallest margin of the case: below ~1e-3 an engine may "
                          "legitimately pick the runner-up",
            "first_eos_step": "index of the first <|im_end|>/<|endoftext|> in output_ids",
            "recompute_max_abs_diff": "max |logit| difference between cached decode and "
                                      "a full recompute",
        },
        "cases": cases,
    }


FP32_MIN_MARGIN_THRESHOLD = 0.01
FP32_RECOMPUTE_FACTOR = 20


def leading_run(margins, threshold):
    for i, m in enumerate(margins):
        if m < threshold:
            return i
    return len(margins)


def team_format(record):
    """The record in the schema of tools/goldens/make_goldens.py (format 1):
    per case prompt_ids, output_ids, margins, top_logits, recompute_max_abs_diff,
    comparable_steps; plus this model's extras (name, kind, texts, logprobs).
    The bf16 thresholds of that schema need a bf16 run of the reference, which
    this generator does not make: they are null."""
    cases = []
    for c in record["cases"]:
        case = {
            "name": c["name"], "kind": c["kind"], "prompt_text": c["prompt_text"],
            "prompt_ids": c["prompt_ids"], "output_ids": c["output_ids"],
            "output_text": c["output_text"],
            "margins": [s["margin"] for s in c["steps"]],
            "top_logits": [s["top5"] for s in c["steps"]],
            "logprobs": [s["logprob"] for s in c["steps"]],
            "first_eos_step": c["first_eos_step"],
            "recompute_max_abs_diff": c["recompute_max_abs_diff"],
        }
        for key in ("messages", "enable_thinking", "first_step_logits"):
            if key in c:
                case[key] = c[key]
        cases.append(case)
    threshold = max(FP32_MIN_MARGIN_THRESHOLD, FP32_RECOMPUTE_FACTOR *
                    max(c["recompute_max_abs_diff"] for c in cases))
    for case in cases:
        case["comparable_steps"] = leading_run(case["margins"], threshold)
    ref = record["reference"]
    return {
        "format": 1,
        "generator": "tools/train_default_model/goldens.py",
        "model": "hyllm-tiny",
        "model_dir": record["model_dir"],
        "description": "the trained default model (Qwen3.5 architecture, nested "
                       "ForConditionalGeneration, tied embeddings, 6 GDN + 2 gated "
                       "attention layers, GDN value/key head ratio 2); completion and "
                       "ChatML prompts, one of 300 tokens",
        "reference": {"library": ref["library"], "class": ref["class"],
                      "weights": ref["weights"]},
        "compute": ref["compute"] + "; " + ref["decode"],
        "checks": {"recompute_agrees_with_cache": all(c["recompute_agrees"]
                                                       for c in record["cases"])},
        "margin_threshold": round(threshold, 5),
        "margin_threshold_rule": "for implementations with fp32 activations: max(%g, %g x "
                                 "the largest recompute_max_abs_diff)"
                                 % (FP32_MIN_MARGIN_THRESHOLD, FP32_RECOMPUTE_FACTOR),
        "bf16_margin_threshold": None,
        "bf16_margin_threshold_rule": "not measured for this model: compare bf16 "
                                      "implementations teacher-forced on steps with a "
                                      "large margin",
        "compare_rule": "greedy tokens must equal output_ids up to the first step whose "
                        "margin is below the threshold (comparable_steps)",
        "cases": cases,
    }
