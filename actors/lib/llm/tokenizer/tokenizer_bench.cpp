#include "actors/lib/llm/tokenizer/tokenizer_bench.hpp"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <chrono>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "actors/lib/llm/tokenizer/chat_template.hpp"
#include "actors/lib/llm/tokenizer/tokenizer.hpp"

namespace milesrt::llm {
namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// FNV-1a over the ids (little-endian int32 bytes) of every document in order, and a 0xFFFFFFFF
// separator after each document; test/oracle/tokenizer_bench.py computes the same.
uint64_t hash_ids(const std::vector<std::vector<token_id>>& docs) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&](uint32_t v) {
    for (int k = 0; k < 4; ++k) {
      h ^= (v >> (8 * k)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  };
  for (const auto& ids : docs) {
    for (token_id id : ids) mix(static_cast<uint32_t>(id));
    mix(0xFFFFFFFFu);
  }
  return h;
}

struct timing {
  double seconds = 0;
  int passes = 0;
};

// Repeats `pass` until `min_seconds` went by (at least once).
template <class F>
timing repeat(double min_seconds, F&& pass) {
  timing t;
  const double t0 = now_s();
  do {
    pass();
    ++t.passes;
    t.seconds = now_s() - t0;
  } while (t.seconds < min_seconds);
  return t;
}

// A 20-turn conversation with tools: a system prompt, then ten user/assistant exchanges whose text
// comes from the corpus (up to 400 bytes each, cut at a code point), every third answer being a
// tool call and its result before the answer.
nlohmann::ordered_json bench_conversation(const std::vector<std::string>& docs) {
  auto text = [&](size_t i) {
    const std::string& d = docs[i % docs.size()];
    size_t n = std::min<size_t>(d.size(), 400);
    while (n < d.size() && (static_cast<unsigned char>(d[n]) & 0xC0) == 0x80) --n;
    return d.substr(0, n);
  };
  nlohmann::ordered_json ms = nlohmann::ordered_json::array();
  ms.push_back({{"role", "system"},
                {"content", "You are a helpful assistant. Use the tools when they help."}});
  for (size_t turn = 0; turn < 10; ++turn) {
    ms.push_back({{"role", "user"}, {"content", text(2 * turn)}});
    if (turn % 3 == 2) {
      nlohmann::ordered_json call = {
          {"id", "call" + std::to_string(turn)},
          {"type", "function"},
          {"function",
           {{"name", "get_weather"}, {"arguments", {{"city", "Paris"}, {"unit", "c"}}}}}};
      ms.push_back({{"role", "assistant"}, {"content", ""}, {"tool_calls", {call}}});
      ms.push_back({{"role", "tool"},
                    {"tool_call_id", call["id"]},
                    {"name", "get_weather"},
                    {"content", "{\"temp\": 21, \"sky\": \"clear\"}"}});
    }
    ms.push_back({{"role", "assistant"}, {"content", text(2 * turn + 1)}});
  }
  return ms;
}

nlohmann::ordered_json bench_tools() {
  return nlohmann::ordered_json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Get the current weather in a city", "parameters": {"type": "object", "properties": {
    "city": {"type": "string", "description": "City name"}, "unit": {"type": "string", "enum": ["c", "f"]}},
    "required": ["city"]}}}])");
}

// The model's chat template on a 20-turn conversation with tools: render time against the time to
// tokenize the rendered text. Null when the model has no template.
nlohmann::ordered_json chat_bench(const tokenizer& tok, const std::vector<std::string>& docs,
                                  double min_seconds) {
  auto t = chat_template::from_model(tok);
  if (!t.tmpl)
    return t.error.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json{{"error", t.error}};
  chat_options o;
  o.add_generation_prompt = true;
  o.tools = bench_tools();
  o.now = std::tm{};
  const auto messages = bench_conversation(docs);
  auto first = t.tmpl->render(messages, o);
  if (!first.error.empty()) return {{"error", first.error}};
  std::string text;
  std::vector<token_id> ids;
  timing render = repeat(min_seconds, [&] { text = t.tmpl->render(messages, o).text; });
  timing encode = repeat(min_seconds, [&] { ids = tok.encode(text); });
  const double render_us = 1e6 * render.seconds / render.passes,
               encode_us = 1e6 * encode.seconds / encode.passes;
  return {{"messages", messages.size()},
          {"template", t.tmpl->origin()},
          {"bytes", text.size()},
          {"tokens", ids.size()},
          {"render_us", render_us},
          {"encode_us", encode_us},
          {"render_over_encode", render_us / encode_us}};
}

}  // namespace

