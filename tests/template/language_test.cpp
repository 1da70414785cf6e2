// The template language feature by feature, and its errors and limits.
//
// The cases of kCases were checked against Python Jinja2 3.1.2 in the
// environment of tests/template/render_expected.py (transformers' settings)
// when written: each expected output is Jinja2's.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "synapse/error.hpp"
#include "template/jinja.hpp"

namespace synapse::jinja {
namespace {

// 2026-03-14 15:09:26, a Saturday.
Options fixed_clock() {
  Options o;
  o.now = [] {
    std::tm t{};
    t.tm_year = 126;
    t.tm_mon = 2;
    t.tm_mday = 14;
    t.tm_hour = 15;
    t.tm_min = 9;
    t.tm_sec = 26;
    t.tm_wday = 6;
    t.tm_yday = 72;
    return t;
  };
  return o;
}

std::string render(std::string_view src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                   const Options& opt = fixed_clock()) {
  return Template::parse(src, opt).render(ctx);
}

// The message of the Error that parsing or rendering throws ("" if none).
std::string error_of(std::string_view src, const nlohmann::ordered_json& ctx = nlohmann::ordered_json::object(),
                     const Options& opt = fixed_clock()) {
  try {
    render(src, ctx, opt);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    return e.what();
  }
  return "";
}

struct Case {
  const char* name;
  const char* src;
  const char* context;  // JSON
  const char* want;
};

const Case kCases[] = {
    {"TrimBlocksDropsTheNewlineAfterATag",
     "{% if true %}\nyes\n{% endif %}\nend",
     "{}",
     "yes\nend"},
    {"LstripBlocksDropsIndentationBeforeATag",
     "a\n    {% if true %}\n  b\n    {% endif %}\nc",
     "{}",
     "a\n  b\nc"},
    {"LstripKeepsTextBeforeATagOnTheSameLine",
     "a  {% if true %}b{% endif %}",
     "{}",
     "a  b"},
    {"MinusStripsAllWhitespace",
     "a  \n {%- if true -%} \n b {{- ' c ' -}} \n d {%- endif %}",
     "{}",
     "ab c d"},
    {"PlusKeepsIndentationAndNewline",
     "a\n  {%+ if true +%}\nb{% endif %}",
     "{}",
     "a\n  \nb"},
    {"CommentsAreDroppedWithTheirLine",
     "a\n  {# note #}\nb {#- x -#} c",
     "{}",
     "a\nbc"},
    {"VariableTagsAreNotLstripped",
     "  {{ 1 }}\n  {{ 2 }}",
     "{}",
     "  1\n  2"},
    {"OneTrailingNewlineIsDropped",
     "a\n\n",
     "{}",
     "a\n"},
    {"NewlinesAreNormalized",
     "a\r\nb\rc",
     "{}",
     "a\nb\nc"},
    {"RawBlocksAreKeptAsWritten",
     "{% raw %}{{ x }}{% if %}{% endraw %}",
     "{}",
     "{{ x }}{% if %}"},
    {"IfElifElse",
     "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}many{% endif %} {% endf"
     "or %}",
     "{}",
     "one two many "},
    {"LoopVariables",
     "{% for x in 'abc' %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ "
     "loop.first }}{{ loop.last }}{{ loop.length }}|{% endfor %}",
     "{}",
     "1032TrueFalse3|2121FalseFalse3|3210FalseTrue3|"},
    {"LoopPrevNextItemAndCycle",
     "{% for x in [1, 2, 3] %}{{ loop.previtem is defined and loop.previtem }}-{{ loop.nextitem }}-{{"
     " loop.cycle('a', 'b') }} {% endfor %}",
     "{}",
     "False-2-a 1-3-b 2--a "},
    {"LoopChangedAndDepth",
     "{% for x in [1, 1, 2] %}{{ loop.changed(x) }}{{ loop.depth }}{{ loop.depth0 }} {% endfor %}",
     "{}",
     "True10 False10 True10 "},
    {"ForElseRunsWhenNothingIterates",
     "{% for x in [] %}x{% else %}empty{% endfor %}{% for x in [1] if x > 5 %}x{% else %}none{% endfo"
     "r %}",
     "{}",
     "emptynone"},
    {"ForFilterClauseCountsTheKeptItems",
     "{% for x in range(10) if x is odd %}{{ x }}/{{ loop.length }} {% endfor %}",
     "{}",
     "1/5 3/5 5/5 7/5 9/5 "},
    {"ForUnpacksTuples",
     "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}{% for (a, b) in [[1, 2]]"
     " %}{{ a + b }}{% endfor %}",
     "{}",
     "a=1;b=2;3"},
    {"ForOverADictGivesItsKeys",
     "{% for k in {'x': 1, 'y': 2} %}{{ k }}{% endfor %}",
     "{}",
     "xy"},
    {"BreakAndContinue",
     "{% for x in range(10) %}{% if x is even %}{% continue %}{% endif %}{% if x > 6 %}{% break %}{% "
     "endif %}{{ x }}{% endfor %}",
     "{}",
     "135"},
    {"RecursiveLoop",
     "{% for n in tree recursive %}{{ n.name }}{% if n.kids %}({{ loop(n.kids) }}){% endif %}{% endfo"
     "r %}",
     "{\"tree\": [{\"name\": \"a\", \"kids\": [{\"name\": \"b\", \"kids\": [{\"name\": \"c\"}]}, {\"n"
     "ame\": \"d\"}]}, {\"name\": \"e\"}]}",
     "a(b(c)d)e"},
    {"SetInALoopLastsOneIteration",
     "{% set x = 1 %}{% for i in [1, 2] %}{{ x }}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }}",
     "{}",
     "111 111 1"},
    {"SetInAnIfIsSeenAfterIt",
     "{% if true %}{% set x = 5 %}{% endif %}{{ x }}",
     "{}",
     "5"},
    {"NamespaceCarriesValuesOutOfLoops",
     "{% set ns = namespace(n=0, seen=[]) %}{% for i in [3, 4] %}{% set ns.n = ns.n + i %}{% endfor %"
     "}{{ ns.n }} {{ ns.seen }}",
     "{}",
     "7 []"},
    {"BlockSetWithAFilter",
     "{% set x | upper %}a{{ 1 + 1 }}b{% endset %}{{ x }}{% set y %}\n  z\n{% endset %}[{{ y }}]",
     "{}",
     "A2B[  z\n]"},
    {"TupleAssignment",
     "{% set a, b = 1, 'x' %}{{ b }}{{ a }}",
     "{}",
     "x1"},
    {"WithHasItsOwnScope",
     "{% set x = 1 %}{% with x = 2, y = 3 %}{{ x }}{{ y }}{% endwith %}{{ x }}{{ y is defined }}",
     "{}",
     "231False"},
    {"MacroDefaultsAndKeywords",
     "{% macro f(a, b=2, c=a * 10) %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ f(1) }} {{ f(1, c=5) }} {{"
     " f(b=7, a=3) }}",
     "{}",
     "1210 125 3730"},
    {"MacroMissingArgumentIsUndefined",
     "{% macro f(a, b) %}[{{ b }}]{{ b is defined }}{% endmacro %}{{ f(1) }}",
     "{}",
     "[]False"},
    {"MacroVarargsAndKwargs",
     "{% macro f(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ f(1, 2, 3, x=4) }}",
     "{}",
     "1(2, 3){'x': 4}"},
    {"MacroRecursion",
     "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}"
     "{{ fact(5) }}",
     "{}",
     "120"},
    {"MacroSeesOuterVariablesAtCallTime",
     "{% set x = 1 %}{% macro f() %}{{ x }}{% endmacro %}{% set x = 2 %}{{ f() }}",
     "{}",
     "2"},
    {"MacroReturnsAString",
     "{% macro f() %}ab{% endmacro %}{{ f() | length }}{{ f() is string }}",
     "{}",
     "2True"},
    {"CallBlockAndCaller",
     "{% macro list(items) %}<{% for i in items %}{{ caller(i) }}{% endfor %}>{% endmacro %}{% call(x"
     ") list([1, 2]) %}[{{ x }}]{% endcall %}",
     "{}",
     "<[1][2]>"},
    {"FilterBlock",
     "{% filter upper %}ab{{ 'c' }}{% endfilter %}{% filter trim | replace('x', 'y') %}  x  {% endfil"
     "ter %}",
     "{}",
     "ABCy"},
    {"GenerationRendersItsBody",
     "a{% generation %}b{{ 1 }}{% endgeneration %}c",
     "{}",
     "ab1c"},
    {"Arithmetic",
     "{{ 7 + 2 }} {{ 7 - 2.5 }} {{ 7 * 2 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 "
     "% 3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }}",
     "{}",
     "9 4.5 14 3.5 3 -4 1 2 1024 0.5 3.0"},
    {"UnaryMinusBindsTighterThanPower",
     "{{ -2 ** 2 }} {{ 2 ** 3 ** 2 }}",
     "{}",
     "4 64"},
    {"StringOperators",
     "{{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ 'a' + 'b' }} {{ [1] + [2] }} {{ [0] * 3 }}",
     "{}",
     "a1NoneTrue ababab ab [1, 2] [0, 0, 0]"},
    {"Comparisons",
     "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, "
     "3] }} {{ 'a' != 'b' }} {{ 2 >= 2 }} {{ none == none }}",
     "{}",
     "True False True True True True True True True"},
    {"InAndNotIn",
     "{{ 'b' in 'abc' }} {{ 2 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in [1] }} {{ not 1 in [1] }"
     "} {{ 'x' in missing }}",
     "{}",
     "True True True True False False"},
    {"AndOrReturnOperands",
     "{{ 0 or 'x' }} {{ 'a' and 'b' }} {{ '' and 'b' }}|{{ none or [] }}",
     "{}",
     "x b |[]"},
    {"ConditionalExpression",
     "{{ 'y' if 1 else 'n' }} {{ 'y' if 0 else 'n' }} [{{ 'y' if 0 }}] {{ 1 if 0 else 2 if 1 else 3 }"
     "}",
     "{}",
     "y n [] 2"},
    {"Literals",
     "{{ 0x1F }} {{ 1_000 }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2.50 }} {{ True }} {{ none }} {{ ("
     "1,) }} {{ () }} {{ {'a': [1, (2, 3)]} }}",
     "{}",
     "31 1000 15 5 1500.0 2.5 True None (1,) () {'a': [1, (2, 3)]}"},
    {"StringEscapes",
     "{{ 'a\\tb\\n\\'q\\'' }}{{ \"\\u00e9\\x41\\101\\\\\" }}{{ 'it''s' }}",
     "{}",
     "a\tb\n'q'éAA\\its"},
    {"PythonPrintsFloatsAndContainers",
     "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e16 }} {{ 1e-5 }} {{ 123456789.0 }} {{ [1.0, 'x', \"it's\", none,"
     " false] }}",
     "{}",
     "1.0 0.30000000000000004 1e+16 1e-05 123456789.0 [1.0, 'x', \"it's\", None, False]"},
    {"SubscriptsAndSlices",
     "{{ 'héllo'[1] }} {{ 'héllo'[-1] }} {{ 'héllo'[1:3] }} {{ 'hello'[::-1] }} {{ [1, 2, 3, 4][1::2]"
     " }} {{ [1, 2, 3][-2:] }} {{ (1, 2, 3)[:1] }} [{{ [1][5] }}]",
     "{}",
     "é o él olleh [2, 4] [2, 3] (1,) []"},
    {"AttributesOfDicts",
     "{{ m.role }} {{ m['role'] }} [{{ m.missing }}] {{ m.items()|list }} {{ m.get('x', 'd') }} {{ m."
     "content.text }}",
     "{\"m\": {\"role\": \"user\", \"content\": {\"text\": \"hi\"}}}",
     "user user [] [('role', 'user'), ('content', {'text': 'hi'})] d hi"},
    {"NoneAttributesAreUndefined",
     "[{{ n.x }}][{{ n['x'] }}]{{ n.x is defined }}",
     "{\"n\": null}",
     "[][]False"},
    {"UndefinedPrintsNothingAndIsFalse",
     "[{{ nope }}]{{ nope is defined }}{{ nope|length }}{% for x in nope %}x{% endfor %}{{ nope|defau"
     "lt('d') }}{{ none|default('d') }}",
     "{}",
     "[]False0dNone"},
    {"StringMethods",
     "{{ '  a b  '.strip() }}|{{ 'xxaxx'.strip('x') }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() "
     "}}|{{ 'a b c'.split(' ', 1) }}|{{ 'abc'.startswith(('x', 'a')) }}|{{ 'abc'.endswith('bc') }}|{{"
     " 'aXbX'.replace('X', '-') }}|{{ 'ab'.upper() }}{{ 'AB'.lower() }}|{{ 'hello world'.title() }}|{"
     "{ 'hELLO'.capitalize() }}|{{ '{}-{x}'.format(1, x=2) }}|{{ '-'.join(['a', 'b']) }}|{{ 'héllo'.f"
     "ind('l') }}|{{ 'banana'.count('a') }}|{{ 'a\\nb'.splitlines() }}",
     "{}",
     "a b|a|['a', 'b', '', 'c']|['a', 'b']|['a', 'b c']|True|True|a-b-|ABab|Hello World|Hello|1-2|a-b"
     "|2|3|['a', 'b']"},
    {"ListMethodsChangeTheList",
     "{% set l = [3, 1] %}{{ l.append(2) }}{{ l }} {{ l.pop() }}{{ l.pop(0) }}{{ l }} {{ [1, 2, 3].in"
     "dex(2) }} {% set _ = l.extend([5, 5]) %}{{ l.count(5) }}",
     "{}",
     "None[3, 1, 2] 23[1] 1 2"},
    {"DictMethods",
     "{% set d = {'b': 1, 'a': 2} %}{{ d.keys()|list }} {{ d.values()|list }} {{ d.get('zz') }} {{ d."
     "pop('b') }} {% set _ = d.update({'c': 3}) %}{{ d }} {{ d.setdefault('e', 9) }}",
     "{}",
     "['b', 'a'] [1, 2] None 1 {'a': 2, 'c': 3} 9"},
    {"Tests",
     "{{ x is defined }}{{ y is undefined }}{{ none is none }}{{ 's' is string }}{{ {} is mapping }}{"
     "{ [] is iterable }}{{ 's' is sequence }}{{ 1 is number }}{{ 1 is integer }}{{ 1.0 is float }}{{"
     " true is boolean }}{{ true is true }}{{ false is false }}{{ 3 is odd }}{{ 4 is even }}{{ 9 is d"
     "ivisibleby 3 }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 2 is in [2] }}{{ "
     "range is callable }}{{ 1 is not string }}{{ 'a' is equalto 'a' }}{{ 'up' is lower }}",
     "{\"x\": 1}",
     "TrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTru"
     "eTrue"},
    {"TrueIsANumberButNotAnInteger",
     "{{ true is number }}{{ true is integer }}{{ 1 is boolean }}",
     "{}",
     "TrueFalseFalse"},
    {"TojsonLikePythonJsonDumps",
     "{{ d|tojson }}|{{ d|tojson(indent=2) }}|{{ d|tojson(separators=(',', ':')) }}|{{ d|tojson(sort_"
     "keys=true) }}|{{ 'é\"<'|tojson }}|{{ 'é'|tojson(ensure_ascii=true) }}|{{ [1.0, none, true]|tojs"
     "on }}|{{ {}|tojson(indent=2) }}",
     "{\"d\": {\"b\": [1, 2], \"a\": {\"x\": null}}}",
     "{\"b\": [1, 2], \"a\": {\"x\": null}}|{\n  \"b\": [\n    1,\n    2\n  ],\n  \"a\": {\n    \"x\""
     ": null\n  }\n}|{\"b\":[1,2],\"a\":{\"x\":null}}|{\"a\": {\"x\": null}, \"b\": [1, 2]}|\"é\\\"<"
     "\"|\"\\u00e9\"|[1.0, null, true]|{}"},
    {"TojsonOfAMapResultIsAList",
     "{{ tools|map(attribute='name')|tojson }}",
     "{\"tools\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}",
     "[\"a\", \"b\"]"},
    {"StringFilters",
     "{{ '  x '|trim }}|{{ 'xyx'|trim('x') }}|{{ 'ab'|upper }}{{ 'AB'|lower }}|{{ 'hello wORLD-x'|tit"
     "le }}|{{ 'hELLO'|capitalize }}|{{ 'aaa'|replace('a', 'b', 2) }}|{{ 'a b  c'|wordcount }}|{{ 'ab"
     "'|center(6) }}|{{ 'abc'|reverse }}|{{ 'x'|string }}{{ 1|string }}",
     "{}",
     "x|y|ABab|Hello World-X|Hello|bba|3|  ab  |cba|x1"},
    {"IndentFilter",
     "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent('> ', blank=t"
     "rue) }}",
     "{}",
     "a\n  b\n\n  c|  a\n  b|a\n> \n> b"},
    {"NumberFilters",
     "{{ '42'|int }} {{ '4.7'|int }} {{ 'x'|int(7) }} {{ '0x1A'|int(base=16) }} {{ '2.5'|float }} {{ "
     "2.675|round(2) }} {{ 2.5|round }} {{ 3.14159|round(2, 'floor') }} {{ -3|abs }} {{ [3, 1, 2]|max"
     " }} {{ [3, 1, 2]|min }} {{ [1, 2, 3]|sum }} {{ [{'n': 2}, {'n': 3}]|sum(attribute='n') }}",
     "{}",
     "42 4 7 26 2.5 2.67 2.0 3.14 3 3 1 6 5"},
    {"SequenceFilters",
     "{{ [1, 2, 3]|first }}{{ [1, 2, 3]|last }}{{ 'abc'|list }}{{ [1, 2]|length }}{{ {'a': 1}|count }"
     "}|{{ ['b', 'a', 'B']|unique|list }}|{{ ['b', 'a', 'C']|sort }}|{{ [3, 1, 2]|sort(reverse=true) "
     "}}|{{ [1, 2, 3, 4, 5]|batch(2)|list }}|{{ [1, 2, 3]|reverse|list }}|{{ [1, 2]|join('-') }}|{{ ["
     "{'n': 'x'}, {'n': 'y'}]|join(',', attribute='n') }}",
     "{}",
     "13['a', 'b', 'c']21|['b', 'a']|['a', 'b', 'C']|[3, 2, 1]|[[1, 2], [3, 4], [5]]|[3, 2, 1]|1-2|x,"
     "y"},
    {"SortByAttribute",
     "{% for u in users|sort(attribute='age') %}{{ u.name }}{% endfor %} {{ users|map(attribute='name"
     "')|join }} {{ users|map(attribute='missing', default='?')|join }}",
     "{\"users\": [{\"name\": \"a\", \"age\": 30}, {\"name\": \"b\", \"age\": 10}, {\"name\": \"c\", "
     "\"age\": 20}]}",
     "bca abc ???"},
    {"SelectAndReject",
     "{{ [1, 2, 3, 4]|select('odd')|list }} {{ [1, 2, 3, 4]|reject('odd')|list }} {{ [0, 1, '', 'a']|"
     "select|list }} {{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list }} {{ ms|rej"
     "ectattr('c')|list|length }} {{ ms|selectattr('role', 'in', ['system'])|list|length }}",
     "{\"ms\": [{\"role\": \"user\", \"c\": \"x\"}, {\"role\": \"system\", \"c\": \"\"}, {\"role\": "
     "\"user\", \"c\": \"z\"}]}",
     "[1, 3] [2, 4] [1, 'a'] ['x', 'z'] 1 1"},
    {"MapWithAFilter",
     "{{ ['a', 'b']|map('upper')|list }} {{ [1.5, 2.5]|map('int')|list }} {{ ['a']|map('replace', 'a'"
     ", 'z')|list }}",
     "{}",
     "['A', 'B'] [1, 2] ['z']"},
    {"DictsortAndItems",
     "{{ {'b': 1, 'A': 2, 'c': 0}|dictsort }} {{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) "
     "}} {{ {'x': 1}|items|list }}",
     "{}",
     "[('A', 2), ('b', 1), ('c', 0)] [('a', 2), ('b', 1)] [('x', 1)]"},
    {"DefaultWithBoolean",
     "{{ ''|default('d') }}|{{ ''|default('d', true) }}|{{ 0|d(5, boolean=true) }}|{{ x|d('u') }}",
     "{}",
     "|d|5|u"},
    {"SafeAndEscape",
     "{{ '<b>'|e }} {{ ('<i>'|safe) + '<' }} {{ '<'|safe ~ '<' }} {{ '&'|escape|escape }}",
     "{}",
     "&lt;b&gt; <i>&lt; << &amp;"},
    {"Range",
     "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}",
     "{}",
     "[0, 1, 2] [1, 3, 5] [3, 2, 1]"},
    {"DictAndNamespace",
     "{{ dict(a=1, b='x') }} {% set ns = namespace(dict(k=1), j=2) %}{{ ns.k }}{{ ns.j }}",
     "{}",
     "{'a': 1, 'b': 'x'} 12"},
    {"StrftimeNowReadsTheClock",
     "{{ strftime_now('%Y-%m-%d %H:%M %a %b %d') }}",
     "{}",
     "2026-03-14 15:09 Sat Mar 14"},
    {"JoinerAndCycler",
     "{% set j = joiner('|') %}{% for x in [1, 2, 3] %}{{ j() }}{{ x }}{% endfor %} {% set c = cycler"
     "('a', 'b') %}{{ c.next() }}{{ c.next() }}{{ c.next() }}",
     "{}",
     "1|2|3 aba"},
    {"PrintingPythonValues",
     "{{ true }} {{ 3 / 1 }} {{ {'a': none} }} {{ 'x' ~ 2.0 }} {{ [[], {}] }} {{ \"'\" }} {{ ['\\'', "
     "'\"', '\\n'] }}",
     "{}",
     "True 3.0 {'a': None} x2.0 [[], {}] ' [\"'\", '\"', '\\n']"},
    {"HuggingFaceStyle",
     "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>\n{{ m.content | trim }}\n{% endfor %}{% "
     "if add_generation_prompt %}<|assistant|>\n{% endif %}",
     "{\"bos_token\": \"<s>\", \"messages\": [{\"role\": \"user\", \"content\": \" hi \"}], \"add_gen"
     "eration_prompt\": true}",
     "<s><|user|>\nhi\n<|assistant|>\n"},
    {"PercentFormatting",
     "{{ '%s and %d' % ('a', 3) }} {{ '%05.1f|%-4s|%x|%r' % (3.14159, 'ab', 255, 'q') }} {{ '%(n)s%%'"
     " % {'n': 1} }} {{ '%s'|format([1]) }}",
     "{}",
     "a and 3 003.1|ab  |ff|'q' 1% [1]"},
    {"StrFormat",
     "{{ '{:>6}|{:<4}|{:^5}|{:05d}|{:.2f}|{:,}|{!r}|{:x}'.format('ab', 'c', 'd', 42, 3.14159, 1234567"
     ", 'q', 255) }} {{ '{0}{1}{0}'.format('a', 'b') }} {{ '{m[k]}{n.x}'.format(m={'k': 1}, n={'x': 2"
     "}) }}",
     "{}",
     "    ab|c   |  d  |00042|3.14|1,234,567|'q'|ff aba 12"},
    {"BlockRendersInPlace",
     "{% block head %}<{{ title }}>{% endblock %}{% print 1, 'x' %}",
     "{\"title\": \"T\"}",
     "<T>1x"},
    {"DictsWithNumberKeys",
     "{% set d = {0: 'a', 512: 'b'} %}{{ d[512] }}{{ d }}{{ d|dictsort }}{{ {1: 'x'}[1.0] }}{{ {true:"
     " 'y'}[1] }}{{ {(1, 2): 3}[(1, 2)] }}{{ {1: 2}|tojson }}",
     "{}",
     "b{0: 'a', 512: 'b'}[(0, 'a'), (512, 'b')]xy3{\"1\": 2}"},
    {"MarkupEscapesWhatIsAddedToIt",
     "{{ ('<b>'|safe + '<i>') }}|{{ ('x'|safe ~ '<') }}|{{ ('<'|e) + '&' }}|{{ '<'|safe is escaped }}"
     "{{ '<' is escaped }}",
     "{}",
     "<b>&lt;i&gt;|x<|&lt;&amp;|TrueFalse"},
    {"ForElseRunsWhenNoIterationReachedTheEnd",
     "{% for x in [1, 2] %}{% continue %}{% else %}else{% endfor %}|{% for x in [1, 2] %}{% if x == 2"
     " %}{% break %}{% endif %}{% else %}else{% endfor %}|{% for x in [1] %}{% break %}{% else %}else"
     "{% endfor %}",
     "{}",
     "else||else"},
    {"SplitWithMaxsplitKeepsTheRest",
     "{{ '  a b  c  '.split(none, 1) }}{{ '  a b  c  '.rsplit(none, 1) }}",
     "{}",
     "['a', 'b  c  ']['  a b', 'c']"},
    {"RangesPrintAsPython",
     "{{ range(3) }} {{ range(1, 10, 3) }} {{ range(5)[1:3] }} {{ range(3)[::-1] }} {{ range(3)|list "
     "}} {{ range(3) == [0, 1, 2] }}",
     "{}",
     "range(0, 3) range(1, 10, 3) range(1, 3) range(2, -1, -1) [0, 1, 2] False"},
    {"CaseMappingBeyondAscii",
     "{{ 'éàü ßœ ΣΊΣΥΦΟΣ привет Ｆｕｌｌ'|upper }} {{ 'ÉCOLE Ελλάδα'|lower }} {{ 'élan vital'|title }} {{"
     " 'é' is lower }}",
     "{}",
     "ÉÀÜ SSŒ ΣΊΣΥΦΟΣ ПРИВЕТ ＦＵＬＬ école ελλάδα Élan Vital True"},
    {"TruncateKeepsShortValues",
     "{{ 'a long sentence here'|truncate(9) }} {{ [1, 2]|truncate(5) }} {{ 'abcdefghijklmnop'|truncat"
     "e(10, true) }}",
     "{}",
     "a... [1, 2] abcdefg..."},
    {"FormattingEdges",
     "{{ '%#g|%-*s|%*s|%.3d' % (2.0, 4, 'a', -4, 'b', 7) }} {{ '{:05}|{:#x}|{:+.1%}|{:=+6}|{:_}'.form"
     "at('ab', 255, 0.25, 3, 1234567) }}",
     "{}",
     "2.00000|a   |b   |007 ab000|0xff|+25.0%|+    3|1_234_567"},
};

class Language : public testing::TestWithParam<Case> {};

TEST_P(Language, RendersLikeJinja2) {
  const Case& c = GetParam();
  std::string got;
  try {
    got = render(c.src, nlohmann::ordered_json::parse(c.context));
  } catch (const Error& e) {
    FAIL() << c.src << "\nthrew: " << e.what();
  }
  EXPECT_EQ(got, c.want) << c.src;
}

INSTANTIATE_TEST_SUITE_P(Jinja, Language, testing::ValuesIn(kCases),
                         [](const testing::TestParamInfo<Case>& info) { return std::string(info.param.name); });

TEST(JinjaErrors, SyntaxErrorsNameTheLine) {
  EXPECT_EQ(error_of("{% if x %}\n{% endfor %}"), "template: line 2: Encountered unknown tag 'endfor'.");
  EXPECT_EQ(error_of("a\n{{ 1 + }}"), "template: line 2: unexpected 'end of print statement'");
  EXPECT_EQ(error_of("{{ x"), "template: line 1: unexpected end of template, expected 'end of print statement'.");
  EXPECT_EQ(error_of("\n{# open"), "template: line 2: Missing end of comment tag");
  EXPECT_EQ(error_of("{% for %}"), "template: line 1: Expected an expression, got 'end of statement block'");
  EXPECT_EQ(error_of("{% set 1 = 2 %}"), "template: line 1: can't assign to 'const'");
  EXPECT_EQ(error_of("{% if true %}\nx"),
            "template: line 2: Unexpected end of template. Jinja was looking for the following tags: "
            "'elif' or 'else' or 'endif'.");
  EXPECT_EQ(error_of("{{ 'a' ! 'b' }}"), "template: line 1: unexpected char '!' at 7");
  EXPECT_EQ(error_of("{{ '\\x4' }}"), "template: line 1: truncated \\xXX escape");
  EXPECT_EQ(error_of("{% break %}"), "template: line 1: 'break' outside loop");
  EXPECT_EQ(error_of("{% include 'other.jinja' %}"),
            "template: line 1: the 'include' tag is not supported (a chat template is one file, rendered without a "
            "loader)");
  EXPECT_EQ(error_of(std::string("{{ '\xff' }}")), "template: line 1: the template is not valid UTF-8");
}

TEST(JinjaErrors, UnknownFiltersAndTestsInsideIfWaitUntilTheyRun) {
  EXPECT_EQ(error_of("{{ x|nofilter }}"), "template: line 1: No filter named 'nofilter'.");
  EXPECT_EQ(error_of("{{ x is nope }}"), "template: line 1: No test named 'nope'.");
  EXPECT_EQ(render("{% if false %}{{ x|nofilter }}{{ x is nope }}{% endif %}ok"), "ok");
  EXPECT_EQ(render("{{ 1 if true else x|nope }}"), "1");
  EXPECT_EQ(error_of("{% if true %}\n{{ x|nofilter }}{% endif %}"), "template: line 2: No filter named 'nofilter' found.");
  // A for loop inside the if has a frame of its own: known there or an error at once.
  EXPECT_EQ(error_of("{% if false %}{% for x in y %}{{ x|nofilter }}{% endfor %}{% endif %}"),
            "template: line 1: No filter named 'nofilter'.");
}

TEST(JinjaErrors, RaiseExceptionThrowsTheTemplatesMessage) {
  EXPECT_EQ(error_of("{% if messages|length == 0 %}{{ raise_exception('No messages provided.') }}{% endif %}",
                     {{"messages", nlohmann::ordered_json::array()}}),
            "No messages provided.");
  EXPECT_EQ(error_of("{{ raise_exception('Unexpected role ' ~ 3) }}"), "Unexpected role 3");
}

TEST(JinjaErrors, RuntimeErrorsAreJinja2s) {
  // Undefined: printing gives "", using it otherwise fails, as Jinja2's default Undefined.
  EXPECT_EQ(error_of("\n\n{{ x.y }}"), "template: line 3: 'x' is undefined");
  EXPECT_EQ(error_of("{{ x + 1 }}"), "template: line 1: 'x' is undefined");
  EXPECT_EQ(error_of("{{ x() }}"), "template: line 1: 'x' is undefined");
  EXPECT_EQ(error_of("{{ m.a.b }}", {{"m", nlohmann::ordered_json::object()}}),
            "template: line 1: 'dict object' has no attribute 'a'");
  EXPECT_EQ(error_of("{{ m[0].b }}", {{"m", nlohmann::ordered_json::array()}}),
            "template: line 1: list object has no element 0");
  EXPECT_EQ(error_of("{{ 'a' < 1 }}"), "template: line 1: '<' not supported between instances of 'str' and 'int'");
  EXPECT_EQ(error_of("{{ [1] + 'a' }}"), "template: line 1: can only concatenate list (not \"str\") to list");
  EXPECT_EQ(error_of("{{ 'a' + none }}"), "template: line 1: can only concatenate str (not \"NoneType\") to str");
  EXPECT_EQ(error_of("{{ 1/0 }}"), "template: line 1: division by zero");
  EXPECT_EQ(error_of("{% for a, b in [[1]] %}{% endfor %}"),
            "template: line 1: not enough values to unpack (expected 2, got 1)");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}"),
            "template: line 1: macro 'm' takes not more than 1 argument(s)");
  EXPECT_EQ(error_of("{% macro m(a) %}{% endmacro %}{{ m(b=1) }}"),
            "template: line 1: macro 'm' takes no keyword argument 'b'");
  EXPECT_EQ(error_of("{{ none|length }}"), "template: line 1: object of type 'NoneType' has no len()");
  EXPECT_EQ(error_of("{% for x in 3 %}{% endfor %}"), "template: line 1: 'int' object is not iterable");
  EXPECT_EQ(error_of("{{ {[1]: 2} }}"), "template: line 1: unhashable type: 'list' (as a dict key)");
  EXPECT_EQ(error_of("{{ x|tojson }}"), "template: line 1: Object of type Undefined is not JSON serializable");
}

