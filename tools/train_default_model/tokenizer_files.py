"""The hyllm-tiny tokenizer: a byte-level BPE with Qwen3.5's pipeline.

Normaliser NFC; pre-tokenizer = Split(Qwen3.5 regex, isolated) then
ByteLevel(add_prefix_space=false, use_regex=false); ByteLevel decoder and
post-processor; Qwen3.5's added tokens in Qwen3.5's order right after the BPE
vocabulary (so "<|endoftext|>" is the first added id, as in Qwen3.5).
"""

import json

# Qwen3.5's pre-tokenizer regex (QWEN35.md section 6).
PRETOKENIZE_REGEX = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+"""
                     r"""|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""")

# (content, special) in Qwen3.5's id order: 248044 + index there.
ADDED_TOKENS = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True),
    ("<|box_start|>", True), ("<|box_end|>", True),
    ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False),
    ("<|fim_prefix|>", False), ("<|fim_middle|>", False), ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
    ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]


def build_empty():
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers
    from tokenizers import pre_tokenizers, processors
    tok = Tokenizer(models.BPE(unk_token=None, fuse_unk=False, byte_fallback=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(PRETOKENIZE_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False,
                                              use_regex=False)
    return tok


def train_tokenizer(texts, vocab_total):
    from tokenizers import AddedToken, pre_tokenizers, trainers
    tok = build_empty()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_total - len(ADDED_TOKENS), min_frequency=2, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(texts, trainer=trainer, length=len(texts))
    base = tok.get_vocab_size()
    if base != vocab_total - len(ADDED_TOKENS):
        raise RuntimeError(f"BPE vocabulary has {base} tokens, wanted "
                           f"{vocab_total - len(ADDED_TOKENS)}")
    for index, (content, special) in enumerate(ADDED_TOKENS):
        token = AddedToken(content, special=special, normalized=False, lstrip=False,
                           rstrip=False, single_word=False)
        if special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
        if tok.token_to_id(content) != base + index:
            raise RuntimeError(f"{content} got id {tok.token_to_id(content)}")
    return tok


def special_ids(tok):
    return {content: tok.token_to_id(content) for content, _ in ADDED_TOKENS}


def tokenizer_config(tok, tokenizer_class, max_length):
    decoder = {}
    for content, special in ADDED_TOKENS:
        decoder[str(tok.token_to_id(content))] = {
            "content": content, "lstrip": False, "normalized": False, "rstrip": False,
            "single_word": False, "special": special}
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": max_length,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": tokenizer_class,
        "unk_token": None,
    }


def write(tok, out_dir, chat_template, tokenizer_class, max_length):
    out_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(out_dir / "tokenizer.json"))
    (out_dir / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(tok, tokenizer_class, max_length), indent=2) + "\n")
    (out_dir / "chat_template.jinja").write_text(chat_template)
