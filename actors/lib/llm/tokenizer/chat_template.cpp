#include "actors/lib/llm/tokenizer/chat_template.hpp"

#include <fstream>
#include <sstream>

#include "actors/lib/llm/tokenizer/jinja/program.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"
#include "runtime/core/user_file.hpp"

namespace milesrt::llm {
namespace {

using ojson = nlohmann::ordered_json;

ojson specials_of(const tokenizer& tok) {
  ojson s = ojson::object();
  for (const auto& [name, text] : tok.special_tokens()) s[name] = text;
  return s;
}

chat_template_result read_template_file(const std::filesystem::path& path, const tokenizer& tok) {
  if (auto problem = runtime::regular_file_problem(path);
      !problem.empty() && problem != "no such file") {
    return {nullptr, path.string() + ": " + problem};
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return {nullptr, path.string() + ": cannot open the chat template" +
                         (std::filesystem::exists(path) ? "" : " (no such file)")};
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return chat_template::parse(ss.str(), path.string(), specials_of(tok));
}

}  // namespace

chat_template::chat_template(std::shared_ptr<const jinja::program> program, std::string source,
                             std::string origin, ojson specials)
    : program_(std::move(program)),
      source_(std::move(source)),
      origin_(std::move(origin)),
      specials_(std::move(specials)) {}

chat_template_result chat_template::parse(const std::string& source, std::string origin,
                                          ojson specials) {
  try {
    auto prog = jinja::program::parse(source);
    return {std::make_shared<chat_template>(std::move(prog), source, std::move(origin),
                                            std::move(specials)),
            {}};
  } catch (const std::exception& e) {
    return {nullptr, origin + ": " + e.what()};
  }
}

chat_template_result chat_template::from_file(const std::filesystem::path& path,
                                              const tokenizer& tok) {
  return read_template_file(path, tok);
}

chat_template_result chat_template::from_model(const tokenizer& tok) {
  if (!tok.chat_template().empty()) {
    return parse(tok.chat_template(),
                 (tok.dir() / "tokenizer_config.json").string() + "'s chat_template",
                 specials_of(tok));
  }
  auto beside = tok.dir() / "chat_template.jinja";
  if (std::filesystem::exists(beside)) return read_template_file(beside, tok);
  return {nullptr, {}};
}

chat_template_result chat_template::load(const std::string& path, const tokenizer& tok) {
  return path.empty() ? from_model(tok) : from_file(path, tok);
}

chat_render_result chat_template::render(const ojson& messages, const chat_options& options) const {
  if (!messages.is_array()) return {{}, "'messages' must be a list"};
  if (!options.tools.is_null() && !options.tools.is_array()) return {{}, "'tools' must be a list"};
  if (!options.documents.is_null() && !options.documents.is_array())
    return {{}, "'documents' must be a list"};
  if (!options.extra.is_object()) return {{}, "extra template arguments must be an object"};
  // transformers: render_jinja_template(messages, tools, documents, add_generation_prompt,
  // **special_tokens_map, **kwargs); the keyword arguments win over the special tokens.
  // The conversation, tools and documents are read in place (borrowed, winning over `vars`): a
  // copy of a long conversation per render would cost as much as the render itself.
  ojson vars = specials_;
  for (auto it = options.extra.begin(); it != options.extra.end(); ++it)
    vars[it.key()] = it.value();
  vars["add_generation_prompt"] = options.add_generation_prompt;
  jinja::environment env;
  env.now = options.now;
  try {
    return {
        program_->render(
            vars,
            {{"messages", &messages}, {"tools", &options.tools}, {"documents", &options.documents}},
            env),
        {}};
  } catch (const std::exception& e) {
    return {{}, origin_ + ": " + e.what()};
  }
}

chat_append_result chat_start(const tokenizer& tok, const chat_template& tmpl,
                              const ojson& messages, const chat_options& options) {
  auto r = tmpl.render(messages, options);
  if (!r.error.empty()) return {{}, r.error};
  return {{r.text, tok.encode(r.text, false)}, {}};
}

chat_state chat_append_sampled(const tokenizer& tok, chat_state state,
                               const std::vector<token_id>& sampled) {
  state.text += tok.decode(sampled, false);
  state.ids.insert(state.ids.end(), sampled.begin(), sampled.end());
  return state;
}

chat_append_result chat_append(const tokenizer& tok, const chat_template& tmpl,
                               const chat_state& past, const ojson& messages,
                               const chat_options& options) {
  auto r = tmpl.render(messages, options);
  if (!r.error.empty()) return {past, r.error};
  if (r.text.compare(0, past.text.size(), past.text) != 0) {
    size_t at = 0;
    while (at < past.text.size() && at < r.text.size() && past.text[at] == r.text[at]) ++at;
    // Qwen3's template, for one, drops the reasoning of assistant turns before the last user query.
    return {past,
            "the chat template (" + tmpl.origin() +
                ") is not append-only here: rendering the conversation changes the text already "
                "tokenized at byte " +
                std::to_string(at) +
                " (a template that rewrites past turns, such as one that drops the reasoning of "
                "earlier assistant turns); history kept as it was"};
  }
  chat_state next = past;
  next.text = r.text;
  auto tail = tok.encode(std::string_view(r.text).substr(past.text.size()), false);
  next.ids.insert(next.ids.end(), tail.begin(), tail.end());
  return {next, {}};
}

}  // namespace milesrt::llm
