#include "actors/lib/llm/tokenizer/chat_template.hpp"

#include <cstdio>

#include "actors/lib/llm/tokenizer/regex.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::llm {
namespace {

using ojson = nlohmann::ordered_json;

struct render_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

void escape_into(std::string& out, const std::string& s) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += '"';
}

void dump_into(std::string& out, const ojson& x, int indent, int level) {
  auto newline = [&](int lv) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<size_t>(indent * lv), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  if (x.is_object()) {
    if (x.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (auto it = x.begin(); it != x.end(); ++it) {
      if (!first) out += item_sep;
      first = false;
      newline(level + 1);
      escape_into(out, it.key());
      out += ": ";
      dump_into(out, it.value(), indent, level + 1);
    }
    newline(level);
    out += '}';
  } else if (x.is_array()) {
    if (x.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    bool first = true;
    for (const auto& v : x) {
      if (!first) out += item_sep;
      first = false;
      newline(level + 1);
      dump_into(out, v, indent, level + 1);
    }
    newline(level);
    out += ']';
  } else if (x.is_string()) {
    escape_into(out, x.get_ref<const std::string&>());
  } else if (x.is_boolean()) {
    out += x.get<bool>() ? "true" : "false";
  } else if (x.is_null()) {
    out += "null";
  } else {
    out += x.dump();
  }
}

// Python's str.strip()/lstrip()/rstrip() with no argument: str.isspace characters.
const regex& py_space_run_start() {
  static const regex re("^[\\s\\x{1c}-\\x{1f}]+");
  return re;
}
const regex& py_space_run_end() {
  static const regex re("[\\s\\x{1c}-\\x{1f}]+$");
  return re;
}

std::string trim(const std::string& s) {
  size_t a = 0, b = s.size();
  py_space_run_start().find_all(s, [&](size_t, size_t e) { a = std::max(a, e); });
  if (a == s.size()) return {};
  py_space_run_end().find_all(std::string_view(s).substr(a), [&](size_t st, size_t e) {
    if (a + e == s.size()) b = std::min(b, a + st);
  });
  return s.substr(a, b - a);
}
std::string lstrip_nl(const std::string& s) {
  size_t a = s.find_first_not_of('\n');
  return a == std::string::npos ? std::string() : s.substr(a);
}
std::string rstrip_nl(const std::string& s) {
  size_t b = s.find_last_not_of('\n');
  return b == std::string::npos ? std::string() : s.substr(0, b + 1);
}
std::string strip_nl(const std::string& s) { return rstrip_nl(lstrip_nl(s)); }

bool starts_with(const std::string& s, std::string_view p) { return s.compare(0, p.size(), p) == 0; }
bool ends_with(const std::string& s, std::string_view p) {
  return s.size() >= p.size() && s.compare(s.size() - p.size(), p.size(), p) == 0;
}

std::string role_of(const ojson& m, size_t i) {
  if (!m.is_object() || !m.contains("role") || !m.at("role").is_string()) {
    throw render_error("message " + std::to_string(i) + ": no string 'role'");
  }
  return m.at("role").get<std::string>();
}

std::string content_of(const ojson& m, size_t i) {
  auto it = m.find("content");
  if (it == m.end() || !it->is_string()) {
    throw render_error("message " + std::to_string(i) + ": 'content' must be a string");
  }
  return it->get<std::string>();
}

// Jinja truthiness of an optional field: present, not null, not empty.
bool truthy(const ojson& m, const char* key) {
  auto it = m.find(key);
  if (it == m.end() || it->is_null()) return false;
  if (it->is_string()) return !it->get_ref<const std::string&>().empty();
  if (it->is_array() || it->is_object()) return !it->empty();
  if (it->is_boolean()) return it->get<bool>();
  return true;
}

const ojson& tool_function(const ojson& call, size_t i) {
  if (call.is_object() && truthy(call, "function")) return call.at("function");
  if (!call.is_object()) throw render_error("message " + std::to_string(i) + ": a tool call is not an object");
  return call;
}

std::string call_name(const ojson& fn, size_t i) {
  if (!fn.contains("name") || !fn.at("name").is_string()) {
    throw render_error("message " + std::to_string(i) + ": a tool call has no string 'name'");
  }
  return fn.at("name").get<std::string>();
}

const ojson& call_arguments(const ojson& fn, size_t i) {
  if (!fn.contains("arguments")) throw render_error("message " + std::to_string(i) + ": a tool call has no 'arguments'");
  return fn.at("arguments");
}

const char* kToolsHeader =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
    "function signatures within <tools></tools> XML tags:\n<tools>";
const char* kToolsFooter =
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
    "<args-json-object>}\n</tool_call><|im_end|>\n";
const char* kQwenDefaultSystem = "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";

bool has_tools(const chat_options& o) { return o.tools.is_array() && !o.tools.empty(); }

void tool_responses(std::string& out, const ojson& ms, size_t i) {
  if (i == 0 || role_of(ms[i - 1], i - 1) != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + content_of(ms[i], i) + "\n</tool_response>";
  if (i + 1 == ms.size() || role_of(ms[i + 1], i + 1) != "tool") out += "<|im_end|>\n";
}

std::string render_qwen2_5(const ojson& ms, const chat_options& o) {
  std::string out;
  bool first_system = !ms.empty() && role_of(ms[0], 0) == "system";
  if (has_tools(o)) {
    out += "<|im_start|>system\n";
    out += first_system ? content_of(ms[0], 0) : kQwenDefaultSystem;
    out += std::string("\n\n") + kToolsHeader;
    for (const auto& t : o.tools) out += "\n" + python_json(t);
    out += kToolsFooter;
  } else {
    out += first_system ? "<|im_start|>system\n" + content_of(ms[0], 0) + "<|im_end|>\n"
                        : std::string("<|im_start|>system\n") + kQwenDefaultSystem + "<|im_end|>\n";
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    const auto& m = ms[i];
    std::string role = role_of(m, i);
    if (role == "user" || (role == "system" && i != 0) || (role == "assistant" && !truthy(m, "tool_calls"))) {
      out += "<|im_start|>" + role + "\n" + content_of(m, i) + "<|im_end|>\n";
    } else if (role == "assistant") {
      out += "<|im_start|>assistant";
      if (truthy(m, "content")) out += "\n" + content_of(m, i);
      for (const auto& call : m.at("tool_calls")) {
        const ojson& fn = call.is_object() && call.contains("function") ? call.at("function") : call;
        out += "\n<tool_call>\n{\"name\": \"" + call_name(fn, i) + "\", \"arguments\": " +
               python_json(call_arguments(fn, i)) + "}\n</tool_call>";
      }
      out += "<|im_end|>\n";
    } else if (role == "tool") {
      tool_responses(out, ms, i);
    }
  }
  if (o.add_generation_prompt) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_qwen3(const ojson& ms, const chat_options& o) {
  std::string out;
  bool first_system = !ms.empty() && role_of(ms[0], 0) == "system";
  if (has_tools(o)) {
    out += "<|im_start|>system\n";
    if (first_system) out += content_of(ms[0], 0) + "\n\n";
    out += kToolsHeader;
    for (const auto& t : o.tools) out += "\n" + python_json(t);
    out += kToolsFooter;
  } else if (first_system) {
    out += "<|im_start|>system\n" + content_of(ms[0], 0) + "<|im_end|>\n";
  }
  // The last user query that is not a tool response: reasoning after it is kept.
  size_t last_query = ms.empty() ? 0 : ms.size() - 1;
  for (size_t k = ms.size(); k-- > 0;) {
    if (role_of(ms[k], k) != "user") continue;
    std::string c = content_of(ms[k], k);
    if (!(starts_with(c, "<tool_response>") && ends_with(c, "</tool_response>"))) {
      last_query = k;
      break;
    }
  }
  for (size_t i = 0; i < ms.size(); ++i) {
    const auto& m = ms[i];
    std::string role = role_of(m, i);
    if (role == "user" || (role == "system" && i != 0)) {
      out += "<|im_start|>" + role + "\n" + content_of(m, i) + "<|im_end|>\n";
    } else if (role == "assistant") {
      std::string content = content_of(m, i);
      std::string reasoning;
      if (m.contains("reasoning_content") && !m.at("reasoning_content").is_null()) {
        if (!m.at("reasoning_content").is_string()) {
          throw render_error("message " + std::to_string(i) + ": 'reasoning_content' must be a string");
        }
        reasoning = m.at("reasoning_content").get<std::string>();
      } else if (size_t end = content.find("</think>"); end != std::string::npos) {
        std::string before = content.substr(0, end);
        content = lstrip_nl(content.substr(content.rfind("</think>") + 8));
        before = rstrip_nl(before);
        size_t open = before.rfind("<think>");
        reasoning = lstrip_nl(open == std::string::npos ? before : before.substr(open + 7));
      }
      bool last = i + 1 == ms.size();
      if (i > last_query && (last || !reasoning.empty())) {
        out += "<|im_start|>assistant\n<think>\n" + strip_nl(reasoning) + "\n</think>\n\n" + lstrip_nl(content);
      } else {
        out += "<|im_start|>assistant\n" + content;
      }
      if (truthy(m, "tool_calls")) {
        bool first = true;
        for (const auto& call : m.at("tool_calls")) {
          if (!first || !content.empty()) out += "\n";
          first = false;
          const ojson& fn = tool_function(call, i);
          const ojson& args = call_arguments(fn, i);
          out += "<tool_call>\n{\"name\": \"" + call_name(fn, i) + "\", \"arguments\": " +
                 (args.is_string() ? args.get<std::string>() : python_json(args)) + "}\n</tool_call>";
        }
      }
      out += "<|im_end|>\n";
    } else if (role == "tool") {
      tool_responses(out, ms, i);
    }
  }
  if (o.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    if (o.enable_thinking.has_value() && !*o.enable_thinking) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string render_llama3(const ojson& all, const chat_options& o) {
  std::string out = o.bos_token;
  bool tools = !o.tools.is_null();
  size_t begin = 0;
  std::string system;
  if (!all.empty() && role_of(all[0], 0) == "system") {
    system = trim(content_of(all[0], 0));
    begin = 1;
  }
  out += "<|start_header_id|>system<|end_header_id|>\n\n";
  if (tools) out += "Environment: ipython\n";
  out += "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n";
  out += system + "<|eot_id|>";
  if (tools) {
    if (begin >= all.size()) {
      throw render_error("Cannot put tools in the first user message when there's no first user message!");
    }
    std::string first_user = trim(content_of(all[begin], begin));
    ++begin;
    out += "<|start_header_id|>user<|end_header_id|>\n\n";
    out += "Given the following functions, please respond with a JSON for a function call with its proper "
           "arguments that best answers the given prompt.\n\n";
    out += "Respond in the format {\"name\": function name, \"parameters\": dictionary of argument name and "
           "its value}.Do not use variables.\n\n";
    for (const auto& t : o.tools) out += python_json(t, 4) + "\n\n";
    out += first_user + "<|eot_id|>";
  }
  for (size_t i = begin; i < all.size(); ++i) {
    const auto& m = all[i];
    std::string role = role_of(m, i);
    if (!(role == "ipython" || role == "tool" || m.contains("tool_calls"))) {
      out += "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + trim(content_of(m, i)) + "<|eot_id|>";
    } else if (m.contains("tool_calls")) {
      const auto& calls = m.at("tool_calls");
      if (!calls.is_array() || calls.size() != 1) {
        throw render_error("message " + std::to_string(i) +
                           ": This model only supports single tool-calls at once!");
      }
      const auto& fn = calls[0].at("function");
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"" + call_name(fn, i) +
             "\", \"parameters\": " + python_json(call_arguments(fn, i)) + "}<|eot_id|>";
    } else {
      out += "<|start_header_id|>ipython<|end_header_id|>\n\n";
      const auto& c = m.contains("content") ? m.at("content") : ojson();
      // The template writes mappings and iterables (strings included) as JSON.
      out += c.is_string() || c.is_array() || c.is_object() ? python_json(c)
             : c.is_null()                                  ? std::string("None")
                                                            : c.dump();
      out += "<|eot_id|>";
    }
  }
  if (o.add_generation_prompt) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace

std::string python_json(const ojson& x, int indent) {
  std::string out;
  dump_into(out, x, indent, 0);
  return out;
}

std::optional<chat_family> parse_chat_family(std::string_view n) {
  if (n == "qwen2.5" || n == "qwen2_5" || n == "qwen2") return chat_family::qwen2_5;
  if (n == "qwen3") return chat_family::qwen3;
  if (n == "llama3" || n == "llama3.1" || n == "llama3.3") return chat_family::llama3;
  return std::nullopt;
}

std::string chat_family_name(chat_family f) {
  switch (f) {
    case chat_family::qwen2_5: return "qwen2.5";
    case chat_family::qwen3: return "qwen3";
    case chat_family::llama3: return "llama3";
  }
  return "?";
}

std::optional<chat_family> detect_chat_family(const std::string& j) {
  auto has = [&](const char* s) { return j.find(s) != std::string::npos; };
  if (has("<|im_start|>") && has("reasoning_content") && has("last_query_index")) return chat_family::qwen3;
  if (has("<|im_start|>") && has("You are Qwen, created by Alibaba Cloud")) return chat_family::qwen2_5;
  if (has("<|start_header_id|>") && has("Cutting Knowledge Date")) return chat_family::llama3;
  return std::nullopt;
}

chat_render_result render_chat(chat_family family, const ojson& messages, const chat_options& options) {
  if (!messages.is_array()) return {{}, "'messages' must be a list"};
  if (!options.tools.is_null() && !options.tools.is_array()) return {{}, "'tools' must be a list"};
  try {
    switch (family) {
      case chat_family::qwen2_5: return {render_qwen2_5(messages, options), {}};
      case chat_family::qwen3: return {render_qwen3(messages, options), {}};
      case chat_family::llama3: return {render_llama3(messages, options), {}};
    }
  } catch (const std::exception& e) {
    return {{}, e.what()};
  }
  return {{}, "unknown chat family"};
}

chat_append_result chat_start(const tokenizer& tok, chat_family family, const ojson& messages,
                              const chat_options& options) {
  auto r = render_chat(family, messages, options);
  if (!r.error.empty()) return {{}, r.error};
  return {{r.text, tok.encode(r.text, false)}, {}};
}

chat_state chat_append_sampled(const tokenizer& tok, chat_state state, const std::vector<token_id>& sampled) {
  state.text += tok.decode(sampled, false);
  state.ids.insert(state.ids.end(), sampled.begin(), sampled.end());
  return state;
}

chat_append_result chat_append(const tokenizer& tok, chat_family family, const chat_state& past,
                               const ojson& messages, const chat_options& options) {
  auto r = render_chat(family, messages, options);
  if (!r.error.empty()) return {past, r.error};
  if (r.text.compare(0, past.text.size(), past.text) != 0) {
    size_t at = 0;
    while (at < past.text.size() && at < r.text.size() && past.text[at] == r.text[at]) ++at;
    std::string why = family == chat_family::qwen3
                          ? " (Qwen3's template drops the reasoning of assistant turns before the last user query)"
                          : "";
    return {past, "the " + chat_family_name(family) +
                      " template is not append-only here: rendering the conversation changes the text "
                      "already tokenized at byte " + std::to_string(at) + why + "; history kept as it was"};
  }
  chat_state next = past;
  next.text = r.text;
  auto tail = tok.encode(std::string_view(r.text).substr(past.text.size()), false);
  next.ids.insert(next.ids.end(), tail.begin(), tail.end());
  return {next, {}};
}

}  // namespace milesrt::llm
