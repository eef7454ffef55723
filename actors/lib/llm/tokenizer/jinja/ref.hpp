#pragma once
/// What the interpreter evaluates expressions to and keeps in variables: references to values that
/// already exist where that is safe, copies where it is not (interpreter.hpp's, alone).

#include <utility>
#include <vector>

#include "actors/lib/llm/tokenizer/jinja/value.hpp"

namespace milesrt::llm::jinja {

/// An evaluated expression: a pointer to a value that outlives the expression (a variable, a
/// literal, part of either) or an owned temporary, so that `messages[i].content` copies nothing.
/// A stable pointer is one that no assignment can invalidate while any frame that may hold it
/// lives: into the render's variables, the program's literals, or the items a for loop is visiting
/// (held by the loop for its body's frames); variables may keep those instead of copies.
class ref {
 public:
  explicit ref(const value* p, bool stable = false) : p_(p), stable_(stable) {}
  explicit ref(value v) : own_(std::move(v)) {}
  /// A list of stable items (a slice of a stable list) as pointers; `items` outlives the ref when
  /// not owned.
  static ref list(std::vector<const value*> items) {
    ref r(value{});
    r.list_own_ = std::move(items);
    r.list_kind_ = list_kind::owned;
    return r;
  }
  static ref list(const std::vector<const value*>* items) {
    ref r(value{});
    r.list_ = items;
    r.list_kind_ = list_kind::borrowed;
    return r;
  }
  /// The value; a list of pointers is made a list (copies) the first time.
  const value& get() const {
    if (p_) return *p_;
    if (list_kind_ != list_kind::none && !made_) {
      own_ = value::array();
      for (const value* x : *items()) own_.push_back(*x);
      made_ = true;
    }
    return own_;
  }
  bool borrowed() const { return p_ != nullptr; }
  bool stable() const { return p_ != nullptr && stable_; }
  /// The items of a list of pointers, or nullptr for any other value.
  const std::vector<const value*>* items() const {
    return list_kind_ == list_kind::owned      ? &list_own_
           : list_kind_ == list_kind::borrowed ? list_
                                               : nullptr;
  }
  value take() && {
    if (p_) return *p_;
    get();
    return std::move(own_);
  }
  /// Makes an unstable borrow an owned copy: before running code that may assign what it points to.
  void pin() {
    if (p_ && !stable_) {
      own_ = *p_;
      p_ = nullptr;
    }
  }

 private:
  enum class list_kind { none, owned, borrowed };
  mutable value own_;
  const value* p_ = nullptr;
  bool stable_ = false;
  list_kind list_kind_ = list_kind::none;
  mutable bool made_ = false;
  std::vector<const value*> list_own_;
  const std::vector<const value*>* list_ = nullptr;
};

/// A variable: its own value, a stable pointer (see ref) or a list of stable pointers instead of a
/// copy.
struct slot {
  value own;
  const value* ptr = nullptr;
  std::vector<const value*> items;
  bool is_list = false;
  ref read() const {
    if (is_list) return ref::list(&items);
    return ptr ? ref(ptr, true) : ref(&own);
  }
  void assign(ref r) {  // `r` may read this very slot: take what it says before changing anything
    if (r.stable()) {
      ptr = &r.get();
      own = value();
      is_list = false;
      items.clear();
    } else if (const auto* xs = r.items()) {
      std::vector<const value*> picked = *xs;
      items = std::move(picked);
      is_list = true;
      ptr = nullptr;
      own = value();
    } else {
      own = std::move(r).take();
      ptr = nullptr;
      is_list = false;
      items.clear();
    }
  }
  value& mut() {
    if (ptr || is_list) {
      own = read().get();
      ptr = nullptr;
      is_list = false;
      items.clear();
    }
    return own;
  }
};

}  // namespace milesrt::llm::jinja