TEST(JinjaSandbox, SeesNothingButItsContext) {
  // Attributes of Python objects are not there; private names are unsafe and undefined.
  EXPECT_EQ(render("{{ ''.__class__ }}|{{ range.__globals__ }}|{{ m._x }}", {{"m", {{"_x", 1}}}}), "||");
  EXPECT_EQ(render("{{ m['_x'] }}", {{"m", {{"_x", 1}}}}), "1");  // an item, not an attribute
  EXPECT_NE(error_of("{{ ''.__class__.__mro__ }}"), "");
  EXPECT_EQ(render("{{ self }}{{ config }}{{ request }}{{ lipsum }}"), "");
  EXPECT_EQ(error_of("{{ range(1000000)|length }}"),
            "template: line 1: Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
}

TEST(JinjaSandbox, ListsAndDictsThatContainThemselves) {
  EXPECT_EQ(render("{% set l = [] %}{% set _ = l.append(l) %}{{ l }}"), "[[...]]");
  EXPECT_EQ(render("{% set d = {} %}{% set _ = d.update({'d': d}) %}{{ d }}"), "{'d': {...}}");
  EXPECT_NE(error_of("{% set l = [] %}{% set _ = l.append(l) %}{{ l|tojson }}"), "");
  EXPECT_NE(error_of("{% set a = [] %}{% set b = [] %}{% set _ = a.append(a) %}{% set _ = b.append(b) %}{{ a == b }}"),
            "");
}

TEST(JinjaLimits, OutputSize) {
  Options o = fixed_clock();
  o.max_output = 1000;
  EXPECT_EQ(render("{% for i in range(100) %}0123456789{% endfor %}", {}, o).size(), 1000u);
  EXPECT_EQ(error_of("{% for i in range(101) %}0123456789{% endfor %}", {}, o),
            "template: line 1: a string or the output grew past 1000 bytes");
  // A string doubling itself stops at the limit, not at the machine's memory.
  EXPECT_NE(error_of("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}",
                     {}, o),
            "");
  EXPECT_NE(error_of("{{ 'ab' * 1000000000000 }}", {}, o), "");
}

TEST(JinjaLimits, StepsEndRunawayLoops) {
  Options o = fixed_clock();
  o.max_steps = 100000;
  EXPECT_EQ(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", {}, o),
            "template: line 1: the template ran more than 100000 steps (a runaway loop?)");
  EXPECT_NE(error_of("{{ ([1] * 100000000)|length }}", {}, o), "");
  // Work on a large value costs its size: repeating it ends at the limit, not hours later.
  EXPECT_EQ(error_of("{% set s = 'é' * 20000 %}{% for i in range(100000) %}{{ s.startswith('y') }}{{ s[5] }}"
                     "{% endfor %}",
                     {}, o),
            "template: line 1: the template ran more than 100000 steps (a runaway loop?)");
  EXPECT_EQ(error_of("{% set l = range(10000)|list %}{% for i in range(100000) %}{{ 9999 in l }}{% endfor %}", {}, o),
            "template: line 1: the template ran more than 100000 steps (a runaway loop?)");
  // Appending to the list being iterated does not run forever: the loop sees the list as it was.
  EXPECT_EQ(render("{% set l = [1] %}{% for x in l %}{% set _ = l.append(x) %}{% endfor %}{{ l|length }}", {}, o), "2");
}

TEST(JinjaLimits, DepthOfRecursionAndNesting) {
  Options o = fixed_clock();
  o.max_depth = 64;
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", {}, o),
            "template: line 1: nesting deeper than 64 levels (recursion, or nested values)");
  EXPECT_EQ(render("{% macro f(n) %}{% if n < 50 %}{{ f(n + 1) }}{% else %}{{ n }}{% endif %}{% endmacro %}{{ f(0) }}",
                   {}, o),
            "50");
  EXPECT_EQ(error_of("{{ " + std::string(1000, '(') + "1" + std::string(1000, ')') + " }}"),
            "template: line 1: the template nests deeper than 256 levels");
  EXPECT_EQ(error_of("{{ " + std::string(100, '[') + std::string(100, ']') + " }}", {}, o),
            "template: line 1: the template nests deeper than 64 levels");
  nlohmann::ordered_json deep = nlohmann::ordered_json::array();
  for (int i = 0; i < 100; ++i) deep = nlohmann::ordered_json::array({deep});
  EXPECT_EQ(error_of("{{ x }}", {{"x", deep}}, o), "template: line 0: the context nests deeper than 64 levels");
  // The default depth (256) is what Python's recursion limit allows, about.
  EXPECT_EQ(render("{% macro f(n) %}{% if n < 200 %}{{ f(n + 1) }}{% else %}{{ n }}{% endif %}{% endmacro %}{{ f(0) }}"),
            "200");
}

