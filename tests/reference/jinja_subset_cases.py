#!/usr/bin/env python3
# SPDX-FileCopyrightText: 2026 The Tandem developers
# SPDX-License-Identifier: GPL-3.0-or-later
"""Expected outputs for test_chat_template's Jinja-subset cases, produced by Python jinja2 configured exactly as
transformers renders chat templates (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
its tojson / raise_exception / strftime_now). Writes tests/chat_template_cases.inc (a C++ table).

    python3 tests/reference/jinja_subset_cases.py      # needs jinja2 (3.1.6 made the committed file)
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


MSGS = [
    {"role": "system", "content": "You are helpful."},
    {"role": "user", "content": "Hi there"},
    {"role": "assistant", "content": "Hello! How can I help?"},
    {"role": "user", "content": "Tell me a joke"},
]

# (name, template, variables)
CASES = [
    # --- text, output, whitespace control -----------------------------------------------------------------
    ("plain_text", "Hello, world!", {}),
    ("trailing_newline_dropped", "a\n", {}),
    ("only_one_trailing_newline_dropped", "a\n\n", {}),
    ("crlf_normalised", "a\r\nb\rc", {}),
    ("output_expr", "{{ 'x' }}{{ 1 }}{{ 1.5 }}{{ none }}{{ true }}{{ False }}", {}),
    ("undefined_prints_empty", "[{{ nothing }}]", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "  {% if true %}\n  x\n  {% endif %}\ny", {}),
    ("lstrip_not_for_variables", "  {{ 'v' }}\n", {}),
    ("lstrip_only_at_line_start", "a  {% if true %}b{% endif %}", {}),
    ("minus_strips_both_sides", "a   \n  {%- if true -%}  \n  b  {%- endif %}\nc", {}),
    ("minus_on_variables", "a\n  {{- 'b' -}}  \n c", {}),
    ("plus_disables_lstrip_and_trim", "x\n  {%+ if true +%}\ny{% endif %}", {}),
    ("comments", "a{# hidden #}b\n  {# own line #}\nc{#- x -#}  d", {}),
    ("raw_block", "{% raw %}{{ not evaluated }} {% if %}{% endraw %}", {}),
    ("dict_literal_in_output", "{{ {'a': {'b': 1}} }}", {}),
    ("newline_after_variable_kept", "{{ 'a' }}\n{{ 'b' }}\n", {}),
    ("comment_trim_blocks", "{# c #}\nline", {}),
    ("block_at_start_lstrip", "   {% set x = 1 %}\n{{ x }}", {}),
    ("indented_loop", "<ul>\n  {% for i in xs %}\n    <li>{{ i }}</li>\n  {% endfor %}\n</ul>\n", {"xs": [1, 2]}),

    # --- literals and python str() / repr() ---------------------------------------------------------------
    ("string_escapes", r"""{{ 'a\nb\t\'q\' \"d\" \\ \x41\u00e9\U0001F600 \d' }}""", {}),
    ("adjacent_strings", "{{ 'a' \"b\" 'c' }}", {}),
    ("numbers", "{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2.50 }} {{ 1e-7 }} {{ 1e16 }} {{ 123456789.0 }}", {}),
    ("float_repr", "{{ 0.1 + 0.2 }} {{ 1/3 }} {{ 10/2 }} {{ 1e22 }} {{ 0.0001 }} {{ 0.00001 }} {{ -0.0 }}", {}),
    ("list_repr", "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}", {}),
    ("tuple_repr", "{{ (1,) }} {{ (1, 'b') }} {{ () }} {{ 1, 2 }}", {}),
    ("string_repr_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n', 'tab\\t', 'bs\\\\'] }}", {}),
    ("string_repr_unicode", "{{ ['é', '日本', '\\x00', '\\x7f', '\\u200b', '\\u00a0', '😀'] }}", {}),
    ("dict_repr_from_json", "{{ d }}", {"d": {"z": 1, "a": [True, None, 2.0], "m": {"x": "y"}}}),
    ("dict_items_keys_values_repr", "{{ d.items() }} {{ d.keys() }} {{ d.values() }}", {"d": {"a": 1, "b": "x"}}),
    ("namespace_repr", "{% set ns = namespace(a=1, b='x') %}{{ ns }}", {}),

    # --- operators ----------------------------------------------------------------------------------------
    ("arithmetic", "{{ 7 + 2 }} {{ 7 - 2 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }}", {}),
    ("float_arith", "{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 1 + 1.0 }} {{ true + 1 }} {{ 3 * 1.5 }}", {}),
    ("pow_left_assoc", "{{ 2 ** 3 ** 2 }}", {}),
    ("string_ops", "{{ 'ab' + 'cd' }} {{ 'ab' * 3 }} {{ 2 * 'x' }} {{ 'a' ~ 1 ~ none ~ 2.5 ~ true ~ [1] }}", {}),
    ("list_ops", "{{ [1, 2] + [3] }} {{ [0] * 3 }} {{ (1,) + (2,) }}", {}),
    ("unary", "{{ -3 }} {{ - -3 }} {{ +3 }} {{ -1.5 }} {{ not true }} {{ not '' }}", {}),
    ("comparisons", "{{ 1 < 2 }} {{ 2 <= 2 }} {{ 3 > 2 > 1 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ 1 == true }} {{ 'a' != 'b' }} {{ none == none }}", {}),
    ("equality_mixed", "{{ [1] == [1] }} {{ (1,) == [1] }} {{ {'a': 1} == {'a': 1} }} {{ 'a' == 1 }} {{ u == u }} {{ u == none }}", {}),
    ("in_operator", "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 'z' not in 'abc' }} {{ 'x' in u }} {{ 1 in (1, 2) }}", {}),
    ("and_or_values", "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }} {{ none or none }} [{{ u or '' }}]", {}),
    ("cond_expr", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}] {{ 'a' if false else 'b' if true else 'c' }}", {}),
    ("filter_binds_tighter", "{{ xs | length - 1 }} {{ 'a' + ' b ' | trim + 'c' }} {{ -(xs|length) }}", {"xs": [1, 2, 3]}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 2 * 3 ~ 4 }} {{ not 1 == 2 }} {{ 'a' ~ 2 * 3 }}", {}),
    ("string_percent_format", "{{ '%s-%d' % ('a', 3) }} {{ '%s!' % 'x' }} {{ '%05.1f' % 3.14159 }} {{ '100%%' % () }}", {}),

    # --- subscripts, attributes, slices -------------------------------------------------------------------
    ("attr_and_item", "{{ m.role }} {{ m['content'] }} {{ m.get('role') }} {{ m.get('nope', 'dflt') }} [{{ m.nope }}] [{{ m['nope'] }}]", {"m": {"role": "user", "content": "hi"}}),
    ("list_index", "{{ xs[0] }} {{ xs[-1] }} [{{ xs[10] }}] {{ xs.1 }}", {"xs": ["a", "b", "c"]}),
    ("slices", "{{ xs[1:] }} {{ xs[:2] }} {{ xs[::-1] }} {{ xs[::2] }} {{ xs[-2:] }} {{ xs[1:-1] }} {{ xs[5:] }} {{ xs[3:0:-1] }}", {"xs": [1, 2, 3, 4, 5]}),
    ("string_slices_unicode", "{{ s[1:3] }} {{ s[::-1] }} {{ s[-1] }} {{ s|length }} {{ s[0] }}", {"s": "héllo😀"}),
    ("dict_method_attr_wins", "{{ d.items()|list }} {{ d['items'] }}", {"d": {"items": 5, "k": 1}}),
    ("none_attr_is_undefined", "[{{ n.foo }}] {{ n.foo is defined }}", {"n": None}),

    # --- statements ---------------------------------------------------------------------------------------
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endfor %}", {}),
    ("for_loop_vars", "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}", {}),
    ("for_prev_next", "{% for x in [1, 2, 3] %}({{ loop.previtem }},{{ loop.nextitem }}){% endfor %}", {}),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %} {% for x in [1] %}x{% else %}empty{% endfor %}", {}),
    ("for_unpack", "{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for a, b in [[1, 2], (3, 4)] %}{{ a + b }}{% endfor %}", {"d": {"x": 1, "y": 2}}),
    ("for_dict_iterates_keys", "{% for k in d %}{{ k }}{% endfor %}", {"d": {"b": 1, "a": 2}}),
    ("for_filter_cond", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", {}),
    ("for_nested_loop", "{% for a in [1, 2] %}{% set outer = loop %}{% for b in 'xy' %}{{ outer.index }}{{ loop.index }}{{ b }} {% endfor %}{% endfor %}", {}),
    ("break_continue", "{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", {}),
    ("loop_cycle_changed", "{% for x in [1, 1, 2] %}{{ loop.cycle('a', 'b') }}{{ loop.changed(x) }} {% endfor %}", {}),
    ("set_scoping_loop", "{% set x = 1 %}{% for i in [1, 2] %}[{{ x }}]{% set x = i * 10 %}({{ x }}){% endfor %}{{ x }}", {}),
    ("set_in_if_leaks", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("set_per_iteration", "{% for i in [1, 2, 3] %}{% if i == 2 %}{% set z = 5 %}{% endif %}[{{ z }}]{% endfor %}", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for i in range(4) %}{% set ns.count = ns.count + i %}{% if i == 2 %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }} [{{ ns.missing }}]", {}),
    ("namespace_from_dict", "{% set ns = namespace({'a': 1}, b=2) %}{{ ns.a }}{{ ns.b }}", {}),
    ("set_tuple", "{% set a, b = 1, 'two' %}{{ a }}{{ b }}", {}),
    ("set_block", "{% set block %}  hi {{ 1 + 1 }}\n{% endset %}[{{ block }}]", {}),
    ("set_block_filter", "{% set block | upper | trim %}  hi  {% endset %}[{{ block }}]", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('A') }} {{ greet('B', '?') }} {{ greet(punct='.', name='C') }} [{{ greet() }}]", {}),
    ("macro_sees_globals_at_call", "{% macro m() %}{{ y }}{% endmacro %}{% set y = 3 %}{{ m() }}{% set y = 4 %}{{ m() }}", {}),
    ("macro_recursion", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_default_uses_param", "{% macro m(a, b=a * 2) %}{{ a }},{{ b }}{% endmacro %}{{ m(3) }}", {}),
    ("filter_block", "{% filter upper %}hello {{ 'world' }}{% endfilter %}", {}),
    ("with_block", "{% set a = 1 %}{% with a = 2, b = a %}{{ a }}{{ b }}{% endwith %}{{ a }}", {}),

    # --- filters ------------------------------------------------------------------------------------------
    ("filter_trim", "[{{ '  a b \n' | trim }}] [{{ 'xxaxx' | trim('x') }}] [{{ '\u3000a\u00a0' | trim }}]", {}),
    ("filter_length_count", "{{ [1, 2] | length }} {{ 'héllo' | length }} {{ {'a': 1} | count }} {{ u | length }}", {}),
    ("filter_case", "{{ 'hello World' | upper }} {{ 'Hello' | lower }} {{ 'hello wORLD' | capitalize }} {{ 'hello wORLD-foo (bar)' | title }}", {}),
    ("filter_first_last", "{{ [1, 2, 3] | first }} {{ [1, 2, 3] | last }} {{ 'abc' | first }} {{ 'abc' | last }} [{{ [] | first }}]", {}),
    ("filter_join", "{{ [1, 2, 3] | join(', ') }} {{ ['a', 'b'] | join }} {{ users | join(',', attribute='name') }}", {"users": [{"name": "x"}, {"name": "y"}]}),
    ("filter_default", "{{ u | default('d') }} {{ none | default('d') }} {{ '' | default('d', true) }} {{ 'v' | d('d') }} [{{ u | default }}]", {}),
    ("filter_replace", "{{ 'aaa' | replace('a', 'b') }} {{ 'aaa' | replace('a', 'b', 2) }} {{ 123 | replace('2', 'x') }}", {}),
    ("filter_reverse", "{{ 'abc' | reverse }} {{ [1, 2, 3] | reverse | list }} {{ [1, 2] | reverse | join(',') }}", {}),
    ("filter_list_items", "{{ 'ab' | list }} {{ {'a': 1} | list }} {% for k, v in {'x': 1, 'y': 2} | items %}{{ k }}{{ v }}{% endfor %}", {}),
    ("filter_int_float", "{{ '42' | int }} {{ '4.7' | int }} {{ 4.7 | int }} {{ 'x' | int }} {{ 'x' | int(7) }} {{ '0x1A' | int(0, 16) }} {{ '3' | float }} {{ 'a' | float }} {{ true | int }} {{ ' 12 ' | int }}", {}),
    ("filter_string", "{{ 1 | string }} {{ [1, 'a'] | string }} {{ none | string }} [{{ u | string }}]", {}),
    ("filter_abs_round", "{{ -3 | abs }} {{ 2.5 | round }} {{ 3.5 | round }} {{ 2.675 | round(2) }} {{ 2.1 | round(0, 'ceil') }} {{ 7 | round }}", {}),
    ("filter_escape_safe", "{{ '<a href=\"x\">&\\'</a>' | e }} {{ '<b>' | safe }} {{ '<b>' | safe | e }} {{ ('<b>' | safe) + '<i>' }}", {}),
    ("filter_center_indent", "[{{ 'ab' | center(7) }}] [{{ 'a\nb\n\nc' | indent(2) }}] [{{ 'a\nb' | indent(2, true) }}] [{{ 'a\n\nb' | indent('> ', blank=true) }}]", {}),
    ("filter_map_select", "{{ users | map(attribute='name') | join(',') }} {{ [1, 2, 3, 4] | select('odd') | list }} {{ [1, 2, 3, 4] | reject('odd') | list }} {{ users | selectattr('admin') | map(attribute='name') | list }} {{ users | rejectattr('admin') | map(attribute='name') | list }} {{ users | selectattr('name', 'equalto', 'y') | list | length }} {{ ['a', 'B'] | map('upper') | list }}", {"users": [{"name": "x", "admin": True}, {"name": "y", "admin": False}]}),
    ("filter_sort_min_max_unique_sum", "{{ [3, 1, 2] | sort }} {{ ['b', 'A', 'c'] | sort }} {{ [3, 1, 2] | sort(reverse=true) }} {{ users | sort(attribute='age') | map(attribute='name') | join }} {{ [3, 1, 2] | min }} {{ ['b', 'A'] | max }} {{ ['a', 'A', 'b'] | unique | list }} {{ [1, 2, 3] | sum }} {{ users | sum(attribute='age') }}", {"users": [{"name": "x", "age": 30}, {"name": "y", "age": 20}]}),
    ("filter_dictsort", "{{ {'b': 1, 'a': 2} | dictsort }} {{ {'b': 1, 'a': 2} | dictsort(by='value', reverse=true) }}", {}),
    ("filter_format", "{{ '%s and %s' | format('a', 1) }}", {}),
    ("filter_chain", "{{ ' Hello ' | trim | lower | replace('l', 'L') | length }}", {}),

    # --- tojson (transformers' json.dumps) ----------------------------------------------------------------
    ("tojson_basic", "{{ d | tojson }}", {"d": {"name": "f", "args": [1, 2.5, True, None, "é\"\n\u2028"], "z": {}}}),
    ("tojson_indent", "{{ d | tojson(indent=2) }}", {"d": {"a": [1, {"b": []}], "c": "x"}}),
    ("tojson_options", "{{ d | tojson(sort_keys=true) }} {{ d | tojson(separators=(',', ':')) }} {{ 'é😀' | tojson(ensure_ascii=true) }} {{ '\\x01\\x1f' | tojson }}", {"d": {"b": 1, "a": 2}}),
    ("tojson_literals", "{{ {'t': (1, 2), 1: 'int key', 'f': 1e20, 'n': -0.5} | tojson }}", {}),

    # --- tests --------------------------------------------------------------------------------------------
    ("tests_types", "{{ 'a' is string }} {{ 1 is number }} {{ true is number }} {{ 1 is integer }} {{ 1.0 is float }} {{ {} is mapping }} {{ [] is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ 1 is iterable }} {{ [] is sequence }} {{ {} is sequence }} {{ none is none }} {{ true is boolean }}", {}),
    ("tests_defined", "{{ u is defined }} {{ u is undefined }} {{ x is defined }} {{ x is not defined }} {{ m.content is defined }} {{ m.reasoning is defined }}", {"x": 1, "m": {"content": "c"}}),
    ("tests_true_false", "{{ true is true }} {{ 1 is true }} {{ false is false }} {{ 0 is false }} {{ x is false }} {{ x is not false }}", {"x": False}),
    ("tests_numbers", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }} {{ 2 is lt 3 }} {{ 2 is ge 3 }} {{ 2 is eq 2 }} {{ 2 is ne 2 }} {{ 2 is in [1, 2] }}", {}),
    ("tests_misc", "{{ none is sameas none }} {{ false is sameas false }} {{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'Abc' is lower }} {{ range is callable }} {{ 'x' is callable }} {{ ('<b>'|e) is escaped }}", {}),

    # --- string methods -----------------------------------------------------------------------------------
    ("str_methods_1", "{{ s.startswith('He') }} {{ s.endswith('!') }} {{ s.startswith(('x', 'H')) }} [{{ s.strip() }}] [{{ s.lstrip() }}] [{{ s.rstrip() }}] {{ s.strip(' !') }}", {"s": "  Hello world!  "}),
    ("str_methods_split", "{{ s.split() }} {{ s.split(',') }} {{ s.split(',', 1) }} {{ s.rsplit(',', 1) }} {{ 'a  b '.split(' ') }} {{ ' a b  c '.split(None, 1) }} {{ ' a b  c '.rsplit(None, 1) }}", {"s": "a,b, c"}),
    ("str_methods_2", "{{ s.upper() }} {{ s.lower() }} {{ s.title() }} {{ s.capitalize() }} {{ s.replace('o', '0') }} {{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('z') }} {{ s.count('o') }} {{ '-'.join(['a', 'b']) }}", {"s": "hello wOrld 1st"}),
    ("str_methods_3", "{{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' '.isspace() }} {{ 'ab'.islower() }} {{ 'x-y'.removeprefix('x-') }} {{ 'a\nb\r\nc'.splitlines() }}", {}),
    ("think_split", "{% set c = m.split('</think>')[-1].lstrip('\\n') %}{% set r = m.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') %}[{{ r }}][{{ c }}]", {"m": "<think>\nreasoning here\n</think>\n\nThe answer."}),
    ("unicode_case", "{{ 'éa' | upper }} {{ 'ÉA' | lower }} {{ 'ñandú' | title }}", {}),

    # --- globals ------------------------------------------------------------------------------------------
    ("range", "{{ range(3) | list }} {{ range(1, 7, 2) | list }} {{ range(5, 0, -2) | list }} {{ range(3) | length }} {{ range(0) | list }}", {}),
    ("dict_global", "{{ dict(a=1, b='x') }}", {}),

    # --- real-template idioms -----------------------------------------------------------------------------
    ("reverse_scan", "{% set ns = namespace(last=-1) %}{% for m in messages[::-1] %}{% set idx = (messages|length - 1) - loop.index0 %}{% if ns.last == -1 and m.role == 'user' %}{% set ns.last = idx %}{% endif %}{% endfor %}{{ ns.last }}", {"messages": MSGS}),
    ("chatml_loop", "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}", {"messages": MSGS, "add_generation_prompt": True}),
    ("tool_calls_json", "{% for tc in calls %}{% if tc.function %}{% set tc = tc.function %}{% endif %}<tool_call>{\"name\": \"{{ tc.name }}\", \"arguments\": {{ tc.arguments | tojson }}}</tool_call>{% endfor %}", {"calls": [{"function": {"name": "get", "arguments": {"city": "Paris", "n": 2}}}, {"name": "x", "arguments": {}}]}),

    # --- errors jinja2 raises too (C++: any tandem::Error) -------------------------------------------------
    ("err_attr_of_undefined", "{{ u.x }}", {}),
    ("err_call_undefined", "{{ u() }}", {}),
    ("err_add_undefined", "{{ u + 1 }}", {}),
    ("err_raise_exception", "{{ raise_exception('Bad role: ' ~ r) }}", {"r": "robot"}),
    ("err_type_add", "{{ 'a' + 1 }}", {}),
    ("err_div_zero", "{{ 1 / 0 }}", {}),
    ("err_tojson_undefined", "{{ u | tojson }}", {}),
    ("err_iterate_int", "{% for x in 5 %}{% endfor %}", {}),
    ("err_unclosed_if", "{% if true %}x", {}),
    ("err_unknown_tag", "{% frobnicate %}", {}),
    ("err_mutating_method", "{% set xs = [] %}{{ xs.append(1) }}", {}),
    ("err_set_attr_non_namespace", "{% set d = {} %}{% set d.x = 1 %}", {}),
    ("err_unpack_mismatch", "{% for a, b in [[1, 2, 3]] %}{% endfor %}", {}),
    ("err_compare_types", "{{ 1 < 'a' }}", {}),
    ("err_range_too_big", "{{ range(200000) | length }}", {}),
    ("err_syntax", "{{ 1 + }}", {}),
    ("err_unclosed_var", "{{ 1", {}),
    ("err_neg_applies_before_filter", "{{ -xs|length }}", {"xs": [1]}),
    ("err_concat_binds_tighter_than_plus", "{{ 1 + 2 ~ 3 }}", {}),
    ("err_unclosed_comment", "{# x", {}),
]


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
                                          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                         "required": ["city"]}}}]
TOOL_CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "content": "{\"temp\": 21}"},
    {"role": "tool", "content": "sunny"},
    {"role": "assistant", "content": "<think>\nIt is warm.\n</think>\n\n21 degrees and sunny."},
    {"role": "user", "content": "Thanks! Ünïcödé 😀"},
]
THINK_CONVERSATION = [
    {"role": "user", "content": "2+2?"},
    {"role": "assistant", "content": "<think>\nsimple\n</think>\n\n4"},
    {"role": "user", "content": "3+3?"},
    {"role": "assistant", "content": "6", "reasoning_content": "add them"},
]

# Real templates: (name, template file relative to the shared assets or builtin:NAME, bos, eos, messages,
# add_generation_prompt, extra variables)
REAL_CASES = [
    ("qwen3_tools", "tokenizer-qwen3/tokenizer_config.json", "", "<|im_end|>", TOOL_CONVERSATION, True, {"tools": TOOLS}),
    ("qwen3_no_thinking", "tokenizer-qwen3/tokenizer_config.json", "", "<|im_end|>", MSGS, True, {"enable_thinking": False}),
    ("qwen3_thinking_history", "tokenizer-qwen3/tokenizer_config.json", "", "<|im_end|>", THINK_CONVERSATION, False, {}),
    ("qwen3_tool_string_args", "tokenizer-qwen3/tokenizer_config.json", "", "<|im_end|>",
     [{"role": "user", "content": "x"}, {"role": "assistant", "content": "ok",
       "tool_calls": [{"name": "f", "arguments": "{\"a\": 1}"}]}], False, {}),
    ("llama3_trim", "tokenizer-llama3/tokenizer_config.json", "<|begin_of_text|>", "<|eot_id|>",
     [{"role": "user", "content": "  padded \n"}, {"role": "assistant", "content": "\nreply "}], True, {}),
    ("builtin_chatml", "builtin:chatml", "", "", MSGS, True, {}),
    ("builtin_llama3", "builtin:llama3", "<|begin_of_text|>", "<|eot_id|>", MSGS, False, {}),
    ("builtin_alpaca_system", "builtin:alpaca", "<s>", "</s>", MSGS, True, {}),
    ("builtin_alpaca_default", "builtin:alpaca", "<s>", "</s>", MSGS[1:3], False, {}),
    ("builtin_alpaca_bad_role", "builtin:alpaca", "<s>", "</s>", [{"role": "tool", "content": "x"}], False, {}),
]


def load_template(spec, assets):
    if spec.startswith("builtin:"):
        here = os.path.dirname(os.path.abspath(__file__))
        with open(os.path.join(here, "..", "..", "resources", "chat_templates", spec[8:] + ".jinja"), encoding="utf-8") as f:
            return f.read()
    with open(os.path.join(assets, spec), encoding="utf-8") as f:
        return json.load(f)["chat_template"]


def c_string(s):
    out = []
    for ch in s.encode("utf-8"):
        c = chr(ch)
        if c == "\\":
            out.append("\\\\")
        elif c == '"':
            out.append('\\"')
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "?":
            out.append("\\?")  # no trigraphs
        elif 0x20 <= ch < 0x7F:
            out.append(c)
        else:
            out.append("\\%03o" % ch)
    return '"' + "".join(out) + '"'


def main():
    env = make_env()
    rows = []
    names = set()
    for name, template, variables in CASES:
        assert name not in names, name
        names.add(name)
        try:
            rendered = env.from_string(template).render(**variables)
            expect_error = False
        except Exception as e:  # noqa: BLE001 - any jinja2 failure means "must throw"
            rendered = "%s: %s" % (type(e).__name__, e)
            expect_error = True
        rows.append("    {%s,\n     %s,\n     %s,\n     %s, %s}," % (
            c_string(name), c_string(template), c_string(json.dumps(variables, ensure_ascii=False)),
            c_string(rendered), "true" if expect_error else "false"))
    here = os.path.dirname(os.path.abspath(__file__))
    assets = os.path.join(here, "..", "..", "..", "shared", "assets")
    real_rows = []
    for name, spec, bos, eos, messages, agp, extra in REAL_CASES:
        variables = dict(messages=messages, tools=None, documents=None, add_generation_prompt=agp)
        if bos:
            variables["bos_token"] = bos
        if eos:
            variables["eos_token"] = eos
        variables.update(extra)
        try:
            rendered = env.from_string(load_template(spec, assets)).render(**variables)
            expect_error = False
        except Exception as e:  # noqa: BLE001
            rendered = "%s: %s" % (type(e).__name__, e)
            expect_error = True
        real_rows.append("    {%s, %s, %s, %s,\n     %s,\n     %s, %s,\n     %s,\n     %s}," % (
            c_string(name), c_string(spec), c_string(bos), c_string(eos),
            c_string(json.dumps(messages, ensure_ascii=False)), "true" if agp else "false",
            c_string(json.dumps(extra, ensure_ascii=False)), c_string(rendered), "true" if expect_error else "false"))
    out = os.path.join(here, "..", "chat_template_real_cases.inc")
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated by tests/reference/jinja_subset_cases.py with Python jinja2 %s (configured like\n"
                "// transformers' chat templates) from the real templates. Do not edit: re-run the script.\n"
                "// {name, template (assets path or builtin:NAME), bos, eos, messages, add_generation_prompt, extra,\n"
                "//  expected rendering (or jinja2's error), jinja2 raised}\n" % jinja2.__version__)
        f.write("\n".join(real_rows) + "\n")
    print("wrote %d cases to %s" % (len(real_rows), os.path.normpath(out)))

    out = os.path.join(here, "..", "chat_template_cases.inc")
    with open(out, "w", encoding="utf-8") as f:
        f.write("// Generated by tests/reference/jinja_subset_cases.py with Python jinja2 %s (configured like\n"
                "// transformers' chat templates). Do not edit: change the script and re-run it.\n"
                "// {name, template, variables as JSON, expected rendering (or jinja2's error), jinja2 raised}\n"
                % jinja2.__version__)
        f.write("\n".join(rows) + "\n")
    print("wrote %d cases to %s" % (len(rows), os.path.normpath(out)))


if __name__ == "__main__":
    sys.exit(main())
