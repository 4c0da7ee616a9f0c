"""Turns Sphinx reStructuredText sources into plain documentation prose.

The Python docs sources are reST with Sphinx roles and directives. A small
model trained on the raw markup would spend its capacity on `:func:` noise, so
inline roles become Markdown-style code spans, common directives become the
English Sphinx renders them as ("New in version 3.2."), and index/toctree/
metadata blocks disappear. Section headings and code blocks stay as they are.

Pure standard library: runs on any machine (no torch or tokenizers needed).
"""

import re

RELEASE = "3.11"

# Directive: ".. name:: argument" (optionally indented). Domain names such as
# "c:function" are included.
DIRECTIVE_RE = re.compile(r"^(\s*)\.\. ([A-Za-z][\w:-]*)::\s?(.*)$")
# Option lines directly under a directive: ":name: value".
OPTION_RE = re.compile(r"^\s+:[\w-]+:")
# Any other explicit markup start: comments, targets, substitutions, footnotes.
EXPLICIT_RE = re.compile(r"^(\s*)\.\.(\s|$)")
# File-wide metadata fields such as ":tocdepth: 2".
FILE_OPTION_RE = re.compile(r"^:(tocdepth|orphan|nosearch)")

# Directives removed together with their indented body.
DROP_BLOCK = {
    "index", "toctree", "tabularcolumns", "include", "literalinclude", "image",
    "figure", "raw", "highlight", "sectionauthor", "moduleauthor", "testsetup",
    "testcleanup", "contents", "audit-event", "currentmodule", "module",
    "c:namespace", "c:namespace-push", "c:namespace-pop", "program",
    "limited-api-list", "availability", "opcode-note",
}

# Object descriptions: the signature line stays (with a Sphinx-like prefix).
SIGNATURE_PREFIX = {
    "function": "", "method": "", "attribute": "", "data": "", "describe": "",
    "object": "", "option": "", "cmdoption": "", "envvar": "", "opcode": "",
    "pdbcommand": "", "c:function": "", "c:member": "", "c:type": "",
    "c:var": "", "c:macro": "", "c:struct": "struct ", "c:enum": "enum ",
    "c:enumerator": "", "class": "class ", "exception": "exception ",
    "classmethod": "classmethod ", "staticmethod": "static ",
    "abstractmethod": "abstractmethod ", "coroutinemethod": "coroutine ",
    "coroutinefunction": "coroutine ", "decorator": "@",
    "decoratormethod": "@", "property": "property ",
}

# Admonitions and version notes: replaced by their rendered caption.
CAPTIONS = {
    "note": "Note:", "warning": "Warning:", "seealso": "See also:",
    "impl-detail": "CPython implementation detail:", "important": "Important:",
    "caution": "Caution:", "attention": "Attention:", "tip": "Tip:",
    "hint": "Hint:", "danger": "Danger:", "error": "Error:",
}

ROLE_RE = re.compile(r":(?:[a-z]+:)?([a-z][a-z-]*):`((?:[^`\\]|\\.)+)`")
LITERAL_RE = re.compile(r"``(.+?)``", re.S)
SENTENCE_GAP_RE = re.compile(r"([.?!;:]) {2,}(?=[A-Z`*(\"'])")
LINK_RE = re.compile(r"`([^`<]*?)\s*<[^`>]*>`__?")
NAMED_REF_RE = re.compile(r"`([^`]+)`_(?!_)")
FOOTNOTE_RE = re.compile(r"\s*\[(?:#[\w-]*|\d+|\*)\]_")
SUBST_RE = re.compile(r"\|(version|release)\|")

# Section titles of ":ref:" labels and ":doc:" paths, filled by
# collect_titles() so that untitled references read like Sphinx renders them.
REF_TITLES = {}
DOC_TITLES = {}

CALLABLE_ROLES = {"func", "meth"}
PLAIN_ROLES = {"term", "ref", "doc", "dfn", "abbr", "guilabel", "menuselection",
               "numref", "keyword", "token"}


def _role(match):
    role, content = match.group(1), match.group(2).replace("\\", "")
    titled = re.match(r"^(.*?)\s*<([^>]+)>$", content, re.S)
    if role == "rfc":
        return f"RFC {content}"
    if role == "pep":
        return f"PEP {content}"
    if role == "ref" and not titled:
        return REF_TITLES.get(content.lower(), content.replace("-", " "))
    if role == "doc" and not titled:
        key = content.lstrip("./").lstrip("/")
        match = next((t for p, t in DOC_TITLES.items() if p.endswith(key)), None)
        return match or key.split("/")[-1].replace("-", " ")
    if titled and titled.group(1):
        text = titled.group(1)
    else:
        text = content
        if text.startswith("~"):
            text = text[1:].split(".")[-1]
        text = text.lstrip("!")
    if role in PLAIN_ROLES:
        return text
    if role in CALLABLE_ROLES and not text.endswith(")"):
        text += "()"
    return f"`{text}`"


def clean_inline(line):
    """Rewrites inline reST markup into plain text/Markdown (spans may cross
    line breaks, so this runs over whole documents too)."""
    line = LITERAL_RE.sub(lambda m: "`" + m.group(1) + "`", line)
    line = ROLE_RE.sub(_role, line)
    line = LINK_RE.sub(lambda m: m.group(1), line)
    line = NAMED_REF_RE.sub(lambda m: m.group(1), line)
    line = FOOTNOTE_RE.sub("", line)
    line = SUBST_RE.sub(RELEASE, line)
    line = SENTENCE_GAP_RE.sub(r"\1 ", line)
    return line.replace("\\ ", "")


