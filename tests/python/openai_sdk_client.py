"""The OpenAI Python SDK against `temper-lm serve`, as a user's script would drive it.

Usage: openai_sdk_client.py BASE_URL MODEL API_KEY

Run by tests/clients/openai_sdk_test.cpp against a real server (the tiny Gemma 4 fixture with its
chat tokenizer, so free text is gibberish but every constrained reply keeps to its schema). Prints
"ok: <check>" per check passed; the first failure raises, so the exit status is non-zero and the
traceback names it.
"""

import json
import sys
from datetime import datetime
from typing import List, Literal

import openai
from pydantic import BaseModel, Field

base_url, model, api_key = sys.argv[1:4]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=60)
messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Check sshd."}]
tools = [
    {
        "type": "function",
        "function": {
            "name": "run_command",
            "description": "Runs a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"cmd": {"type": "string", "maxLength": 12}},
                "required": ["cmd"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Reads a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "maxLength": 12}},
                "required": ["path"],
            },
        },
    },
]


def ok(check):
    print(f"ok: {check}", flush=True)


def expect(condition, what):
    if not condition:
        raise AssertionError(what)


# Models: the list, and one by id.
listed = [m.id for m in client.models.list()]
expect(listed == [model], f"models.list() gave {listed}")
expect(client.models.retrieve(model).id == model, "models.retrieve")
ok("models.list and models.retrieve")

# Chat, whole and streamed: the same reply at temperature 0, the usage in the last chunk.
whole = client.chat.completions.create(model=model, messages=messages, max_tokens=8, temperature=0)
choice = whole.choices[0]
expect(isinstance(choice.message.content, str), f"content {choice.message.content!r}")
expect(choice.finish_reason in ("stop", "length"), f"finish_reason {choice.finish_reason}")
expect(whole.usage.prompt_tokens > 0 and whole.usage.completion_tokens > 0, f"usage {whole.usage}")
ok("chat.completions.create")

text, usage = "", None
for chunk in client.chat.completions.create(
    model=model, messages=messages, max_tokens=8, temperature=0, stream=True, stream_options={"include_usage": True}
):
    if chunk.usage is not None:
        usage = chunk.usage
    for c in chunk.choices:
        text += c.delta.content or ""
expect(text == choice.message.content, f"streamed {text!r} != whole {choice.message.content!r}")
expect(usage is not None and usage.completion_tokens == whole.usage.completion_tokens, f"streamed usage {usage}")
ok("chat.completions.create(stream=True) with include_usage")

# Log-probabilities: each reply token's, with its row's two most likely alternatives.
scored = client.chat.completions.create(
    model=model, messages=messages, max_tokens=6, temperature=0, logprobs=True, top_logprobs=2
)
content = scored.choices[0].logprobs.content
expect(content, f"no logprobs in {scored.choices[0]}")
for t in content:
    expect(t.logprob <= 0 and len(t.top_logprobs) == 2, f"token logprob {t}")
    expect(t.top_logprobs[0].logprob == t.logprob, f"greedy took the most likely token: {t}")
ok("logprobs and top_logprobs")


# Tools: a required call keeps to its tool's schema; a named one calls that tool.
def check_calls(calls, names):
    expect(calls, "no tool calls")
    for call in calls:
        expect(call.type == "function" and call.function.name in names, f"call {call}")
        args = json.loads(call.function.arguments)
        key = "cmd" if call.function.name == "run_command" else "path"
        expect(list(args) == [key] and isinstance(args[key], str) and len(args[key]) <= 12, f"arguments {args}")


required = client.chat.completions.create(
    model=model, messages=messages, tools=tools, tool_choice="required", max_tokens=200, temperature=0
)
expect(required.choices[0].finish_reason == "tool_calls", f"finish_reason {required.choices[0].finish_reason}")
check_calls(required.choices[0].message.tool_calls, {"run_command", "read_file"})
ok("tool_choice required")

