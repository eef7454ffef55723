#pragma once
/// `milesrt bench tokenize`: encode throughput of a model's tokenizer on a corpus, one thread and
/// a batch spread over TBB threads. test/oracle/tokenizer_bench.py runs HF `tokenizers` beside it.

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace milesrt::llm {

struct tokenize_bench_options {
  std::filesystem::path model;  ///< folder with tokenizer.json
  std::filesystem::path
      corpus;       ///< JSON lines with "text" (.jsonl), or plain text split at blank lines
  int threads = 0;  ///< batch threads; 0 means every hardware thread
  double min_seconds = 2.0;  ///< each measurement repeats whole passes until this much time went by
};

/// The benchmark's report (one JSON object, as text), or an error naming the file at fault.
struct tokenize_bench_result {
  std::string report;
  std::string error;
};

/// Loads the tokenizer and corpus, warms up with one pass, then times single-thread encode and a
/// batch encode (tbb::parallel_for over documents in an arena of `threads`). The report carries
/// MB/s of both, the token count and an FNV-1a hash of all ids, so that a peer can check it
/// encoded the same ids; and, when the model has a chat template, the time to render a 20-turn
/// conversation with tools (built from the corpus) against the time to tokenize its text.
tokenize_bench_result run_tokenize_bench(const tokenize_bench_options& options);

/// Documents of a corpus file (see `tokenize_bench_options::corpus`); throws std::runtime_error
/// naming the file and line.
std::vector<std::string> read_bench_corpus(const std::filesystem::path& path);

}  // namespace milesrt::llm
