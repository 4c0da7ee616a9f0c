#!/usr/bin/env python3
"""Renders every chat template in tests/data/templates over every conversation
in conversations.json with two independent implementations and writes the
goldens the C++ conformance test compares against byte for byte.

Oracle 1 (authoritative): Python jinja2 configured exactly like transformers'
`_compile_jinja_template` / `render_jinja_template` (transformers 5.x):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True) with the
loopcontrols extension and a `{% generation %}` block, transformers' tojson
filter (json.dumps with ensure_ascii=False and Python's separators),
raise_exception and strftime_now globals; render(messages=..., tools=...,
documents=..., add_generation_prompt=..., **special_tokens, **kwargs).

Oracle 2: @huggingface/jinja through render_hf_jinja.mjs (node). Where the two
disagree jinja2 wins; the disagreement is recorded in the golden entry.

Usage: python3 tools/templates/make_goldens.py   (from the repository root;
run `npm install` in tools/templates first for the second oracle)
"""

import json
import os
import subprocess
import sys
from datetime import datetime, timezone

import jinja2
import jinja2.ext
import jinja2.nodes
from jinja2.sandbox import ImmutableSandboxedEnvironment

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "tests", "data", "templates")
FIXED_TIME = 1749988800  # 2025-06-15 12:00:00 UTC


class GenerationBlock(jinja2.ext.Extension):
    """transformers' AssistantTracker without the tracking: renders its body."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return jinja2.nodes.CallBlock(self.call_method("_render"), [], [], body).set_lineno(lineno)

    def _render(self, caller):
        return caller()


def make_environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        # A fixed instant keeps date-printing templates reproducible; the C++
        # test sets the same one (ChatTemplateOptions::fixed_time).
        return datetime.fromtimestamp(FIXED_TIME, timezone.utc).strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def context_for(template_entry, case):
    """The keyword arguments transformers passes to render()."""
    kwargs = {}
    for key in ("bos_token", "eos_token"):
        if template_entry.get(key):
            kwargs[key] = template_entry[key]
    kwargs.update(case.get("extra_context", {}))
    kwargs.update(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=case.get("documents"),
        add_generation_prompt=case.get("add_generation_prompt", True),
    )
    return kwargs


def render_jinja2(env, source, kwargs):
    try:
        return {"output": env.from_string(source).render(**kwargs)}
    except jinja2.exceptions.TemplateError as e:
        return {"error": f"{type(e).__name__}: {e}"}
    except Exception as e:  # TypeError and friends raised inside the template
        return {"error": f"{type(e).__name__}: {e}"}


def render_hf_jinja(jobs):
    script = os.path.join(ROOT, "tools", "templates", "render_hf_jinja.mjs")
    if not os.path.isdir(os.path.join(ROOT, "tools", "templates", "node_modules", "@huggingface")):
        print("note: tools/templates/node_modules missing; skipping the @huggingface/jinja oracle", file=sys.stderr)
        return None
    env = dict(os.environ, TZ="UTC", FIXED_TIME=str(FIXED_TIME))
    proc = subprocess.run(["node", script], input=json.dumps(jobs), capture_output=True, text=True, check=True, env=env)
    return json.loads(proc.stdout)


def render_snippets(env):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from snippets import SNIPPETS, SYNTAX_ERRORS

    entries, jobs = [], []
    for name, source, context in SNIPPETS:
        entries.append({"name": name, "template": source, "context": context, **render_jinja2(env, source, context)})
        jobs.append({"source": source, "context": context})
    for name, source in SYNTAX_ERRORS:
        try:
            env.from_string(source)
            raise SystemExit(f"snippet {name} was expected not to parse")
        except Exception as e:  # TemplateSyntaxError, or Python's SyntaxError for a stray break
            entries.append({"name": name, "template": source, "context": {}, "syntax_error": str(e)})
        jobs.append({"source": source, "context": {}})
    hf = render_hf_jinja(jobs)
    disagreements = 0
    if hf is not None:
        for entry, other in zip(entries, hf):
            if "output" in entry and other.get("output") == entry["output"]:
                continue
            if "output" not in entry and "error" in other:
                continue
            disagreements += 1
            entry["hf_jinja"] = other
    out_path = os.path.join(DATA, "snippet_goldens.json")
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(entries, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"{len(entries)} snippets, {disagreements} disagreements with @huggingface/jinja -> {out_path}")


def main():
    render_snippets(make_environment())
    manifest = json.load(open(os.path.join(DATA, "templates.json")))
    conversations = json.load(open(os.path.join(DATA, "conversations.json")))
    env = make_environment()
    goldens, jobs = [], []
    for entry in manifest:
        source = open(os.path.join(DATA, entry["file"]), encoding="utf-8").read()
        for case in conversations:
            kwargs = context_for(entry, case)
            result = render_jinja2(env, source, kwargs)
            goldens.append({"template": entry["name"], "case": case["name"], **result})
            jobs.append({"source": source, "context": kwargs})
    hf = render_hf_jinja(jobs)
    disagreements = 0
    if hf is not None:
        for golden, other in zip(goldens, hf):
            if "output" in golden and other.get("output") == golden["output"]:
                continue
            if "error" in golden and "error" in other:
                continue
            disagreements += 1
            golden["hf_jinja"] = other
    out_path = os.path.join(DATA, "goldens.json")
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(goldens, f, ensure_ascii=False, indent=1)
        f.write("\n")
    errors = sum(1 for g in goldens if "error" in g)
    print(f"{len(goldens)} cases ({errors} template errors), {disagreements} disagreements with @huggingface/jinja -> {out_path}")


if __name__ == "__main__":
    main()
