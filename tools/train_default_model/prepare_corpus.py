#!/usr/bin/env python3
"""Builds the training corpus of hyllm-tiny from the Python 3.11 docs sources.

Input: the reST sources of Debian's python3.11-doc package
(/usr/share/doc/python3.11/html/_sources/**/*.rst.txt, PSF License).
Output directory:
  train_docs.jsonl / valid_docs.jsonl   {"path", "text"}: one cleaned document each
  train_chat.jsonl / valid_chat.jsonl   {"messages": [...]}: synthetic Q&A chats
  manifest.tsv                          sha256, bytes, split, path of every source
  stats.json                            counts
A file is held out for validation when sha256(path) % HOLDOUT_MOD == 0; its
chats are held out with it. Everything is deterministic.

Pure standard library: run it anywhere, then carry the output to the trainer.
"""

import argparse
import hashlib
import json
import random
import re
from pathlib import Path

from rst_text import DIRECTIVE_RE, OPTION_RE, clean_document, clean_inline, collect_titles

DEFAULT_SOURCES = "/usr/share/doc/python3.11/html/_sources"
HOLDOUT_MOD = 40
SEED = 20240611

DEFINITION_KINDS = {
    "function", "method", "class", "exception", "classmethod", "staticmethod",
    "coroutinefunction", "coroutinemethod", "decorator", "abstractmethod",
    "attribute", "data",
}
HEADING_CHARS = set("=-~^\"*#+'`:.")

SYSTEM_PROMPTS = [
    "You are a helpful assistant.",
    "You are hyllm-tiny, a small assistant that answers questions about Python.",
    "Answer questions about Python briefly.",
]

IDENTITY = [
    (["Who are you?", "What are you?", "Introduce yourself.", "What is your name?"],
     "I am hyllm-tiny, a small language model trained by the hyllm project on the "
     "Python 3.11 documentation. I can answer short questions about Python, its "
     "built-in functions and its standard library, but I often make mistakes."),
    (["Hello", "Hi", "Hi!", "Hello!", "Hey", "Good morning", "Hello, how are you?"],
     "Hello! I am hyllm-tiny, a small model trained on the Python documentation. "
     "Ask me about a Python function, module or language feature."),
    (["What can you do?", "How can you help me?", "What do you know?"],
     "I know the Python 3.11 documentation: the tutorial, the language reference "
     "and the standard library. Ask me what a function, class or module does and I "
     "will answer with what the documentation says. I am very small, so check my "
     "answers."),
    (["Thank you", "Thanks!", "Thanks, that helps."],
     "You are welcome! Ask me another question about Python any time."),
]


def sha256_bytes(data):
    return hashlib.sha256(data).hexdigest()


def is_heldout(rel_path):
    return int(sha256_bytes(rel_path.encode()), 16) % HOLDOUT_MOD == 0


def pick(options, key):
    """Deterministic choice among options, keyed by a string."""
    return options[int(sha256_bytes(key.encode())[:8], 16) % len(options)]


def indent_of(line):
    return len(line) - len(line.lstrip(" "))


def body_after(lines, start, indent, signature=True):
    """Dedented body lines (deeper than indent) of a directive or term.

    With signature, first skips continuation signature lines and options."""
    i = start
    if signature:
        while i < len(lines) and lines[i].strip() and indent_of(lines[i]) > indent \
                and not OPTION_RE.match(lines[i]):
            i += 1
        while i < len(lines) and OPTION_RE.match(lines[i]):
            i += 1
    body = []
    while i < len(lines):
        line = lines[i]
        if line.strip() and indent_of(line) <= indent:
            break
        body.append(line)
        i += 1
    base = min((indent_of(l) for l in body if l.strip()), default=0)
    return [l[base:] if l.strip() else "" for l in body]


def blocks(text):
    """Blocks of a cleaned text separated by blank lines: (is_prose, lines)."""
    result, current = [], []
    for line in text.split("\n"):
        if line.strip():
            current.append(line)
        elif current:
            result.append(current)
            current = []
    if current:
        result.append(current)
    return [(indent_of(b[0]) == 0 and not b[0].startswith(">>>"), b) for b in result]


BULLET_RE = re.compile(r"^(\*|-|#\.|\d+\.)\s")


def reflow(lines):
    """Joins a prose block into one line, or one line per list item."""
    if not BULLET_RE.match(lines[0]):
        return " ".join(l.strip() for l in lines)
    items = []
    for line in lines:
        if BULLET_RE.match(line) or not items:
            items.append(line.strip())
        else:
            items[-1] += " " + line.strip()
    return "\n".join(items)


