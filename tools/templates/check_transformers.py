#!/usr/bin/env python3
"""Checks the committed chat-template goldens against transformers itself
(its render_jinja_template and compiled environment), where transformers is
installed (the GPU machine). make_goldens.py re-creates transformers'
environment with plain jinja2; this confirms the re-creation is faithful.

Usage: python3 check_transformers.py [DATA_DIR]   (default: tests/data/templates)
Writes transformers_check.json (the differences) to $OUT or the current directory.
"""
import json
import os
import sys
import time
from datetime import datetime, timezone

import jinja2
import transformers
from transformers.utils import chat_template_utils as ctu

FIXED_TIME = 1749988800  # the instant make_goldens.py gives strftime_now


class FixedDatetime(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime.fromtimestamp(FIXED_TIME, timezone.utc).replace(tzinfo=None)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    data = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "templates")
    started = time.time()
    ctu.datetime = FixedDatetime
    manifest = json.load(open(os.path.join(data, "templates.json")))
    cases = {c["name"]: c for c in json.load(open(os.path.join(data, "conversations.json")))}
    goldens = json.load(open(os.path.join(data, "goldens.json")))
    entries = {e["name"]: e for e in manifest}
    sources = {e["name"]: open(os.path.join(data, e["file"]), encoding="utf-8").read() for e in manifest}

    same = diff = err_same = err_diff = 0
    report = []
    for g in goldens:
        entry, case = entries[g["template"]], cases[g["case"]]
        kwargs = {k: entry[k] for k in ("bos_token", "eos_token") if entry.get(k)}
        kwargs.update(case.get("extra_context", {}))
        try:
            out = ctu.render_jinja_template(
                conversations=[case["messages"]], tools=case.get("tools"), documents=case.get("documents"),
                chat_template=sources[g["template"]], add_generation_prompt=case.get("add_generation_prompt", True),
                **kwargs)
            result = {"output": out[0][0] if isinstance(out, tuple) else out[0]}
        except Exception as e:
            result = {"error": f"{type(e).__name__}: {e}"}
        if "output" in g:
            if result.get("output") == g["output"]:
                same += 1
            else:
                diff += 1
                report.append({"template": g["template"], "case": g["case"], "golden": g["output"], "transformers": result})
        elif "error" in result:
            err_same += 1
        else:
            err_diff += 1
            report.append({"template": g["template"], "case": g["case"], "golden_error": g["error"], "transformers": result})

    snippets = json.load(open(os.path.join(data, "snippet_goldens.json")))
    s_same = s_diff = 0
    for s in snippets:
        if "output" not in s:
            continue
        try:
            got = ctu._compile_jinja_template(s["template"]).render(**s["context"])
        except Exception as e:
            got = f"<error {type(e).__name__}: {e}>"
        if got == s["output"]:
            s_same += 1
        else:
            s_diff += 1
            report.append({"snippet": s["name"], "golden": s["output"], "transformers": got})

    with open(os.path.join(os.environ.get("OUT", "."), "transformers_check.json"), "w") as f:
        json.dump(report, f, ensure_ascii=False, indent=1)
    print(f"transformers {transformers.__version__}, jinja2 {jinja2.__version__}: "
          f"{same} outputs equal, {diff} differ; {err_same} errors also raised, {err_diff} not raised; "
          f"snippets {s_same} equal, {s_diff} differ; {time.time() - started:.1f}s")


if __name__ == "__main__":
    main()
