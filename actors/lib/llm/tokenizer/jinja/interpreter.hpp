#pragma once
/// The tree-walking interpreter behind program::render (program.hpp), one object per render. Its
/// code is split by job: interpreter_statements.cpp (statements, for loops, assignments),
/// interpreter_expressions.cpp (expressions, names, `loop`, subscripts) and interpreter_calls.cpp
/// (macros, caller() and the global functions).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/ast.hpp"
#include "actors/lib/llm/tokenizer/jinja/builtins.hpp"
#include "actors/lib/llm/tokenizer/jinja/program.hpp"
#include "actors/lib/llm/tokenizer/jinja/ref.hpp"

namespace milesrt::llm::jinja {

/// A for loop's `loop`, answered field by field; the object is built only when the template uses
/// `loop` as a whole.
struct loop_state {
  size_t i = 0, n = 0;
  const std::vector<const value*>* items = nullptr;
  value object;
  bool made = false;
};

/// One scope: variables, macros and the for loop it belongs to.
struct frame {
  std::unordered_map<std::string, slot> vars;
  std::unordered_map<std::string, const stmt*> macros;
  loop_state* loop = nullptr;
};

/// What `caller()` runs inside a macro called by a {% call %} block.
struct caller_ctx {
  const stmt* block;
  std::vector<frame*> chain;
  const caller_ctx* outer;
};

/// How a statement ends: normally or by a loop control.
enum class flow { normal, break_, continue_ };

/// A name and the value it stands for in place of the render's `variables` (see program::render).
using borrowed_vars = std::vector<std::pair<std::string_view, const value*>>;

class interpreter {
 public:
  /// `variables` (and `borrowed`, which win) are read in place (no copy per render); the globals
  /// frame shadows them once the template sets or mutates one of those names.
  interpreter(frame& globals, const value& variables, const borrowed_vars& borrowed,
              const environment& env)
      : variables_(variables), borrowed_(borrowed), env_(env) {
    chain_.push_back(&globals);
  }

  std::string out;

  flow exec(const body& b);

 private:
  // -- statements (interpreter_statements.cpp) --
  flow exec_located(const stmt& s);
  flow exec(const stmt& s);
  std::string capture(const body& b);
  value with_block(const expr& filters, value v);
  void bind(frame& f, const std::vector<std::string>& targets, ref v);
  std::vector<const value*> loop_items(const expr& e, value& held, std::vector<value>& listed);
  void exec_for(const stmt& s);
  void exec_set(const stmt& s);
  value* lookup_mut(const std::string& n);
  /// Appends what `{{ v }}` writes.
  static void write(std::string& out, const value& v);

  // -- expressions (interpreter_expressions.cpp) --
  ref eval(const expr& e);
  ref eval_name(const std::string& n);
  ref eval_attr(const expr& e);
  ref eval_slice(const expr& e);
  ref eval_binary(const expr& e);
  ref eval_compare(const expr& e);
  ref eval_index(const expr& e);
  std::vector<size_t> slice_bounds(const expr& e, int64_t n);
  value eval_slice_of(const expr& e, const value& b);
  const value* render_var(const std::string& n) const;
  std::optional<ref> find_var(const frame& f, const std::string& n) const;
  loop_state* nearest_loop() const;
  static std::optional<ref> loop_field(const loop_state& st, const std::string& name);
  static const value& loop_object(loop_state& st);
  /// The expression's text for error messages: `a.b[...]`.
  static std::string describe(const expr& e);

  // -- calls (interpreter_calls.cpp) --
  ref eval_call(const expr& e, const caller_ctx* with_caller);
  call_args eval_args(const expr& e);
  static bool args_run_code(const expr& e);
  const stmt* lookup_macro(const std::string& n) const;
  value call_global(const std::string& n, const call_args& a);
  std::string call_macro(const stmt& m, const call_args& a, const caller_ctx* with_caller);
  value call_caller(const call_args& a);

  const value& variables_;
  const borrowed_vars& borrowed_;
  const environment& env_;
  std::vector<frame*> chain_;
  const caller_ctx* caller_ = nullptr;
  const value* block_value_ = nullptr;
  int depth_ = 0;           // macro and caller() calls running
  int64_t iterations_ = 0;  // for-loop iterations so far
};

}  // namespace milesrt::llm::jinja
