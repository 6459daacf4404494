"""Renders the conversations of tests/engine/tokenizer/gemma3_chat_format_test.cpp with the chat
template Google ships with the Gemma 3 instruction-tuned checkpoints, and writes what it renders to
tests/data/tokenizer/gemma3-chat-template-renders.json: the byte-exact expectations of
Gemma3ChatFormat::Render (engine/tokenizer/gemma3_chat_format.h).

The template is transformers' _CHAT_TEMPLATE from src/transformers/models/gemma3/convert_gemma3_weights.py
(the one written into every Gemma 3 "-it" tokenizer_config.json), rendered as transformers renders
chat templates (a sandboxed jinja2 environment with trim_blocks and lstrip_blocks).

Gemma 3 has no tool syntax, so the tool cases are written as the plain conversation temper renders:
the tools' preamble ends the system message, a call is an assistant message whose content is its
JSON, and the results are a user message whose content is their JSON (compact, keys sorted, as
nlohmann::json writes them).

Each case also carries the ids Hugging Face's tokenizers library encodes the text to with the real
Gemma 3 tokenizer (tests/data/tokenizer/gemma3-tokenizer.json.gz; special tokens matched, nothing
added: the text already holds <bos>).

Run: python tools/reference/gemma3_chat_template.py TOKENIZER.json.gz OUT.json   (jinja2, tokenizers)
"""

import gzip
import json
import sys

from jinja2.exceptions import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

CHAT_TEMPLATE = """{{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>\\n' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model\\n'}}
{%- endif -%}
"""

# temper's tool preamble (gemma3_chat_format.cpp, kToolInstruction), then the declarations.
TOOL_INSTRUCTION = (
    "You can call the functions declared below. To call one, answer with exactly one JSON object and nothing "
    "else: {\"name\": <the function's name>, \"arguments\": {<its arguments>}}. To call several at once, answer "
    "with a JSON array of such objects. The results come back in the next user turn, as JSON.\n"
    "Functions:\n"
)

RUN_COMMAND = {
    "name": "run_command",
    "description": "Run a shell command",
    "parameters": {
        "type": "object",
        "properties": {"command": {"type": "string", "description": "The command"}, "timeout": {"type": "integer"}},
        "required": ["command"],
    },
}


def dump(value):
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def tools_json(tools):
    items = []
    for t in tools:
        s = '{"name":' + dump(t["name"])
        if t.get("description"):
            s += ',"description":' + dump(t["description"])
        if t.get("parameters") is not None:
            s += ',"parameters":' + dump(t["parameters"])
        items.append(s + "}")
    return "[" + ",".join(items) + "]"


def call_json(name, arguments):
    return '{"name":' + dump(name) + ',"arguments":' + dump(arguments) + "}"


def result_json(name, response):
    return '{"name":' + dump(name) + ',"response":' + dump(response) + "}"


def with_tools(system, tools):
    preamble = TOOL_INSTRUCTION + tools_json(tools)
    return preamble if system is None else system + "\n\n" + preamble


CASES = {
    "system_and_user": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Hello there."},
    ],
    "multi_turn": [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "  Hello! How can I help?\n"},
        {"role": "user", "content": "\nTell me a joke.  "},
    ],
    "tools_offered": [
        {"role": "system", "content": with_tools("You harden hosts.", [RUN_COMMAND])},
        {"role": "user", "content": "Check sshd."},
    ],
    "tools_without_system": [
        {"role": "system", "content": with_tools(None, [RUN_COMMAND])},
        {"role": "user", "content": "Check sshd."},
    ],
    "tool_call_and_result": [
        {"role": "system", "content": with_tools("You harden hosts.", [RUN_COMMAND])},
        {"role": "user", "content": "Check sshd."},
        {"role": "assistant", "content": call_json("run_command", {"command": "sshd -t", "timeout": 30})},
        {"role": "user", "content": result_json("run_command", {"exit": 0, "stdout": "ok \u00e9"})},
        {"role": "assistant", "content": "sshd's configuration is valid."},
        {"role": "user", "content": "Thanks."},
    ],
    "tool_result_awaits_reply": [
        {"role": "user", "content": "Check sshd."},
        {"role": "assistant", "content": call_json("run_command", {"command": "sshd -t"})},
        {"role": "user", "content": result_json("run_command", "exit 0")},
    ],
}


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

    def raise_exception(message):
        raise TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    template = env.from_string(CHAT_TEMPLATE)
    with gzip.open(sys.argv[1], "rt", encoding="utf-8") as f:
        tokenizer = Tokenizer.from_str(f.read())
    out = []
    for name, messages in CASES.items():
        text = template.render(messages=messages, add_generation_prompt=True, bos_token="<bos>")
        ids = tokenizer.encode(text, add_special_tokens=False).ids
        out.append({"name": name, "messages": messages, "text": text, "ids": ids})
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
