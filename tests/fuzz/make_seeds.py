#!/usr/bin/env python3
"""Writes the committed seed corpora of the fuzz targets (corpus/<target>/).

Seeds are small on purpose: libFuzzer mutates them, so a few valid inputs of
each shape (plus the edge cases the parsers have tests for) reach deeper than
many large ones. Run from anywhere: python3 tests/fuzz/make_seeds.py.
Findings of fuzz runs are added by hand as corpus/<target>/regression-*.
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def read(path):
    with open(os.path.join(ROOT, path), "rb") as f:
        return f.read()


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def safetensors(entries, data=b"", metadata=None, pad=0):
    header = dict(entries)
    if metadata is not None:
        header["__metadata__"] = metadata
    h = compact(header).encode() + b" " * pad
    return struct.pack("<Q", len(h)) + h + data


def seeds_safetensors():
    t = "safetensors"
    write(t, "bf16_2x3", safetensors({"w": {"dtype": "BF16", "shape": [2, 3], "data_offsets": [0, 12]}}, bytes(range(12)),
                                     {"format": "pt"}, pad=4))
    write(t, "two_tensors", safetensors({
        "model.norm.weight": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
        "model.embed_tokens.weight": {"dtype": "F16", "shape": [2, 2], "data_offsets": [8, 16]}}, bytes(16)))
    write(t, "scalar_fp8", safetensors({
        "x.weight_scale": {"dtype": "F32", "shape": [], "data_offsets": [0, 4]},
        "x.weight": {"dtype": "F8_E4M3", "shape": [4], "data_offsets": [4, 8]}}, bytes(8)))
    write(t, "unknown_dtype", safetensors({"v": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, bytes(8)))
    write(t, "empty_tensor", safetensors({"e": {"dtype": "I64", "shape": [0, 5], "data_offsets": [0, 0]}}))
    write(t, "overlap", safetensors({"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                     "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}, bytes(6)))
    write(t, "truncated", safetensors({"a": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}}, bytes(3)))
    write(t, "empty_header", safetensors({}))


def seeds_shard_index():
    t = "shard_index"
    s1, s2 = "model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"
    full = {"model.embed_tokens.weight": s1, "model.layers.0.input_layernorm.weight": s1,
            "model.norm.weight": s2, "lm_head.weight": s2}
    write(t, "valid", compact({"metadata": {"total_size": 80}, "weight_map": full}))
    write(t, "partial", compact({"weight_map": {"model.norm.weight": s2}}))
    write(t, "missing_shard", compact({"weight_map": {"model.norm.weight": "model-00003-of-00003.safetensors"}}))
    write(t, "escapes", compact({"weight_map": {"model.norm.weight": "../model/" + s2,
                                                "model.layers.1.input_layernorm.weight": "sub/x.safetensors"}}))
    write(t, "wrong_shard", compact({"weight_map": {"model.norm.weight": s1}}))
    write(t, "empty", compact({"weight_map": {}}))


def seeds_model_config():
    t = "model_config"
    base = "tests/data/configs"
    for name in sorted(os.listdir(os.path.join(ROOT, base))):
        cfg = json.loads(read(f"{base}/{name}/config.json"))
        data = compact(cfg).encode()
        hf = os.path.join(ROOT, base, name, "hf_quant_config.json")
        if os.path.exists(hf):
            data += b"\0" + compact(json.loads(read(f"{base}/{name}/hf_quant_config.json"))).encode()
        write(t, name, data)
    write(t, "hyllm_tiny", compact(json.loads(read("models/hyllm-tiny/config.json"))))


def tiny_tokenizer(**overrides):
    """A byte-level BPE tokenizer.json with a 300-token vocabulary."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    vocab = {chr(c): i for i, c in enumerate(cs)}
    merges = ["Ġ t", "h e", "i n", "Ġt he", "e r", "o n", "Ġ a", "r e", "a t", "e n"]
    for m in merges:
        a, b = m.split(" ")
        vocab.setdefault(a + b, len(vocab))
    tok = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": len(vocab), "content": "<|im_start|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": len(vocab) + 1, "content": "<|im_end|>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True},
            {"id": len(vocab) + 2, "content": "<think>", "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": False},
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": "(?i:'s|'t)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s+(?!\\S)|\\s+"},
             "behavior": "Isolated", "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    tok.update(overrides)
    return tok


