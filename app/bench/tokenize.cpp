// `milesrt bench tokenize`: tokenizer throughput on a corpus, single thread and batch.
#include "actors/lib/llm/tokenizer/tokenizer_bench.hpp"
#include "app/bench/bench.hpp"

namespace milesrt::app {

cli::runner define_bench_tokenize(CLI::App& app, cli::context& ctx) {
  auto opt = std::make_shared<llm::tokenize_bench_options>();
  app.add_option("--model", opt->model, "a folder with tokenizer.json")->required();
  app.add_option("--corpus", opt->corpus,
                 "JSON lines with \"text\" (.jsonl) or plain text split at blank lines")
      ->required();
  app.add_option("--threads", opt->threads, "batch threads (default: all)");
  return [opt, &ctx] {
    auto r = llm::run_tokenize_bench(*opt);
    if (!r.error.empty()) {
      cli::print_error(ctx.err, "bench tokenize", r.error);
      return cli::exit_status::bad_input;
    }
    ctx.out << r.report << "\n";
    return cli::exit_status::ok;
  };
}

}  // namespace milesrt::app
