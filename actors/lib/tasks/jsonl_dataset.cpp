#include "actors/lib/tasks/jsonl_dataset.hpp"

#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "runtime/core/untrusted_text.hpp"

namespace milesrt::tasks {
namespace {

using json = nlohmann::json;

/// A label as text: strings as they are, numbers and booleans as JSON writes them.
std::string label_text(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number() || v.is_boolean()) return v.dump();
  throw std::invalid_argument("is " + std::string(v.type_name()) + ", not a string or number");
}

/// The keys that are set, quoted: "'a'", "'a' or 'b'", "'a', 'b' or 'c'".
std::string one_of(const std::vector<std::string>& keys) {
  std::vector<std::string> set;
  for (const auto& k : keys)
    if (!k.empty()) set.push_back("'" + k + "'");
  std::string out;
  for (size_t i = 0; i < set.size(); ++i)
    out += (i == 0 ? "" : i + 1 == set.size() ? " or " : ", ") + set[i];
  return out;
}

/// A non-empty array of non-negative integers (token ids); `what` names the line and the key.
std::vector<int64_t> token_ids(const json& v, const std::string& what) {
  if (!v.is_array() || v.empty())
    throw std::runtime_error(what + "is not a non-empty array of token ids");
  std::vector<int64_t> ids;
  ids.reserve(v.size());
  for (const auto& x : v) {
    if (!x.is_number_integer() || x.get<int64_t>() < 0)
      throw std::runtime_error(what + "holds " + x.dump() + ", not a token id (an integer >= 0)");
    ids.push_back(x.get<int64_t>());
  }
  return ids;
}

}  // namespace

std::vector<data_record> load_jsonl(const std::filesystem::path& path, const data_keys& keys) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    const bool exists = std::filesystem::exists(path, ec);
    throw std::runtime_error(path.string() + ": " + (exists ? "cannot be read" : "no such file"));
  }
  std::vector<data_record> records;
  std::string line;
  size_t number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    const std::string where = path.string() + ":" + std::to_string(number) + ": ";
    if (auto deep = runtime::json_nesting_problem(line); !deep.empty())
      throw std::runtime_error(where + deep);
    json obj;
    try {
      obj = json::parse(line);
    } catch (const json::parse_error& e) {
      std::string what = e.what();
      // "[json.exception.parse_error.101] parse error at line 1, column 7: ..." -> from "column".
      auto at = what.find("column");
      throw std::runtime_error(where + "not valid JSON (" +
                               (at == std::string::npos ? what : what.substr(at)) + ")");
    }
    if (!obj.is_object()) {
      throw std::runtime_error(where + "a " + std::string(obj.type_name()) + ", not a JSON object");
    }
    data_record r;
    auto field = [&](const std::string& key) -> const json* {
      auto it = obj.find(key);
      return it == obj.end() || it->is_null() ? nullptr : &*it;
    };
    const json* prompt = field(keys.prompt);
    const json* messages = keys.messages.empty() ? nullptr : field(keys.messages);
    if (prompt) {
      if (!prompt->is_string()) {
        throw std::runtime_error(where + "'" + keys.prompt + "' is " + prompt->type_name() +
                                 ", not a string");
      }
      r.prompt = prompt->get<std::string>();
    }
    if (messages) {
      if (!messages->is_array()) {
        throw std::runtime_error(where + "'" + keys.messages + "' is " + messages->type_name() +
                                 ", not an array of {role, content}");
      }
      r.messages_json = messages->dump();
    }
    if (const json* ids = keys.prompt_ids.empty() ? nullptr : field(keys.prompt_ids)) {
      r.prompt_ids = token_ids(*ids, where + "'" + keys.prompt_ids + "' ");
    }
    if (!prompt && !messages && r.prompt_ids.empty())
      throw std::runtime_error(where + "no " +
                               one_of({keys.prompt, keys.messages, keys.prompt_ids}));
    if (const json* label = keys.label.empty() ? nullptr : field(keys.label)) {
      try {
        r.label = label_text(*label);
      } catch (const std::invalid_argument& e) {
        throw std::runtime_error(where + "'" + keys.label + "' " + e.what());
      }
    }
    if (const json* response = keys.response.empty() ? nullptr : field(keys.response)) {
      if (!response->is_string()) {
        throw std::runtime_error(where + "'" + keys.response + "' is " + response->type_name() +
                                 ", not a string");
      }
      r.response = response->get<std::string>();
    }
    records.push_back(std::move(r));
  }
  if (in.bad()) throw std::runtime_error(path.string() + ": read error");
  return records;
}

}  // namespace milesrt::tasks