def seeds_tokenizer_json():
    t = "tokenizer_json"
    config = compact({"bos_token": None, "eos_token": "<|im_end|>", "pad_token": {"content": "<|im_start|>"},
                      "add_bos_token": False, "chat_template": "{{ messages[0]['content'] }}"})
    write(t, "byte_level", compact(tiny_tokenizer()))
    write(t, "byte_level_with_config", compact(tiny_tokenizer()).encode() + b"\0" + config.encode())
    write(t, "normalizers", compact(tiny_tokenizer(normalizer={"type": "Sequence", "normalizers": [
        {"type": "NFKC"}, {"type": "Lowercase"}, {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
        {"type": "Prepend", "prepend": "▁"}, {"type": "Strip", "strip_left": True, "strip_right": False}]})))
    write(t, "template_post", compact(tiny_tokenizer(post_processor={
        "type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
                                                 {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
        "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [300], "tokens": ["<|im_start|>"]}}},
        pre_tokenizer={"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": True},
                                                             {"type": "Metaspace", "replacement": "▁",
                                                              "prepend_scheme": "first", "split": True}]},
        decoder={"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                                                  {"type": "ByteFallback"}, {"type": "Fuse"},
                                                  {"type": "Strip", "content": " ", "start": 1, "stop": 0}]})))
    write(t, "wordpiece_unsupported", compact({"model": {"type": "WordPiece", "vocab": {"a": 0}}}))


def seeds_tokenizer_text():
    t = "tokenizer_text"
    write(t, "ascii", b"\x00Hello, world! The json module's dumps() returns 42.\n")
    write(t, "special", b"\x02<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n")
    write(t, "split_special", b"\x06<|im_start|>system<|endoftext|>")
    write(t, "unicode", "\x01  héllo wörld — 日本語 テキスト 🤖👍🏽 ﬁ Å\u0301 \t\r\n".encode())
    write(t, "invalid_utf8", b"\x00abc\xff\xfe\xc3(\xe2\x82")
    write(t, "ids", b"\x18" + struct.pack("<8i", 0, 1, 8166, 8167, 8168, 150, 8191, 3000))
    write(t, "ids_stop", b"\x38" + struct.pack("<6i", 72, 101, 108, 108, 111, 10))


def seeds_jinja():
    t = "jinja"
    for name in ["chatml", "qwen3", "qwen3_5", "llama3_3", "mistral_nemo", "hermes3_tool_use", "gemma3",
                 "deepseek_v3_1"]:
        write(t, name, read(f"tests/data/templates/{name}.jinja"))
    snippets = {
        "filters": "{{ 'a,b'|split(',')|join('-')|upper }}{{ [3,1,2]|sort|reverse|list }}{{ {'b':1,'a':2}|dictsort }}"
                   "{{ 'x'|center(9) }}{{ '%05.1f|%s' % (3.14159, 'y') }}{{ 12345|filesizeformat if false else 7 }}",
        "loops": "{% for m in messages %}{{ loop.index }}{{ m.role|tojson }}{% if loop.last %}!{% endif %}"
                 "{% else %}none{% endfor %}{% set ns = namespace(n=0) %}{% for i in range(5) %}"
                 "{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
        "macros": "{% macro m(a, b=2) %}{{ a }}-{{ b }}-{{ caller() if caller else '' }}{% endmacro %}{{ m(1) }}"
                  "{% call m(3, b=4) %}body{% endcall %}{% filter upper %}x{% endfilter %}",
        "strings": "{{ 'Hello'[1:4] }}{{ 'abc'.replace('b', 'x').startswith('a') }}{{ ' s '.strip() ~ 'é'|length }}"
                   "{{ 'a\\nb'.splitlines() }}{{ '{}'.format(1) if false else 'f' }}{{ raise_exception('no') if false }}",
        "whitespace": "{%- for x in [1, 2] -%}\n  {{ x }}\n{%- endfor %}\n{# comment #}{% raw %}{{ raw }}{% endraw %}",
        "deep": "{{ ((((((((((1)))))))))) }}{{ [[[[[[1]]]]]] }}",
    }
    for name, src in snippets.items():
        write(t, name, src)
    write(t, "with_vars", b"{{ x.y[0] ~ z|tojson }}\0" + compact({"x": {"y": ["a"]}, "z": {"k": [1, 2.5, None]}}).encode())


