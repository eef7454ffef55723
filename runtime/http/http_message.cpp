#include "runtime/http/http_message.hpp"

#include <cctype>
#include <stdexcept>

namespace milesrt::runtime {

const char* to_string(http_method m) {
  switch (m) {
    case http_method::get:
      return "GET";
    case http_method::post:
      return "POST";
    case http_method::del:
      return "DELETE";
  }
  return "?";
}

std::string http_request::header(std::string_view name) const {
  auto same = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (std::tolower(static_cast<unsigned char>(a[i])) !=
          std::tolower(static_cast<unsigned char>(b[i])))
        return false;
    return true;
  };
  for (const auto& [n, v] : headers)
    if (same(n, name)) return v;
  return "";
}

const std::string& http_request::param(const std::string& name) const {
  auto it = params.find(name);
  if (it == params.end())
    throw std::out_of_range("http_request: the route of " + path + " has no parameter {" + name +
                            "}");
  return it->second;
}

}  // namespace milesrt::runtime
