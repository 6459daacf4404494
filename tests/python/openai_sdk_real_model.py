"""The OpenAI Python SDK against `temper-lm serve` on the real Gemma 3 270M, as a user would try it.

Usage: openai_sdk_real_model.py BASE_URL MODEL API_KEY

Run by tests/clients/openai_sdk_test.cpp. The model is the pretrained base model (not the
instruction-tuned one), so its answers are continuations rather than replies; what is checked is that
what comes back is text a person can read (words, not byte soup or control tokens), from chat
(whole and streamed; in the chat format the base model tends to repeat the user's turn) and from
completions, and that a required tool call is a well-formed call of the offered function. Prints
"ok: <check>" per check and each answer as JSON; the first failure raises.
"""

import json
import re
import sys

import openai

base_url, model, api_key = sys.argv[1:4]
client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=300)


def readable(text):
    """Mostly words: at least five of them, and at least 80% of the characters letters, digits,
    spaces or common punctuation."""
    words = re.findall(r"[A-Za-z]{2,}", text)
    plain = sum(ch.isalnum() or ch.isspace() or ch in ".,;:!?'\"()-/" for ch in text)
    return len(words) >= 5 and plain >= 0.8 * len(text) and "<" not in text


question = [{"role": "user", "content": "Write two sentences about Paris, the capital of France."}]
whole = client.chat.completions.create(model=model, messages=question, max_tokens=48, temperature=0)
text = whole.choices[0].message.content
print("whole:", json.dumps(text))
assert readable(text), text
assert whole.usage.completion_tokens > 0
print("ok: chat.completions.create gives readable text")

parts = []
for chunk in client.chat.completions.create(model=model, messages=question, max_tokens=48, temperature=0, stream=True):
    if chunk.choices and chunk.choices[0].delta.content:
        parts.append(chunk.choices[0].delta.content)
streamed = "".join(parts)
print("streamed:", json.dumps(streamed))
assert streamed == text, (streamed, text)
print("ok: streamed text is the same text")

# The base model's own use: continuing text, through the completions endpoint.
completion = client.completions.create(model=model, prompt="The capital of France is", max_tokens=32, temperature=0)
continued = completion.choices[0].text
print("completion:", json.dumps(continued))
assert readable(continued), continued
print("ok: completions.create continues the text readably")

tools = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Reads a file on the host.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string", "pattern": "^/[a-z/]{1,40}$"}},
                "required": ["path"],
            },
        },
    }
]
ask = [{"role": "user", "content": "Show me the SSH daemon's configuration file."}]
called = client.chat.completions.create(
    model=model, messages=ask, tools=tools, tool_choice="required", max_tokens=64, temperature=0
)
call = called.choices[0].message.tool_calls[0]
print("tool call:", call.function.name, call.function.arguments)
assert call.function.name == "read_file"
assert re.fullmatch(r"/[a-z/]{1,40}", json.loads(call.function.arguments)["path"])
print("ok: a required tool call is a call of the offered function")