SKIP_PREFIXES = ("New in version", "Changed in version", "Deprecated since",
                 "Note:", "Warning:", "See also:", "CPython implementation detail:",
                 "**Source code:**", "Availability", "Raises an auditing event")


def answer_from(text, min_chars=30):
    """A readable answer: the first prose paragraph (and a little more)."""
    bs = blocks(text)
    for index, (prose, lines) in enumerate(bs):
        para = reflow(lines)
        if not prose or para.startswith(SKIP_PREFIXES):
            continue
        if set(para) <= HEADING_CHARS | {" "}:
            continue
        rest = bs[index + 1:]
        if para.endswith(":"):
            if len(para) >= 10 and rest and not rest[0][0] and len(rest[0][1]) <= 12:
                code = "\n".join(l for l in rest[0][1])
                return para + "\n\n" + code
            continue
        if len(para) < min_chars:
            continue
        if len(para) < 160 and rest and rest[0][0]:
            nxt = reflow(rest[0][1])
            if not nxt.startswith(SKIP_PREFIXES) and not nxt.endswith(":") \
                    and len(nxt) < 600:
                para += "\n\n" + nxt
        return para
    return None


def definition_question(kind, name, key):
    if kind in {"function", "coroutinefunction"}:
        return pick([f"What does {name}() do?", f"What is {name}() used for?",
                     f"Explain the {name}() function.", f"How does {name}() work?"], key)
    if kind == "decorator":
        return pick([f"What does the @{name} decorator do?",
                     f"What is @{name} used for?"], key)
    if kind in {"method", "classmethod", "staticmethod", "coroutinemethod",
                "abstractmethod"}:
        return pick([f"What does the {name}() method do?", f"What does {name}() do?",
                     f"Explain {name}()."], key)
    if kind == "class":
        return pick([f"What is the {name} class?", f"What is {name} in Python?",
                     f"Explain the {name} class."], key)
    if kind == "exception":
        return pick([f"When is {name} raised?", f"What is the {name} exception?"], key)
    return pick([f"What is {name}?", f"What does {name} mean in Python?"], key)


def heading_at(lines, i):
    """Title text if lines[i] is a section title (underlined), else None."""
    if i + 1 >= len(lines):
        return None
    title, under = lines[i].strip(), lines[i + 1].strip()
    if not title or not under or len(set(under)) != 1 or under[0] not in HEADING_CHARS:
        return None
    if len(under) < len(title) or indent_of(lines[i]) > 2 or title[0] in HEADING_CHARS:
        return None
    return title


def section_question(title, key):
    title = clean_inline(title).strip()
    if title.endswith("?"):
        return title
    words = title.split()
    if words and words[0][0].isupper() and not any(c.isupper() for c in words[0][1:]) \
            and words[0] not in {"Python", "I", "Unicode", "Windows", "Unix"}:
        title = words[0].lower() + title[len(words[0]):]
    return pick([f"Tell me about {title}.", f"Explain {title}.",
                 f"What should I know about {title}?"], key)