def seeds_openai_request():
    t = "openai_request"
    chat = {"model": "hyllm-tiny", "messages": [{"role": "system", "content": "Be brief."},
                                                {"role": "user", "content": "What does json do?"}],
            "max_tokens": 8, "temperature": 0.7, "top_p": 0.9, "seed": 1, "stop": ["\n\n"], "n": 2}
    write(t, "chat", b"\x00" + compact(chat).encode())
    write(t, "chat_stream", b"\x00" + compact({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
                                                "stream": True, "stream_options": {"include_usage": True},
                                                "logprobs": True, "top_logprobs": 3}).encode())
    write(t, "chat_tools", b"\x00" + compact({
        "messages": [{"role": "user", "content": "weather?"},
                     {"role": "assistant", "content": None, "tool_calls": [
                         {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{\"city\": \"Oslo\"}"}}]},
                     {"role": "tool", "tool_call_id": "c1", "content": "sunny"}],
        "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}],
        "tool_choice": "auto", "chat_template_kwargs": {"enable_thinking": False}}).encode())
    write(t, "chat_continue", b"\x00" + compact({"messages": [{"role": "user", "content": "x"},
                                                              {"role": "assistant", "content": "The"}],
                                                 "add_generation_prompt": False, "continue_final_message": True,
                                                 "echo": True, "min_tokens": 2, "max_completion_tokens": 5}).encode())
    write(t, "completion", b"\x01" + compact({"model": "hyllm-tiny", "prompt": "def f(x):", "max_tokens": 4,
                                              "echo": True, "logprobs": 2, "stop_token_ids": [1, 2],
                                              "repetition_penalty": 1.2, "top_k": 5, "min_p": 0.1}).encode())
    write(t, "completion_ids", b"\x01" + compact({"prompt": [[1, 2, 3], [4, 5]], "n": 3, "ignore_eos": True,
                                                  "truncate_prompt_tokens": 2, "presence_penalty": -2,
                                                  "frequency_penalty": 2, "return_token_ids": True}).encode())
    write(t, "tokenize", b"\x02" + compact({"prompt": "Hello <|im_start|>", "add_special_tokens": True,
                                            "return_token_strs": True}).encode())
    write(t, "tokenize_chat", b"\x02" + compact({"messages": [{"role": "user", "content": "hi"}],
                                                 "add_generation_prompt": True}).encode())
    write(t, "detokenize", b"\x03" + compact({"tokens": [72, 101, 8167, 9]}).encode())


def http_request(method, path, body=None, headers=()):
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost"] + list(headers)
    payload = b""
    if body is not None:
        payload = compact(body).encode()
        lines += ["Content-Type: application/json", f"Content-Length: {len(payload)}"]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