def _indent_of(line):
    return len(line) - len(line.lstrip(" "))


def _skip_block(lines, start, indent):
    """Index of the first line after the body indented deeper than indent."""
    i = start
    while i < len(lines):
        if lines[i].strip() and _indent_of(lines[i]) <= indent:
            break
        i += 1
    return i


def _signature_lines(lines, start, indent):
    """Continuation signature lines after a directive, up to a blank/option."""
    sigs, i = [], start
    while i < len(lines) and lines[i].strip() and _indent_of(lines[i]) > indent \
            and not OPTION_RE.match(lines[i]):
        sigs.append(lines[i].strip())
        i += 1
    return sigs, i


def _skip_options(lines, i):
    while i < len(lines) and OPTION_RE.match(lines[i]):
        i += 1
    return i


def _version_caption(name, arg):
    parts = arg.split(None, 1)
    version = parts[0] if parts else ""
    rest = parts[1] if len(parts) > 1 else ""
    if name == "versionadded":
        head = f"New in version {version}."
    elif name == "versionchanged":
        head = f"Changed in version {version}:"
    elif name == "deprecated":
        head = f"Deprecated since version {version}:"
    else:  # deprecated-removed: "X Y"
        removed = rest.split(None, 1)
        head = f"Deprecated since version {version}, will be removed in version " \
               f"{removed[0] if removed else ''}:"
        rest = removed[1] if len(removed) > 1 else ""
    return (head + (" " + rest if rest else "")).strip()


def clean_document(text):
    """Returns the prose of one .rst source, markup removed."""
    lines = text.replace("\t", "    ").splitlines()
    out = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DIRECTIVE_RE.match(line)
        if m:
            indent, name, arg = len(m.group(1)), m.group(2), m.group(3).strip()
            pad = " " * indent
            if name in DROP_BLOCK:
                i = _skip_block(lines, i + 1, indent)
                continue
            if name in SIGNATURE_PREFIX:
                more, j = _signature_lines(lines, i + 1, indent)
                for sig in [arg] + more:
                    out.append(pad + SIGNATURE_PREFIX[name] + (sig))
                i = _skip_options(lines, j)
                continue
            if name in {"versionadded", "versionchanged", "deprecated",
                        "deprecated-removed"}:
                out.append(pad + (_version_caption(name, arg)))
                i = _skip_options(lines, i + 1)
                continue
            if name in CAPTIONS:
                caption = CAPTIONS[name] + (" " + arg if arg else "")
                out.append(pad + (caption))
                i = _skip_options(lines, i + 1)
                continue
            if name in {"rubric", "topic", "sidebar"} and arg:
                out.append(pad + (arg))
                i = _skip_options(lines, i + 1)
                continue
            # Code blocks, glossary, productionlist, tables, unknown directives:
            # the directive line goes, the body stays.
            i = _skip_options(lines, i + 1)
            continue
        m = EXPLICIT_RE.match(line)
        if m:  # comment, hyperlink target, substitution or footnote body
            i = _skip_block(lines, i + 1, len(m.group(1)))
            continue
        if FILE_OPTION_RE.match(line):
            i += 1
            continue
        out.append((line))
        i += 1
    return _tidy(clean_inline("\n".join(out)).split("\n"))


def _tidy(lines):
    result = []
    for line in lines:
        stripped = line.rstrip()
        if stripped.strip() == "::":
            stripped = ""
        elif stripped.endswith(" ::"):
            stripped = stripped[:-3]
        elif stripped.endswith("::"):
            stripped = stripped[:-1]
        if not stripped and (not result or not result[-1]):
            continue  # at most one blank line in a row, none at the start
        result.append(stripped)
    while result and not result[-1]:
        result.pop()
    return "\n".join(result) + "\n"


def paragraphs(block_lines):
    """Splits already-dedented lines into paragraphs of joined text."""
    paras, current = [], []
    for line in block_lines:
        if line.strip():
            current.append(line.strip())
        elif current:
            paras.append(" ".join(current))
            current = []
    if current:
        paras.append(" ".join(current))
    return paras


def _heading(lines, i):
    """Title if lines[i] starts a section heading (optionally overlined)."""
    def rule(line):
        t = line.strip()
        return len(t) >= 3 and len(set(t)) == 1 and t[0] in "=-~^\"*#+'`:."
    if i + 1 < len(lines) and lines[i].strip() and not rule(lines[i]) \
            and rule(lines[i + 1]) and len(lines[i + 1].strip()) >= len(lines[i].strip()):
        return lines[i].strip()
    if i + 2 < len(lines) and rule(lines[i]) and lines[i + 1].strip() and rule(lines[i + 2]):
        return lines[i + 1].strip()
    return None


def collect_titles(rel_path, raw):
    """Records the titles of the labels and of the document in one source."""
    lines = raw.splitlines()
    doc_key = rel_path[:-len(".rst.txt")] if rel_path.endswith(".rst.txt") else rel_path
    pending = []
    for i, line in enumerate(lines):
        m = re.match(r"^\.\. _([^:]+):\s*$", line)
        if m:
            pending.append(m.group(1).lower())
            continue
        title = _heading(lines, i)
        if title:
            text = clean_inline(title).replace("`", "")
            for label in pending:
                REF_TITLES[label] = text
            DOC_TITLES.setdefault(doc_key, text)
            pending = []
        elif line.strip() and not line.startswith(".. "):
            pending = []