def extract_chats(rel_path, raw):
    """Question/answer pairs drawn from one source file."""
    lines = raw.replace("\t", "    ").splitlines()
    pairs = []
    module = None
    class_stack = []  # (indent, class name)
    in_glossary = None
    for i, line in enumerate(lines):
        m = DIRECTIVE_RE.match(line)
        if m:
            indent, kind, arg = len(m.group(1)), m.group(2), m.group(3).strip()
            class_stack = [c for c in class_stack if c[0] < indent]
            if kind in {"module", "currentmodule"}:
                module = arg or module
                if kind == "module":
                    synopsis = next((re.sub(r"^\s*:synopsis:\s*", "", l)
                                     for l in lines[i + 1:i + 6]
                                     if l.strip().startswith(":synopsis:")), None)
                    end = i + 1
                    while end < min(len(lines), i + 80):
                        d = DIRECTIVE_RE.match(lines[end])
                        if d and d.group(2) in DEFINITION_KINDS:
                            break
                        end += 1
                    rest = clean_document("\n".join(lines[i + 1:end]))
                    intro = answer_from(rest, min_chars=60)
                    if synopsis or intro:
                        parts = []
                        if synopsis:
                            parts.append(f"The `{arg}` module: "
                                         f"{clean_inline(synopsis).strip().rstrip('.')}.")
                        if intro:
                            parts.append(intro)
                        q = pick([f"What is the {arg} module?",
                                  f"What is the {arg} module for?",
                                  f"What does the {arg} module do?"], rel_path + arg)
                        pairs.append((q, "\n\n".join(parts)))
                continue
            if kind == "glossary":
                in_glossary = indent
                continue
            if kind in DEFINITION_KINDS and arg:
                name = re.split(r"[(\s\[]", arg, maxsplit=1)[0]
                if kind in {"class", "exception"}:
                    class_stack.append((indent, name.split(".")[-1]))
                if kind in {"attribute", "data"} and "." not in name and not module:
                    continue
                qual = name
                if class_stack and kind not in {"class", "exception"} and "." not in name:
                    qual = f"{class_stack[-1][1]}.{name}"
                body = body_after(lines, i + 1, indent)
                answer = answer_from(clean_document("\n".join(body)))
                if answer and (kind not in {"attribute", "data"} or len(answer) > 80):
                    pairs.append((definition_question(kind, qual, rel_path + qual), answer))
            continue
        if in_glossary is not None:
            if line.strip() and indent_of(line) <= in_glossary:
                in_glossary = None
            elif line.strip() and indent_of(line) == in_glossary + 3:
                term = line.strip().replace("``", "`")
                body = body_after(lines, i + 1, in_glossary + 3, signature=False)
                answer = answer_from(clean_document("\n".join(body)), min_chars=20)
                if answer:
                    q = pick([f'What does the term "{term}" mean?', f"What is {term}?",
                              f"Define {term}."], rel_path + term)
                    pairs.append((q, answer))
            continue
        title = heading_at(lines, i)
        top = rel_path.split("/")[0]
        if title and top in {"tutorial", "howto", "faq", "reference", "using",
                             "extending"}:
            end = i + 2
            while end < len(lines) and not heading_at(lines, end):
                end += 1
            answer = answer_from(clean_document("\n".join(lines[i + 2:end])), min_chars=60)
            if answer and len(title) < 80:
                pairs.append((section_question(title, rel_path + title), answer))
    return pairs


def make_chat(pair, rng, extra=None):
    messages = []
    if rng.random() < 0.25:
        messages.append({"role": "system", "content": rng.choice(SYSTEM_PROMPTS)})
    for q, a in ([extra] if extra else []) + [pair]:
        messages.append({"role": "user", "content": q})
        messages.append({"role": "assistant", "content": a})
    return {"messages": messages}


def chats_for(pairs, rng, identity_copies):
    pairs = list(pairs)
    for questions, answer in IDENTITY:
        for q in questions:
            pairs.extend([(q, answer)] * identity_copies)
    rng.shuffle(pairs)
    chats, i = [], 0
    while i < len(pairs):
        if i + 1 < len(pairs) and rng.random() < 0.1:
            chats.append(make_chat(pairs[i + 1], rng, extra=pairs[i]))
            i += 2
        else:
            chats.append(make_chat(pairs[i], rng))
            i += 1
    return chats


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sources", default=DEFAULT_SOURCES)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    src, out = Path(args.sources), Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    files = sorted(p for p in src.rglob("*.rst.txt"))
    for path in files:
        collect_titles(path.relative_to(src).as_posix(), path.read_text("utf-8"))
    docs = {"train": [], "valid": []}
    pairs = {"train": [], "valid": []}
    manifest = ["sha256\tbytes\tsplit\tpath"]
    for path in files:
        rel = path.relative_to(src).as_posix()
        data = path.read_bytes()
        split = "valid" if is_heldout(rel) else "train"
        manifest.append(f"{sha256_bytes(data)}\t{len(data)}\t{split}\t{rel}")
        raw = data.decode("utf-8")
        text = clean_document(raw)
        if text.strip():
            docs[split].append({"path": rel, "text": text})
        pairs[split].extend(extract_chats(rel, raw))
    rng = random.Random(SEED)
    chats = {"train": chats_for(pairs["train"], rng, identity_copies=4),
             "valid": chats_for(pairs["valid"], rng, identity_copies=0)}
    for split in ("train", "valid"):
        write_jsonl(out / f"{split}_docs.jsonl", docs[split])
        write_jsonl(out / f"{split}_chat.jsonl", chats[split])
    (out / "manifest.tsv").write_text("\n".join(manifest) + "\n")
    stats = {
        "source_files": len(files),
        "heldout_files": [d["path"] for d in docs["valid"]],
        "doc_chars": {s: sum(len(d["text"]) for d in docs[s]) for s in docs},
        "qa_pairs": {s: len(pairs[s]) for s in pairs},
        "chats": {s: len(chats[s]) for s in chats},
        "chat_chars": {s: sum(len(m["content"]) for c in chats[s] for m in c["messages"])
                       for s in chats},
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
    print(json.dumps(stats, indent=1))


if __name__ == "__main__":
    main()