std::vector<std::string> read_bench_corpus(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(path.string() + ": cannot open");
  std::vector<std::string> docs;
  if (path.extension() == ".jsonl") {
    size_t n = 0;
    for (std::string line; std::getline(in, line);) {
      ++n;
      if (line.empty()) continue;
      try {
        docs.push_back(nlohmann::json::parse(line).at("text").get<std::string>());
      } catch (const std::exception& e) {
        throw std::runtime_error(path.string() + ":" + std::to_string(n) + ": " + e.what());
      }
    }
  } else {
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string all = ss.str();
    for (size_t at = 0; at < all.size();) {
      size_t end = all.find("\n\n", at);
      end = end == std::string::npos ? all.size() : end + 2;
      docs.push_back(all.substr(at, end - at));
      at = end;
    }
  }
  if (docs.empty()) throw std::runtime_error(path.string() + ": no documents");
  return docs;
}

tokenize_bench_result run_tokenize_bench(const tokenize_bench_options& o) {
  auto loaded = tokenizer::load(o.model);
  if (!loaded.tok) return {{}, loaded.error};
  const tokenizer& tok = *loaded.tok;
  std::vector<std::string> docs;
  try {
    docs = read_bench_corpus(o.corpus);
  } catch (const std::exception& e) {
    return {{}, e.what()};
  }
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  const int threads = o.threads > 0
                          ? o.threads
                          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  std::vector<std::vector<token_id>> single(docs.size()), batch(docs.size());
  // Warm-up pass: PCRE2's JIT stack and match data, the allocator, the CPU caches.
  for (size_t i = 0; i < docs.size(); ++i) single[i] = tok.encode(docs[i]);
  size_t tokens = 0;
  for (const auto& ids : single) tokens += ids.size();
  const uint64_t hash = hash_ids(single);

  timing one = repeat(o.min_seconds, [&] {
    for (size_t i = 0; i < docs.size(); ++i) single[i] = tok.encode(docs[i]);
  });

  tbb::task_arena arena(threads);
  auto batch_pass = [&] {
    arena.execute([&] {
      tbb::parallel_for(tbb::blocked_range<size_t>(0, docs.size(), 1),
                        [&](const tbb::blocked_range<size_t>& r) {
                          for (size_t i = r.begin(); i != r.end(); ++i)
                            batch[i] = tok.encode(docs[i]);
                        });
    });
  };
  batch_pass();  // warm-up: every worker's match state
  timing many = repeat(o.min_seconds, batch_pass);
  if (hash_ids(batch) != hash || hash_ids(single) != hash) {
    return {{}, "bench tokenize: the batch encode gave other ids than the single-thread encode"};
  }

  const double mb = static_cast<double>(bytes) / 1e6;
  nlohmann::ordered_json out;
  out["bench"] = "tokenize";
  out["model"] = o.model.string();
  out["corpus"] = o.corpus.string();
  out["documents"] = docs.size();
  out["bytes"] = bytes;
  out["tokens"] = tokens;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  out["ids_fnv1a"] = hex;
  out["single_thread"] = {{"passes", one.passes},
                          {"seconds", one.seconds},
                          {"mb_per_s", mb * one.passes / one.seconds}};
  out["batch"] = {{"threads", threads},
                  {"passes", many.passes},
                  {"seconds", many.seconds},
                  {"mb_per_s", mb * many.passes / many.seconds}};
  if (auto chat = chat_bench(tok, docs, o.min_seconds); !chat.is_null())
    out["chat_20_turns_with_tools"] = chat;
  return {out.dump(), {}};
}

}  // namespace milesrt::llm
