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

// A template that never reads loop.previtem / loop.nextitem gets loops that hand items over
// instead of copying their neighbours; one that does, or that uses `loop` otherwise, keeps them.
TEST(Jinja, LoopNeighboursOnlyWhereTheTemplateReadsThem) {
  value xs = {{"xs", {"a", "b", "c"}}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{{ loop.last }}{% endfor %}", xs), "1aFalse2bFalse3cTrue");
  EXPECT_EQ(render("{% for x in xs %}{{ x }}{% endfor %}{% for x in xs %}[{{ loop . previtem }}|{{ loop.nextitem }}]"
                   "{% endfor %}",
                   xs),
            "abc[|b][a|c][b|]");
  EXPECT_EQ(render("{% for x in xs %}{% set l = loop %}{{ l.previtem }}{% endfor %}", xs), "ab");
  EXPECT_EQ(render("{% for x in xs %}{{ loop['next' ~ 'item'] }}{% endfor %}", xs), "bc");
  EXPECT_EQ(render("{% for x in xs %}{% for y in [x, x] %}{{ y }}{% endfor %}{% endfor %}", xs), "aabbcc");
}

// The render's variables are read in place; setting one shadows it for the rest of the render and
// leaves the caller's value alone.
TEST(Jinja, VariablesAreReadInPlaceAndShadowedBySet) {
  value vars = {{"xs", {1, 2}}, {"d", {{"a", 1}}}};
  EXPECT_EQ(render("{{ xs }}{% set xs = xs + [3] %}{{ xs }}{% for x in xs %}{{ x }}{% endfor %}", vars),
            "[1, 2][1, 2, 3]123");
  EXPECT_EQ(render("{{ d.a }}{% set d.a = 2 %}{{ d.a }}", vars), "12");
  EXPECT_EQ(vars, (value{{"xs", {1, 2}}, {"d", {{"a", 1}}}}));
  EXPECT_EQ(error_of("{{ xs() }}", vars), "template line 1: 'xs' is not callable");
}

TEST(Jinja, LoopsAndScopes) {
  value v = {{"xs", {1, 2, 3, 4}}};
  EXPECT_EQ(render("{% for x in xs %}{{ loop.index }}{{ x }}{% if loop.last %}!{% endif %}{% endfor %}", v),
            "11223344!");
  EXPECT_EQ(render("{% for x in xs %}{% if x == 3 %}{% break %}{% endif %}{{ x }}{% endfor %}", v), "12");
  EXPECT_EQ(render("{% for x in xs if x is even %}{{ x }}{{ loop.length }}{% endfor %}", v), "2242");
  EXPECT_EQ(render("{% for x in [] %}a{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% set ns = namespace(n=0) %}{% for x in xs %}{% set ns.n = ns.n + x %}{% endfor %}{{ ns.n }}", v),
            "10");
  EXPECT_EQ(render("{% set y = 1 %}{% for x in xs %}{% set y = x %}{% endfor %}{{ y }}", v), "1");
  EXPECT_EQ(render("{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}"), "a=1;b=2;");
}

TEST(Jinja, Expressions) {
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 / 2 }} {{ 2 ** 10 }} {{ -7 % 3 }}"),
            "7 3 -4 3.5 1024 2");
  EXPECT_EQ(render("{{ 'ab' ~ 1 ~ none }}|{{ 'x' if false }}|{{ 'y' if true else 'n' }}"), "ab1None||y");
  EXPECT_EQ(render("{{ 'hello'[::-1] }} {{ 'hello'[1:3] }} {{ [1,2,3][-1] }} {{ 'é中'[1] }}"), "olleh el 3 中");
  EXPECT_EQ(render("{{ 'a' in 'cat' }} {{ 2 not in [1, 2] }} {{ 1 < 2 < 3 }}"), "True False True");
  EXPECT_EQ(render("{{ [1, 'a', {'k': none}] }} {{ 0.1 + 0.2 }} {{ 1e20 }}"),
            "[1, 'a', {'k': None}] 0.30000000000000004 1e+20");
  EXPECT_EQ(render("{{ x is defined }} {{ x is not defined }} {{ none is none }} {{ 'a' is string }}"),
            "False True True True");
}

TEST(Jinja, FiltersAndMethods) {
  value v = value::parse(R"({"ms": [{"role": "user", "c": "a"}, {"role": "tool", "c": "b"}, {"role": "user"}]})");
  EXPECT_EQ(render("{{ ms|selectattr('role', 'equalto', 'user')|map(attribute='c')|list|length }}", v), "2");
  EXPECT_EQ(render("{{ ms|rejectattr('c', 'defined')|list|length }}", v), "1");
  EXPECT_EQ(render("{{ ms|map(attribute='role')|unique|join(',') }}", v), "user,tool");
  EXPECT_EQ(render("{{ {'b': 'é', 'a': [1, 2.5]}|tojson }}"), "{\"b\": \"é\", \"a\": [1, 2.5]}");
  EXPECT_EQ(render("{{ {'a': [1]}|tojson(indent=2) }}"), "{\n  \"a\": [\n    1\n  ]\n}");
  EXPECT_EQ(render("{{ '  x y  '|trim }}|{{ 'a,b,,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'abc'.upper() }}"),
            "x y|['a', 'b', '', 'c']|['a', 'b']|ABC");
  EXPECT_EQ(render("{{ 'hello world'|title }} {{ 'hELLO'|capitalize }} {{ 'aXa'.replace('a', 'b') }}"),
            "Hello World Hello bXb");
  EXPECT_EQ(render("{{ x|default('d') }} {{ ''|default('e', true) }} {{ '3'|int + 1 }} {{ [3,1,2]|sort|list }}"),
            "d e 4 [1, 2, 3]");
  EXPECT_EQ(render("{{ strftime_now('%d %b %Y') }}"), "26 Jul 2024");
  EXPECT_EQ(render("{{ 'a\\nb'|indent(2) }}"), "a\n  b");
}

TEST(Jinja, MacrosCallsAndBlocks) {
  EXPECT_EQ(render("{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('A') }}/{{ greet('B', p='Yo') }}"),
            "Hi A/Yo B");
  EXPECT_EQ(render("{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}in{% endcall %}"), "[in]");
  EXPECT_EQ(render("{% set t %}  body  {% endset %}<{{ t }}>"), "<  body  >");
  EXPECT_EQ(render("{% filter upper %}abc{% endfilter %}"), "ABC");
  EXPECT_EQ(render("{% generation %}gen{% endgeneration %}"), "gen");
  EXPECT_EQ(render("{% raw %}{{ x }}{% endraw %}"), "{{ x }}");
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(error_of("a\n{{ raise_exception('bad role') }}"), "template line 2: bad role");
  EXPECT_NE(error_of("x\n\n{% include 'a' %}").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("x\n\n{% include 'a' %}").find("include"), std::string::npos);
  EXPECT_NE(error_of("{{ x|wordwrap }}").find("filter 'wordwrap' is not supported"), std::string::npos);
  EXPECT_NE(error_of("{% if x %}"), "(no error)");
  EXPECT_NE(error_of("{{ x.y }}").find("'x' is undefined"), std::string::npos);
  EXPECT_NE(error_of("{{ ms|selectattr('a') }}", {{"ms", value::array()}}).find("generator"), std::string::npos);
}

}  // namespace
}  // namespace milesrt::llm::jinja
