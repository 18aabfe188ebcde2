"""
The reference for kvtier's chat-template renders: Python jinja2 set up the way
transformers' apply_chat_template sets it up (chat_template_utils: an
ImmutableSandboxedEnvironment with trim_blocks, lstrip_blocks and the
loopcontrols extension; its own tojson filter, json.dumps with
ensure_ascii=False; raise_exception and strftime_now globals), rendering with
the variables apply_chat_template passes: messages, tools, documents,
add_generation_prompt, the tokenizer's special tokens, and extra kwargs.

stdin:  {"cases": [{"template": str, "context": {...}}]}
stdout: {"jinja2": version, "results": [{"text": str} | {"error": str}]}

`{% generation %}` (transformers' AssistantTracker) is accepted and renders
its body, as apply_chat_template does when no assistant mask is asked for.
"""
import json
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class GenerationBlock(Extension):
    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_render_body"), [], [], body).set_lineno(lineno)

    def _render_body(self, caller):
        return caller()


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.now().strftime(fmt)


def environment():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[GenerationBlock, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def main():
    request = json.load(sys.stdin)
    env = environment()
    compiled = {}
    results = []
    for case in request["cases"]:
        try:
            source = case["template"]
            if source not in compiled:
                compiled[source] = env.from_string(source)
            results.append({"text": compiled[source].render(**case["context"])})
        except Exception as error:  # the test compares failures too: report, do not stop the batch
            results.append({"error": f"{type(error).__name__}: {error}"})
    json.dump({"jinja2": jinja2.__version__, "results": results}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
