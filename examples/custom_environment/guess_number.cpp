#include "examples/custom_environment/guess_number.hpp"

#include <cctype>
#include <optional>
#include <stdexcept>

namespace milesrt::examples {
namespace {
// Inside a class derived from environment::environment, `environment` names that base class.
namespace env = milesrt::environment;
using env::json;
using env::observation;

/// The last integer in `text`, if any.
std::optional<long long> last_number(const std::string& text) {
  std::optional<long long> found;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j]))) ++j;
    if (j - i <= 15) found = std::stoll(text.substr(i, j - i));
    i = j;
  }
  return found;
}

class guess_episode final : public env::episode {
 public:
  guess_episode(const env::task& t, double penalty) : penalty_(penalty) {
    auto secret = last_number(t.label);
    if (!secret)
      throw std::runtime_error("guess_number: the task's label '" + t.label + "' is not a number");
    secret_ = *secret;
    prompt_ = t.prompt.empty() ? "Guess my number." : t.prompt;
  }

  observation reset() override {
    observation o;
    o.messages.push_back({{"role", "user"}, {"content", prompt_}});
    return o;
  }

  observation step(const json& message) override {
    observation o;
    const auto& c = message.value("content", json(""));
    auto guess = last_number(c.is_string() ? c.get<std::string>() : "");
    if (guess && *guess == secret_) {
      o.reward = 1.0;
      o.done = true;
      return o;
    }
    o.reward = -penalty_;
    const char* hint = !guess ? "a number, please" : *guess < secret_ ? "higher" : "lower";
    o.messages.push_back({{"role", "user"}, {"content", hint}});
    return o;
  }

 private:
  long long secret_ = 0;
  std::string prompt_;
  double penalty_;
};

class guess_number final : public env::environment {
 public:
  std::string configure(const json& options) override {
    for (const auto& [key, value] : options.items()) {
      if (key != "penalty") return "options." + key + ": unknown (guess_number takes: penalty)";
      if (!value.is_number() || value.get<double>() < 0)
        return "options.penalty: expected a number >= 0";
      penalty_ = value.get<double>();
    }
    return "";
  }
  std::unique_ptr<env::episode> open(const env::task& t, const std::string&) override {
    return std::make_unique<guess_episode>(t, penalty_);
  }

 private:
  double penalty_ = 0;
};

}  // namespace

std::unique_ptr<environment::environment> make_guess_number() {
  return std::make_unique<guess_number>();
}

}  // namespace milesrt::examples