named = client.chat.completions.create(
    model=model,
    messages=messages,
    tools=tools,
    tool_choice={"type": "function", "function": {"name": "read_file"}},
    max_tokens=200,
    temperature=0.7,
    seed=3,
)
check_calls(named.choices[0].message.tool_calls, {"read_file"})
ok("tool_choice naming a function")

single = client.chat.completions.create(
    model=model,
    messages=messages,
    tools=tools,
    tool_choice="required",
    parallel_tool_calls=False,
    max_tokens=200,
    temperature=0,
)
expect(len(single.choices[0].message.tool_calls) == 1, f"parallel_tool_calls=False gave {single.choices[0]}")
ok("parallel_tool_calls=False")

# Streamed tool-call deltas, put together by index as the SDK's users do, equal the whole reply.
streamed_calls = {}
for chunk in client.chat.completions.create(
    model=model, messages=messages, tools=tools, tool_choice="required", max_tokens=200, temperature=0, stream=True
):
    for c in chunk.choices:
        for delta in c.delta.tool_calls or []:
            call = streamed_calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            call["name"] += delta.function.name or ""
            call["arguments"] += delta.function.arguments or ""
expected = [
    {"name": c.function.name, "arguments": c.function.arguments} for c in required.choices[0].message.tool_calls
]
got = [{"name": streamed_calls[i]["name"], "arguments": streamed_calls[i]["arguments"]} for i in sorted(streamed_calls)]
expect(got == expected, f"streamed calls {got} != whole {expected}")
expect(all(streamed_calls[i]["id"] for i in streamed_calls), "a streamed call without an id")
ok("streamed tool-call deltas")


# Structured output from nested pydantic models: $defs/$ref, bounds, a pattern, a format, a literal.
class Finding(BaseModel):
    rule: str = Field(pattern=r"^[a-z_]{1,10}$")
    severity: Literal["low", "medium", "high"]
    attempts: int = Field(ge=0, le=5)


class Report(BaseModel):
    host: str = Field(max_length=8)
    checked_at: datetime
    findings: List[Finding] = Field(max_length=2)


parsed = client.chat.completions.parse(
    model=model, messages=messages, response_format=Report, max_tokens=400, temperature=0
)
report = parsed.choices[0].message.parsed
expect(isinstance(report, Report), f"parsed {parsed.choices[0].message}")
expect(len(report.host) <= 8 and len(report.findings) <= 2, f"report {report}")
for f in report.findings:
    expect(0 <= f.attempts <= 5, f"finding {f}")
ok("chat.completions.parse with nested pydantic models")

# Completions, from text.
completion = client.completions.create(model=model, prompt="Hello", max_tokens=5, temperature=0)
expect(isinstance(completion.choices[0].text, str) and completion.usage.completion_tokens == 5, f"{completion}")
ok("completions.create")


# Errors raise the SDK's own exception classes, naming what is wrong.
def raises(kind, call, *needles):
    try:
        call()
    except kind as e:
        # The SDK's message is the server's; the error's code and param come as attributes.
        said = f"{e} code={e.code} param={e.param}"
        for needle in needles:
            expect(needle in said, f"{kind.__name__} without {needle!r}: {said}")
        return
    raise AssertionError(f"expected {kind.__name__}")


raises(openai.NotFoundError, lambda: client.models.retrieve("no-such-model"), "no-such-model")
raises(
    openai.NotFoundError,
    lambda: client.chat.completions.create(model="no-such-model", messages=messages),
    "model_not_found",
)
raises(
    openai.BadRequestError,
    lambda: client.chat.completions.create(model=model, messages=messages, presence_penalty=0.5),
    "presence_penalty",
)
raises(
    openai.BadRequestError,
    lambda: client.chat.completions.create(
        model=model, messages=messages, prediction={"type": "content", "content": "x"}
    ),
    "prediction",
)
raises(
    openai.BadRequestError,
    lambda: client.chat.completions.create(model=model, messages=messages, temperature=3),
    "temperature",
)
raises(
    openai.AuthenticationError,
    lambda: openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list(),
    "invalid_api_key",
)
ok("errors raise NotFoundError, BadRequestError and AuthenticationError")
