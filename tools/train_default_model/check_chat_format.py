#!/usr/bin/env python3
"""Checks chat_format.render against chat_template.jinja rendered by jinja2.

jinja2 is set up the way transformers renders chat templates (sandboxed,
trim_blocks, lstrip_blocks, loopcontrols, a tojson that keeps non-ASCII and
key order). Usage: check_chat_format.py DATA_DIR [--vectors OUT.json]
With --vectors, also writes rendered test vectors (tools, tool calls, tool
responses, thinking on/off, content parts) for the C++ template engine.
"""

import argparse
import json
import sys
from pathlib import Path

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment

from chat_format import render

HERE = Path(__file__).resolve().parent


def load_template():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(value, indent=None):
        return json.dumps(value, ensure_ascii=False, indent=indent)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string((HERE / "chat_template.jinja").read_text())


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city.",
        "parameters": {"type": "object",
                       "properties": {"city": {"type": "string"},
                                      "days": {"type": "integer"}},
                       "required": ["city"]},
    },
}

VECTORS = [
    {"name": "single_user", "messages": [{"role": "user", "content": "What does len() do?"}],
     "add_generation_prompt": True},
    {"name": "system_and_user_thinking_on",
     "messages": [{"role": "system", "content": "You are a helpful assistant."},
                  {"role": "user", "content": "Hello"}],
     "add_generation_prompt": True, "enable_thinking": True},
    {"name": "thinking_off_explicit", "messages": [{"role": "user", "content": "Hi"}],
     "add_generation_prompt": True, "enable_thinking": False},
    {"name": "multi_turn_with_reasoning",
     "messages": [{"role": "user", "content": "First?"},
                  {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nOne."},
                  {"role": "user", "content": "Second?"},
                  {"role": "assistant", "content": "Two.", "reasoning_content": "count"}],
     "add_generation_prompt": False},
    {"name": "content_parts",
     "messages": [{"role": "user", "content": [{"type": "text", "text": "Look: "},
                                               {"type": "image"},
                                               {"type": "text", "text": " and say."}]}],
     "add_generation_prompt": True},
    {"name": "tools_and_calls",
     "messages": [{"role": "system", "content": "Be brief."},
                  {"role": "user", "content": "Weather in Paris and Rome?"},
                  {"role": "assistant", "content": "Let me check.",
                   "tool_calls": [{"type": "function", "id": "c1",
                                   "function": {"name": "get_weather",
                                                "arguments": {"city": "Paris", "days": 2}}},
                                  {"type": "function", "id": "c2",
                                   "function": {"name": "get_weather",
                                                "arguments": {"city": "Rome",
                                                              "opts": {"unit": "C"}}}}]},
                  {"role": "tool", "tool_call_id": "c1", "content": "Sunny, 21 C"},
                  {"role": "tool", "tool_call_id": "c2", "content": "Rain, 15 C"}],
     "tools": [WEATHER_TOOL], "add_generation_prompt": True},
    {"name": "tool_call_without_text",
     "messages": [{"role": "user", "content": "Weather in Oslo?"},
                  {"role": "assistant", "content": "",
                   "tool_calls": [{"function": {"name": "get_weather",
                                                "arguments": {"city": "Oslo"}}}]},
                  {"role": "tool", "content": "Snow"},
                  {"role": "assistant", "content": "It snows in Oslo."}],
     "tools": [WEATHER_TOOL], "add_generation_prompt": False},
]


def render_vector(template, vector):
    kwargs = {k: v for k, v in vector.items() if k not in {"name", "messages"}}
    return template.render(messages=vector["messages"], **kwargs)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("--vectors")
    args = ap.parse_args()
    template = load_template()
    checked = 0
    for name in ("train_chat.jsonl", "valid_chat.jsonl"):
        for line in open(Path(args.data_dir) / name, encoding="utf-8"):
            messages = json.loads(line)["messages"]
            for prompt in (False, True):
                convo = messages if not prompt else messages[:-1]
                want = template.render(messages=convo, add_generation_prompt=prompt)
                got = render(convo, add_generation_prompt=prompt)
                if want != got:
                    print("MISMATCH", json.dumps(convo)[:300], repr(want[-200:]),
                          repr(got[-200:]), sep="\n")
                    sys.exit(1)
                checked += 1
    print(f"chat_format matches chat_template.jinja on {checked} renderings")
    if args.vectors:
        out = [dict(v, expected=render_vector(template, v)) for v in VECTORS]
        Path(args.vectors).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n")
        print(f"wrote {len(out)} template vectors to {args.vectors}")


if __name__ == "__main__":
    main()
