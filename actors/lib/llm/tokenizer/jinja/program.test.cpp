// The Jinja engine on hand-written templates: whitespace control, statements, expressions,
// filters and errors. The byte-for-byte comparison with transformers on real chat templates is
// test/tokenizer_oracle.test.cpp (ChatTemplateOracle, JinjaOracle).
#include "actors/lib/llm/tokenizer/jinja/program.hpp"

#include <gtest/gtest.h>

namespace milesrt::llm::jinja {
namespace {

std::string render(const std::string& src, const value& vars = value::object()) {
  environment env;
  std::tm tm{};
  tm.tm_year = 124;
  tm.tm_mon = 6;
  tm.tm_mday = 26;
  env.now = tm;
  return program::parse(src)->render(vars, env);
}

std::string error_of(const std::string& src, const value& vars = value::object()) {
  try {
    render(src, vars);
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Jinja, WhitespaceControlAsTransformers) {
  EXPECT_EQ(render("a\n  {% if true %}\n  b\n  {% endif %}\nc"), "a\n  b\nc");
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif %}"), "ab");
  EXPECT_EQ(render("x {{- ' y ' -}} z"), "x y z");
  EXPECT_EQ(render("{# note #}\nk"), "k");
  EXPECT_EQ(render("a\n"), "a");
  EXPECT_EQ(render("a\r\nb"), "a\nb");
  EXPECT_EQ(render("  {%+ if true %}x{% endif %}"), "  x");
}

// Loops visit their items in place and answer loop.<field> without building the `loop` object;
// the object (with previtem / nextitem) is built only where the template uses `loop` as a whole.
TEST(Jinja, LoopFieldsAndNeighbours) {
  value xs = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{{ loop.last }}{% endfor %}", xs),
            "1aFalse2bFalse3cTrue");
  EXPECT_EQ(render("{% for x in xs %}{{ x }}{% endfor %}{% for x in xs %}[{{ loop . previtem }}|{{ "
                   "loop.nextitem }}]"
                   "{% endfor %}",
                   xs),
            "abc[|b][a|c][b|]");
  EXPECT_EQ(render("{% for x in xs %}{% set l = loop %}{{ l.previtem }}{% endfor %}", xs), "ab");
  EXPECT_EQ(render("{% for x in xs %}{{ loop['next' ~ 'item'] }}{% endfor %}", xs), "bc");
  EXPECT_EQ(render("{% for x in xs %}{% for y in [x, x] %}{{ y }}{% endfor %}{% endfor %}", xs),
            "aabbcc");
}

// The render's variables are read in place; setting one shadows it for the rest of the render and
// leaves the caller's value alone.
TEST(Jinja, VariablesAreReadInPlaceAndShadowedBySet) {
  value vars = {{"xs", {1, 2}}, {"d", {{"a", 1}}}};
  EXPECT_EQ(
      render("{{ xs }}{% set xs = xs + [3] %}{{ xs }}{% for x in xs %}{{ x }}{% endfor %}", vars),
      "[1, 2][1, 2, 3]123");
  EXPECT_EQ(render("{{ d.a }}{% set d.a = 2 %}{{ d.a }}", vars), "12");
  EXPECT_EQ(vars, (value{{"xs", {1, 2}}, {"d", {{"a", 1}}}}));
  EXPECT_EQ(error_of("{{ xs() }}", vars), "template line 1: 'xs' is not callable");
}

// Expected texts from jinja2's ImmutableSandboxedEnvironment. Variables may point at the render's
// values, literals or the items a loop visits instead of copying them; these pin what that must not
// change: a later `set` of the source, a macro assigning a namespace attribute mid-expression, a
// loop over a namespace attribute that its body reassigns.
TEST(Jinja, ValuesSharedInsteadOfCopiedKeepPythonSemantics) {
  value xs = {{"xs", {1, 2}}};
  EXPECT_EQ(render("{% set a = xs %}{% set xs = [9] %}{{ a }}{{ xs }}", xs), "[1, 2][9]");
  EXPECT_EQ(render("{% set a = [1] %}{% set b = a %}{% set a = [2] %}{{ b }}{{ a }}"), "[1][2]");
  EXPECT_EQ(render("{% for x in xs %}{% set x = 0 %}{{ x }}{% endfor %}{{ xs }}", xs), "00[1, 2]");
  EXPECT_EQ(render("{% set ns = namespace(items=[1,2,3]) %}{% for x in ns.items %}{% set ns.items "
                   "= [] %}{{ x }}"
                   "{% endfor %}{{ ns.items }}"),
            "123[]");
  const std::string macro =
      "{% set ns = namespace(s='a') %}{% macro m() %}{% set ns.s = 'b' * 20 %}{% endmacro %}";
  EXPECT_EQ(render(macro + "{{ ns.s ~ m() ~ ns.s }}"), "a" + std::string(20, 'b'));
  EXPECT_EQ(render(macro + "{{ ns.s + m() + ns.s }}"), "a" + std::string(20, 'b'));
  EXPECT_EQ(render(macro + "{{ ns.s == m() }}{{ ns.s[0] }}"), "Falseb");
  value ys = {{"xs", {1, 2, 3}}};
  EXPECT_EQ(
      render("{% for x in xs[::-1] %}{{ x }}{{ loop.previtem }}{{ loop.nextitem }}|{% endfor %}",
             ys),
      "32|231|12|");
  EXPECT_EQ(render("{% for x in xs if x != 2 %}{{ x }}{{ loop.previtem }}{{ loop.nextitem }}{{ "
                   "loop.length }}|"
                   "{% endfor %}",
                   ys),
            "132|312|");
  EXPECT_EQ(render("{% for x in 'abc'[1:] %}{{ x }}{% endfor %}{% for x in (xs|select('odd')) %}{{ "
                   "x }}{% endfor %}",
                   ys),
            "bc13");
  value nested = {{"xs", {{{"k", {5, 6}}}, {{"k", {7}}}}}};
  EXPECT_EQ(render("{% for x in xs %}{% for y in x.k %}{{ y }}{{ loop.index }}{% endfor %}{{ "
                   "loop.index }}{% endfor %}",
                   nested),
            "51621712");
}

// A slice of the render's list (or of such a slice) is kept as pointers to its items; reading it
// in any way gives what the copied list gives.
TEST(Jinja, SlicesOfSharedListsReadAsLists) {
  value xs = {{"xs", {1, 2, 3}}};
  EXPECT_EQ(render("{% set ys = xs[1:] %}{{ ys }}{{ ys|length }}{{ ys[0] }}{{ ys[-1] }}{{ ys[7] is "
                   "defined }}"
                   "{% for y in ys %}{{ y }}{{ loop.previtem }}{% endfor %}{% set zs = ys[::-1] "
                   "%}{{ zs }}{{ zs|count }}"
                   "{% set ys = ys[1:] %}{{ ys }}{{ ys + [9] }}{{ ys == [3] }}{{ xs }}",
                   xs),
            "[2, 3]223False232[3, 2]2[3][3, 9]True[1, 2, 3]");
  value ks = {{"xs", {{{"k", 1}}, {{"k", 2}}, {{"k", 3}}}}};
  EXPECT_EQ(
      render("{% set ys = xs[1:] %}{% for y in ys[::-1] %}{{ y.k }}{% endfor %}{% set ys = ys %}"
             "{{ ys|map(attribute='k')|join }}",
             ks),
      "3223");
  EXPECT_EQ(render("{% set ys = xs[1:] %}{% if ys %}t{% endif %}{% set e = xs[5:] %}{% if not e "
                   "%}f{% endif %}{{ e|length }}",
                   xs),
            "tf0");
  EXPECT_EQ(error_of("{% set ys = xs[1:] %}{% set ys.a = 1 %}", xs),
            "template line 1: cannot assign attribute 'a' on 'ys'");
}

// strip/trim decide on bytes while the ends are ASCII, and by code point (Unicode spaces)
// otherwise.
TEST(Jinja, StripAsPython) {
  EXPECT_EQ(render("[{{ '  a  '|trim }}][{{ '\\u3000a\\u3000'|trim }}][{{ 'xxaxx'.strip('x') "
                   "}}][{{ 'éaé'.strip('é') }}]"
                   "[{{ ' é '.strip() }}][{{ '\\x1ca\\x1f'.strip() }}][{{ 'é a'.lstrip('é') }}][{{ "
                   "' a\\u2003'.rstrip() }}]"),
            "[a][a][a][a][é][a][ a][ a]");
}

TEST(Jinja, LoopsAndScopes) {
  value v = {{"xs", {1, 2, 3, 4}}};
  EXPECT_EQ(
      render("{% for x in xs %}{{ loop.index }}{{ x }}{% if loop.last %}!{% endif %}{% endfor %}",
             v),
      "11223344!");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", v),
            "12");
  EXPECT_EQ(render("{% for x in xs if x is even %}{{ x }}{{ loop.length }}{% endfor %}", v),
            "2242");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% "
                   "endfor %}{{ ns.n }}",
                   v),
            "10");
  EXPECT_EQ(render("{% set y = 1 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}", v), "1");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"),
            "a=1;b=2;");
}