TEST(JinjaApi, ContextMustBeAnObject) {
  EXPECT_EQ(render("{{ 1 }}", nullptr), "1");
  EXPECT_EQ(error_of("{{ 1 }}", nlohmann::ordered_json::array()),
            "template: the context must be a JSON object, not array");
}

TEST(JinjaApi, ContextKeyOrderIsTheDictOrder) {
  const auto ctx = nlohmann::ordered_json::parse(R"({"d": {"z": 1, "a": 2, "m": {"y": null, "b": [1.5, 2]}}})");
  EXPECT_EQ(render("{{ d }} {{ d|tojson }}", ctx),
            "{'z': 1, 'a': 2, 'm': {'y': None, 'b': [1.5, 2]}} {\"z\": 1, \"a\": 2, \"m\": {\"y\": null, \"b\": [1.5, 2]}}");
}

TEST(JinjaApi, RendersFromManyThreadsAtOnce) {
  const Template t = Template::parse(
      "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + m|length %}{% endfor %}{{ ns.n }}");
  nlohmann::ordered_json ctx;
  ctx["messages"] = {"ab", "cde"};
  std::atomic<int> good{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 200; ++k) good += t.render(ctx) == "5";
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(good.load(), 800);
}

TEST(JinjaApi, StrftimeNowDefaultsToTheLocalClock) {
  const std::string year = Template::parse("{{ strftime_now('%Y') }}").render({});
  ASSERT_EQ(year.size(), 4u);
  EXPECT_GE(std::stoi(year), 2024);
}

}  // namespace
}  // namespace synapse::jinja
