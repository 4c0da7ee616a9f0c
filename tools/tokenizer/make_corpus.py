#!/usr/bin/env python3
"""Builds the tokenizer conformance corpus: tests/data/tokenizer/corpus.jsonl.xz.

Real text from Debian packages installed on the development machine (Python
docs, gettext translations in ~50 languages, translated man pages, source
code, Unicode data files) plus hand-made edge cases. The output is committed,
so CI does not need these packages. Deterministic: same inputs, same file.

Each line is {"name": ..., "text": ..., "edge": bool}; edge cases are also
encoded with split_special_tokens and add_special_tokens variants.
"""
import glob
import gzip
import json
import lzma
import os
import struct
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "tests/data/tokenizer/corpus.jsonl.xz")
DOC_CHARS = 6000  # split long sources into documents of about this size


def chunks(name, text, limit):
    """Documents of about DOC_CHARS characters, cut at line ends, up to limit chars."""
    text = text[:limit]
    docs, start, k = [], 0, 0
    while start < len(text):
        end = min(len(text), start + DOC_CHARS)
        nl = text.rfind("\n", start + DOC_CHARS // 2, end)
        if end < len(text) and nl > 0:
            end = nl + 1
        docs.append({"name": f"{name}#{k}", "text": text[start:end], "edge": False})
        start, k = end, k + 1
    return docs


def read_mo(path):
    """Translated strings of a gettext catalog (msgstr values)."""
    data = open(path, "rb").read()
    magic = struct.unpack("<I", data[:4])[0]
    endian = "<" if magic == 0x950412DE else ">"
    _, n, _orig, trans = struct.unpack(endian + "4I", data[4:20])
    out = []
    for i in range(n):
        length, offset = struct.unpack(endian + "2I", data[trans + 8 * i: trans + 8 * i + 8])
        s = data[offset: offset + length]
        for part in s.split(b"\0"):
            try:
                t = part.decode("utf-8")
            except UnicodeDecodeError:
                continue
            if t and not t.startswith("Project-Id-Version"):
                out.append(t)
    return out


def english_docs():
    files = sorted(glob.glob("/usr/share/doc/python3.11/html/_sources/**/*.rst.txt", recursive=True))
    text = "".join(open(f, encoding="utf-8").read() for f in files[::7])
    return chunks("python-docs", text, 300_000)


LANGS = ["zh_CN", "zh_TW", "ja", "ko", "ru", "uk", "bg", "el", "ar", "he", "fa", "hi", "bn",
         "ta", "te", "ml", "kn", "gu", "pa", "mr", "ne", "si", "th", "lo", "km", "my", "ka", "hy",
         "am", "ug", "kk", "mn", "vi", "tr", "pl", "cs", "de", "fr", "es", "pt_BR", "it", "sv",
         "fi", "hu", "ro", "eo", "ga", "cy", "is", "lt", "lv", "et", "sr", "be", "az", "uz"]


def translation_docs():
    docs = []
    for lang in LANGS:
        files = sorted(glob.glob(f"/usr/share/locale/{lang}/LC_MESSAGES/*.mo"))
        strings = []
        for f in files:
            try:
                strings.extend(read_mo(f))
            except (struct.error, ValueError):
                continue
        if strings:
            docs.extend(chunks(f"gettext-{lang}", "\n".join(strings), 4_500))
    return docs


def man_docs():
    docs = []
    for lang in ["zh_CN", "zh_TW", "ja", "ko", "ru", "uk", "de", "fr", "pl", "tr"]:
        files = sorted(glob.glob(f"/usr/share/man/{lang}/man1/*.gz"))[:6]
        text = ""
        for f in files:
            try:
                text += gzip.open(f).read().decode("utf-8")
            except (UnicodeDecodeError, OSError):
                continue
        if text:
            docs.extend(chunks(f"man-{lang}", text, 8_000))
    return docs


def code_docs():
    sources = [
        ("cpp", sorted(glob.glob("/usr/include/c++/12/bits/*.h"))[:40:4]),
        ("python", sorted(glob.glob("/usr/lib/python3.11/*.py"))[:60:6]),
        ("shell", sorted(glob.glob("/usr/share/doc/*/examples/*.sh"))[:5]),
    ]
    docs = []
    for name, files in sources:
        text = ""
        for f in files:
            try:
                text += open(f, encoding="utf-8").read()
            except (UnicodeDecodeError, OSError):
                continue
        docs.extend(chunks(f"code-{name}", text, 50_000))
    return docs


def unicode_data_docs():
    docs = []
    for f in ["/usr/share/perl/5.36/unicore/NamedSequences.txt",
              "/usr/share/perl/5.36/unicore/SpecialCasing.txt"]:
        if os.path.exists(f):
            docs.extend(chunks("unicore-" + os.path.basename(f), open(f, encoding="utf-8").read(), 40_000))
    # The named sequences and case mappings as the characters themselves.
    seq_text = []
    f = "/usr/share/perl/5.36/unicore/NamedSequences.txt"
    if os.path.exists(f):
        for line in open(f, encoding="utf-8"):
            if ";" in line and not line.startswith("#"):
                name, cps = line.split(";", 1)
                seq_text.append(name.strip().lower() + ": " + "".join(chr(int(c, 16)) for c in cps.split()))
    docs.extend(chunks("named-sequences-chars", "\n".join(seq_text), 30_000))
    return docs


def nfd_docs(docs):
    """Decomposed copies of accented-script text: NFC tokenizers must compose them."""
    out = []
    for d in docs:
        if d["name"].split("#")[0] in ("gettext-vi", "gettext-fr", "gettext-ko", "gettext-el", "gettext-hi"):
            if d["name"].endswith("#0"):
                out.append({"name": d["name"] + "-NFD", "text": unicodedata.normalize("NFD", d["text"]),
                            "edge": False})
    return out


def emoji_text():
    parts = []
    for cp in list(range(0x1F300, 0x1F650, 3)) + list(range(0x1F900, 0x1FA00, 5)):
        parts.append(chr(cp))
    zwj = ["👨‍👩‍👧‍👦", "👩🏽‍💻", "🏳️‍🌈", "🧑🏿‍🤝‍🧑🏻", "❤️‍🔥", "👁️‍🗨️"]
    tones = ["👋" + chr(0x1F3FB + i) for i in range(5)]
    flags = ["🇫🇷", "🇯🇵", "🇺🇸", "🇧🇷", "🇪🇺", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]
    keycaps = [c + "\ufe0f\u20e3" for c in "0123456789#*"]
    return ("".join(parts) + "\n" + " ".join(zwj + tones + flags + keycaps) +
            "\nI love 🍕 and 🍣!!! 😂😂😂 so good👍🏼. Emoji at end 🎉")


def edge_cases():
    e = []
    add = lambda name, text: e.append({"name": "edge-" + name, "text": text, "edge": True})
    add("empty", "")
    add("one-space", " ")
    add("special-tokens", "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHi!<|im_end|><|endoftext|>")
    add("special-mid-word", "abc<|im_start|>def ghi<|im_end|>jkl<|endoftext|>mno")
    add("special-partial", "<|im_sta <|im_start <|im_start| <im_start|> <|IM_START|> <<|im_end|>|> <|<|endoftext|>|>")
    add("special-adjacent", "<|im_start|><|im_start|><|im_end|><|im_end|>  <|im_start|>  x  <|im_end|>  ")
    add("llama-specials", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>")
    add("tool-tags", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call><tool_response>ok</tool_response>")
    add("contractions", "I'm you're he's she'll we've they'd it's DON'T WE'LL IT'S I'M YOU'RE 'S 'T 'RE 'VE 'M 'LL 'D 's 'll ſ 'ſ 'ß")
    add("contractions-mixed", "It'S We'Ll They'Re don'T can'T 'Ve 'm 'D rock'n'roll '''' ' s")
    add("digits", "0 12 345 6789 1234567890123456789012345678901234567890 3.14159265358979 1,000,000 ١٢٣٤ ٤٥٦ ０１２３ ²³ ½ Ⅻ 𝟘𝟙𝟚")
    add("long-digits", "9" * 5000)
    add("whitespace-runs", "a  b   c    d\t\te\t \t f\n\ng\n\n\nh \n \n i\r\nj\r\n\r\nk\r\r\rl      \n      m" + " " * 300 + "n" + "\t" * 100 + "o\n" * 3)
    add("crlf-runs", "line1\r\nline2\r\n\r\n\r\nline3\r\n" * 20 + "\r\n" * 50 + "end  \r\n  ")
    add("unicode-spaces", "a\u00a0b\u1680c\u2000d\u2001e\u2002f\u200ag\u2028h\u2029i\u202fj\u205fk\u3000l\u180em\u200bn\ufeffo\u0085p\u000bq\u000cr")
    add("leading-trailing-space", "   leading and trailing   ")
    add("only-newlines", "\n\n\n\n")
    add("combining", "e\u0301 a\u0300 n\u0303 o\u0308 \u0915\u093f \u0e01\u0e34 a\u0301\u0302\u0303\u0304 Z\u0351\u0352\u0353\u0354\u0355 \u1100\u1161\u11a8 \u00e9\u0301")
    add("zalgo", "Z̷̨̛͓̗̜̦͈̤̰̀͌̓̈́a̸̢̛̯̪͎̫͕͐̔͒̑̒l̵̨̜̜̱̟̏̆̔͂g̶̢̛̗͕̯̒̾͋̍o̷̧͇̺̟̓̐̀")
    add("nfc-changes", "\u212b \u2126 \u1e9b\u0323 \u0041\u030a \u00c5 \ufb01 \u2460 \uff21 \u1100\u1161 \u0958")
    add("case-specials", "İstanbul ıi ß ẞ ǅ ǈ Σίσυφος ΣΑΣ K \u212a Ω \u2126 ﬃ")
    add("cjk", "中文文本，包含标点符号。日本語のテキスト、カタカナとひらがな。한국어 텍스트입니다. 繁體中文測試！")
    add("mixed-scripts", "Hello世界Привет мир مرحبا بالعالم שלום עולם नमस्ते दुनिया สวัสดีชาวโลก ሰላም ልዑል ᏣᎳᎩ")
    add("rtl-controls", "\u202eevil\u202c \u200fRTL\u200e \u2066iso\u2069")
    add("control-chars", "".join(chr(c) for c in range(0, 32)) + "\x7f\u0080\u009f")
    add("private-use-noncharacters", "\ue000\uf8ff\U000f0000\U0010fffd \ufffe\uffff\U0001fffe \ufffd replacement")
    add("astral", "𝕳𝖊𝖑𝖑𝖔 𝓦𝓸𝓻𝓵𝓭 𐍈 𒀀 𓀀 🀄 𝄞 \U00020000\U0002a6d6")
    add("emoji", emoji_text())
    add("long-word", "a" * 3000 + "b" * 2000 + "ab" * 1000)
    add("long-letters-mixed", "".join(chr(0x61 + (i * 7) % 26) for i in range(8000)))
    add("long-cjk-run", "".join(chr(0x4E00 + (i * 37) % 20000) for i in range(4000)))
    add("long-punct", "!?" * 2000 + "=" * 1000 + "-" * 3000 + "." * 500)
    add("repeated-space-word", ("word " * 500) + (" word" * 500))
    add("code-like", "def f(x):\n    return x**2  # comment\n\nif __name__ == '__main__':\n\tprint(f(3))\n}}}}]]]];;;\n  \t  \n")
    add("json", json.dumps({"key": "value", "nested": {"list": [1, 2.5, None, True], "ünï": "çødé"}}, ensure_ascii=False, indent=2))
    add("url-email", "https://example.com/path?q=1&r=2#frag user@example.org C:\\Windows\\System32 ../../etc/passwd")
    add("apostrophes", "‘quoted’ “double” ’s l’homme it’s I’ll aujourd'hui")
    add("markdown", "# Title\n\n* item **bold** _it_\n\n```python\nprint('x')\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n")
    add("bom-start", "\ufeffStarts with a BOM")
    add("fffd-text", "bad \ufffd\ufffd bytes \ufffd")
    return e


def main():
    docs = []
    docs += english_docs()
    trans = translation_docs()
    docs += trans
    docs += nfd_docs(trans)
    docs += man_docs()
    docs += code_docs()
    docs += unicode_data_docs()
    docs += edge_cases()
    total = sum(len(d["text"].encode("utf-8")) for d in docs)
    lines = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in docs).encode("utf-8")
    data = lzma.compress(lines, preset=9 | lzma.PRESET_EXTREME)
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    open(OUT, "wb").write(data)
    print(f"{len(docs)} documents, {total / 1e6:.2f} MB of UTF-8 text, {len(data) / 1e3:.0f} KB compressed -> {OUT}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