TEST(Jinja, Expressions) {
  EXPECT_EQ(
      render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -7 % 3 }}"),
      "7 3 -4 3.5 1024 2");
  EXPECT_EQ(render("{{ 'ab' ~ 1 ~ none }}|{{ 'x' if false }}|{{ 'y' if true else 'n' }}"),
            "ab1None||y");
  EXPECT_EQ(render("{{ 'hello'[::-1] }} {{ 'hello'[1:3] }} {{ [1,2,3][-1] }} {{ 'é中'[1] }}"),
            "olleh el 3 中");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 1 < 2 < 3 }}"), "True False True");
  EXPECT_EQ(render("{{ [1, 'a', {'k': none}] }} {{ 0.1 + 0.2 }} {{ 1e20 }}"),
            "[1, 'a', {'k': None}] 0.30000000000000004 1e+20");
  EXPECT_EQ(
      render("{{ x is defined }} {{ x is not defined }} {{ none is none }} {{ 'a' is string }}"),
      "False True True True");
}

TEST(Jinja, FiltersAndMethods) {
  value v = value::parse(
      R"({"ms": [{"role": "user", "c": "a"}, {"role": "tool", "c": "b"}, {"role": "user"}]})");
  EXPECT_EQ(
      render("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list|length }}", v),
      "2");
  EXPECT_EQ(render("{{ ms|rejectattr('c', 'defined')|list|length }}", v), "1");
  EXPECT_EQ(render("{{ ms|map(attribute='role')|unique|join(',') }}", v), "user,tool");
  EXPECT_EQ(render("{{ {'b': 'é', 'a': [1, 2.5]}|tojson }}"), "{\"b\": \"é\", \"a\": [1, 2.5]}");
  EXPECT_EQ(render("{{ {'a': [1]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ '  x y  '|trim }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ "
                   "'abc'.upper() }}"),
            "x y|['a', 'b', '', 'c']|['a', 'b']|ABC");
  EXPECT_EQ(
      render("{{ 'hello world'|title }} {{ 'hELLO'|capitalize }} {{ 'aXa'.replace('a', 'b') }}"),
      "Hello World Hello bXb");
  EXPECT_EQ(render("{{ x|default('d') }} {{ ''|default('e', true) }} {{ '3'|int + 1 }} {{ "
                   "[3,1,2]|sort|list }}"),
            "d e 4 [1, 2, 3]");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
  EXPECT_EQ(render("{{ 'a\\nb'|indent(2) }}"), "a\n  b");
}