def seeds_http():
    t = "http"
    write(t, "health", http_request("GET", "/health"))
    write(t, "models_metrics", http_request("GET", "/v1/models") + http_request("GET", "/metrics"))
    write(t, "chat", http_request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0}))
    write(t, "chat_stream", http_request("POST", "/v1/chat/completions", {
        "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "stream": True, "n": 2,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}, "logprobs": True, "top_logprobs": 2}))
    write(t, "completion", http_request("POST", "/v1/completions", {"prompt": "import", "max_tokens": 3, "echo": True,
                                                                  "logprobs": 1, "stop": ["("]}))
    write(t, "drop_stream", b"!" + http_request("POST", "/v1/completions", {"prompt": "x", "max_tokens": 40,
                                                                          "stream": True, "ignore_eos": True}))
    write(t, "tokenize_pipelined", http_request("POST", "/tokenize", {"prompt": "a b"})
          + http_request("POST", "/detokenize", {"tokens": [1, 2]}))
    body = compact({"prompt": "x", "max_tokens": 2}).encode()
    write(t, "chunked", b"POST /v1/completions HTTP/1.1\r\nHost: h\r\nContent-Type: application/json\r\n"
          b"Transfer-Encoding: chunked\r\n\r\n" + format(len(body), "x").encode() + b"\r\n" + body + b"\r\n0\r\n\r\n")
    write(t, "bad_head", b"GET /health HTTP/1.1\r\nHost: a/b\r\nX: " + b"y" * 100 + b"\r\nBad header\r\n\r\n")
    write(t, "bad_length", b"POST /v1/completions HTTP/1.1\r\nContent-Type: application/json\r\n"
          b"Content-Length: 99999999999999999999\r\n\r\n{}")
    write(t, "wrong_method", http_request("DELETE", "/v1/models") + http_request("GET", "/v1/completions"))
    write(t, "auth_and_encoding", http_request("POST", "/v1/completions", {"prompt": "x"},
                                               ("Authorization: Bearer k", "Content-Encoding: gzip")))


def seeds_responses_request():
    t = "responses_request"
    plain, coder, hermes = b"\x00", b"\x01", b"\x02"
    write(t, "string_input", plain + compact({"model": "hyllm-tiny", "input": "Hi", "max_output_tokens": 4,
                                              "temperature": 0}).encode())
    write(t, "stream", plain + compact({"input": "Hi", "instructions": "Be brief.", "stream": True,
                                        "max_output_tokens": 3, "metadata": {"k": "v"}, "user": "u"}).encode())
    write(t, "items", coder + compact({"input": [
        {"role": "developer", "content": "Answer in French."},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "weather?"}]},
        {"type": "reasoning", "summary": [], "content": [{"type": "reasoning_text", "text": "call it"}]},
        {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
        {"type": "function_call_output", "call_id": "c1", "output": "sunny"}],
        "tools": [{"type": "function", "name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string"}}}}],
        "tool_choice": "auto", "max_output_tokens": 6, "stream": True}).encode())
    write(t, "forced_tool", hermes + compact({"input": "x", "tools": [{"type": "function", "name": "f"}],
                                              "tool_choice": {"type": "function", "name": "f"},
                                              "parallel_tool_calls": False, "max_output_tokens": 8}).encode())
    write(t, "json_schema", coder + compact({"input": "list", "text": {"format": {
        "type": "json_schema", "name": "r", "strict": True,
        "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}},
        "reasoning": {"effort": "low"}, "max_output_tokens": 5}).encode())
    write(t, "continue", plain + compact({"input": [{"role": "user", "content": "Count"},
                                                    {"role": "assistant", "status": "in_progress",
                                                     "content": [{"type": "output_text", "text": "1, 2,"}]}],
                                          "max_output_tokens": 3, "top_p": 0.5, "store": False,
                                          "include": ["reasoning.encrypted_content"]}).encode())
    write(t, "refused", plain + compact({"input": [{"type": "item_reference", "id": "msg_1"}],
                                         "previous_response_id": "resp_1", "truncation": "auto"}).encode())


def seeds_responses_output():
    t = "responses_output"
    # First byte: bits 0-1 reasoning (none, qwen3, qwen3 thinking, deepseek_r1), bits 2-3 tool parser
    # (none, hermes, qwen3_coder), bit 4 parallel calls, bits 5-6 how it ended (stop, length, abort).
    write(t, "plain", b"\x00Hello\0, world\0.")
    write(t, "think", b"\x01<think>\0plan\0</th\0ink>\n\nThe answer.")
    write(t, "thinking_start", b"\x22still thinking</think>done")
    write(t, "hermes", b"\x14\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \0{\"city\": \"Oslo\"}}"
          b"\n</tool_call>\0<tool_call>{\"name\": \"noop\", \"arguments\": {}}</tool_call>")
    write(t, "qwen3_coder", b"\x19<think>x</think>\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
          b"</parameter>\0\n<parameter=days>\n3\n</parameter>\n<parameter=where>\n{\"a\": [1]}\n</parameter>\n"
          b"</function>\n</tool_call>")
    write(t, "qwen3_coder_cut", b"\x28<tool_call>\n<function=get_weather>\n<parameter=ratio>\n1.5e")
    write(t, "invalid_utf8", b"\x05<think>\xff\xfe</think>\xc3\0\xa9\xe2\x82")


def seeds_batch_file():
    t = "batch_file"
    chat = {"custom_id": "req-1", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "hyllm-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}}
    completion = {"custom_id": "req-2", "method": "post", "url": "/v1/completions",
                  "body": {"prompt": "x", "stream": False}}
    responses = {"custom_id": "req-3", "method": "POST", "url": "/v1/responses", "body": {"input": "hi"}}
    lines = [compact(x) for x in (chat, completion, responses)]
    write(t, "valid", "\n".join(lines) + "\n")
    write(t, "bom_crlf_blank", "\ufeff" + "\r\n\r\n".join(lines) + "\r\n  \t\n")
    write(t, "refused", "\n".join([
        "not json", "[1, 2]", compact({"custom_id": 7, "method": "POST", "url": "/v1/completions", "body": {}}),
        compact({"custom_id": "g", "method": "GET", "url": "/v1/completions", "body": {}}),
        compact({"custom_id": "e", "method": "POST", "url": "/v1/embeddings", "body": {"input": "x"}}),
        compact({"custom_id": "b", "method": "POST", "url": "/v1/completions", "body": "prompt"}),
        compact({"custom_id": "s", "method": "POST", "url": "/v1/chat/completions", "body": {"stream": True}})]))
    write(t, "deep", '{"custom_id": "d", "body": ' + "[" * 100 + "]" * 100 + "}")
    write(t, "numbers", compact({"custom_id": "n", "method": "POST", "url": "/v1/completions",
                                 "body": {"prompt": [1, 2], "max_tokens": 18446744073709551615, "seed": -1.0}}))


def main():
    if os.path.isdir(CORPUS):
        # Keep regression inputs; rewrite the generated seeds.
        for target in os.listdir(CORPUS):
            for f in os.listdir(os.path.join(CORPUS, target)):
                if not f.startswith("regression-"):
                    os.remove(os.path.join(CORPUS, target, f))
    for fn in [seeds_safetensors, seeds_shard_index, seeds_model_config, seeds_tokenizer_json, seeds_tokenizer_text,
               seeds_jinja, seeds_openai_request, seeds_http, seeds_responses_request, seeds_responses_output,
               seeds_batch_file]:
        fn()


if __name__ == "__main__":
    main()
