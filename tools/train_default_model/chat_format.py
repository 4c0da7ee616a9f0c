"""ChatML rendering of plain-text conversations, identical to chat_template.jinja.

Training data is rendered here (no jinja needed); check_chat_format.py and the
device run prove the two agree byte for byte on the conversations we train on.
Only string contents and the system/user/assistant roles are handled: that is
all the synthetic training set contains.
"""

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
EMPTY_THINK = "<think>\n\n</think>\n\n"


def render(messages, add_generation_prompt=False, enable_thinking=False):
    if not messages:
        raise ValueError("no messages")
    out = []
    if messages[0]["role"] == "system":
        out.append(f"{IM_START}system\n{messages[0]['content'].strip()}{IM_END}\n")
    last_query = max(i for i, m in enumerate(messages) if m["role"] == "user")
    for index, message in enumerate(messages):
        role, text = message["role"], message["content"].strip()
        if role == "system":
            if index != 0:
                raise ValueError("system message must come first")
        elif role == "user":
            out.append(f"{IM_START}user\n{text}{IM_END}\n")
        elif role == "assistant":
            if "</think>" in text:
                raise ValueError("training answers carry no reasoning")
            think = EMPTY_THINK if index > last_query else ""
            out.append(f"{IM_START}assistant\n{think}{text}{IM_END}\n")
        else:
            raise ValueError(f"unsupported role {role}")
    if add_generation_prompt:
        out.append(f"{IM_START}assistant\n")
        out.append("<think>\n" if enable_thinking else EMPTY_THINK)
    return "".join(out)