TEST(Jinja, MacrosCallsAndBlocks) {
  EXPECT_EQ(render("{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('A') "
                   "}}/{{ greet('B', p='Yo') }}"),
            "Hi A/Yo B");
  EXPECT_EQ(
      render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"),
      "[in]");
  EXPECT_EQ(render("{% set t %}  body  {% endset %}<{{ t }}>"), "<  body  >");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(error_of("a\n{{ raise_exception('bad role') }}"), "template line 2: bad role");
  EXPECT_NE(error_of("x\n\n{% include 'a' %}").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("x\n\n{% include 'a' %}").find("include"), std::string::npos);
  EXPECT_NE(error_of("{{ x|wordwrap }}").find("filter 'wordwrap' is not supported"),
            std::string::npos);
  EXPECT_NE(error_of("{% if x %}"), "(no error)");
  EXPECT_NE(error_of("{{ x.y }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ ms|selectattr('a') }}", {{"ms", value::array()}}).find("generator"),
            std::string::npos);
}

std::string parse_error_of(const std::string& src) {
  try {
    program::parse(src);
  } catch (const error& e) {
    return e.what();
  }
  return "(no error)";
}

// A template cannot exhaust the stack, the memory or the time of the process: a macro that calls
// itself, a huge range(), loops within loops and deep nesting end the render with an error
// (docs/limits.md, "Chat templates").
TEST(Jinja, RecursionRangeAndLoopsAreBounded) {
  EXPECT_EQ(error_of("{% macro f(n) %}{{ f(n+1) }}{% endmacro %}{{ f(0) }}"),
            "template line 1: macro 'f': calls nested deeper than 100 (recursion without end?)");
  // 100 nested calls are fine.
  EXPECT_EQ(render("{% macro f(n) %}{% if n < 99 %}{{ f(n+1) }}{% else %}{{ n }}{% endif %}"
                   "{% endmacro %}{{ f(0) }}"),
            "99");
  EXPECT_EQ(error_of("{% for i in range(1000000000) %}{% endfor %}"),
            "template line 1: range() of 1000000000 items: the limit is 100000");
  EXPECT_EQ(render("{{ range(100000) | length }}"), "100000");
  EXPECT_EQ(error_of("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}"
                     "{% endfor %}"),
            "template line 1: more than 10000000 loop iterations in one render (the limit)");
  EXPECT_EQ(error_of("{{ 'ab' * 1000000000 }}"),
            "template line 1: a string repeated 1000000000 times: more than 67108864 bytes (the "
            "limit)");
  EXPECT_EQ(
      parse_error_of("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}"),
      "template line 1: nested deeper than 100 levels (brackets, operators, filters or tags)");
  std::string chain = "{{ 1";
  for (int i = 0; i < 100000; ++i) chain += " + 1";
  EXPECT_EQ(parse_error_of(chain + " }}"),
            "template line 1: an expression nested deeper than 100 levels (operators, brackets or "
            "filters)");
  std::string ifs;
  for (int i = 0; i < 5000; ++i) ifs += "{% if true %}";
  EXPECT_NE(parse_error_of(ifs).find("nested deeper than 100 levels"), std::string::npos);
}

}  // namespace
}  // namespace milesrt::llm::jinja
