// A reference server of the remote teacher protocol (docs/kinds.md#teacher): a Hugging Face model
// folder behind milesrt's HTTP server, answering the teacher kind's two POSTs:
//   POST /v1/logprobs   {"temperature": T, "sequences": [{"prompt": [ids], "output": [ids]}]}
//                       -> {"logprobs": [[per output token]]}  (one batched prefill a request)
//   POST /v1/tokenizer  -> the model folder's tokenizer fingerprint
// A malformed request is answered 400 with the problem; requests are scored one at a time.
//
//   milesrt_teacher_server --model runs/arith/grpo_model --port 8300
//   (then a graph's teacher: params = (teacher = (url = "http://127.0.0.1:8300", ...)))
#include <ATen/ATen.h>
#include <signal.h>

#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "actors/lib/llm/model.hpp"
#include "actors/lib/llm/teacher_protocol.hpp"
#include "actors/lib/llm/tokenizer_fingerprint.hpp"
#include "runtime/http/http_server.hpp"

using namespace milesrt;

int main(int argc, char** argv) {
  CLI::App app{"milesrt_teacher_server: a teacher model's log-probs over HTTP"};
  std::string model_dir, address = "127.0.0.1", device = "cpu", dtype = "fp32", secret;
  uint16_t port = 8300;
  size_t max_tokens = 1 << 16;
  app.add_option("--model", model_dir, "the teacher's Hugging Face model folder")->required();
  app.add_option("--address", address, "the address to listen on (an IP literal)");
  app.add_option("--port", port, "the port to listen on (0: a free one, printed)");
  app.add_option("--device", device, "cpu or cuda[:N]");
  app.add_option("--dtype", dtype, "fp32 or bf16")->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_option("--bearer-secret", secret, "required of every request when set");
  app.add_option("--max-tokens", max_tokens, "the longest sequence (prompt + output) taken");
  CLI11_PARSE(app, argc, argv);

  // Blocked before any thread starts, so that every thread leaves SIGINT/SIGTERM to sigwait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  try {
    std::shared_ptr<const llm::decoder> model = llm::decoder::load(
        model_dir, dtype == "bf16" ? at::kBFloat16 : at::kFloat, c10::Device(device));
    const std::string fingerprint = llm::to_json(llm::fingerprint_of(model_dir));
    runtime::http_server_options o;
    o.address = address;
    o.port = port;
    o.bearer_secret = secret;
    o.body_limit = 64 << 20;
    runtime::http_server server(o);
    const auto json_answer = [](std::string body) {
      return runtime::http_response(200, "application/json", std::move(body));
    };
    server.route(runtime::http_method::post, "/v1/logprobs",
                 [&](const runtime::http_request& r) -> runtime::http_response {
                   try {
                     return json_answer(llm::answer_teacher_request(*model, r.body, max_tokens));
                   } catch (const std::invalid_argument& e) {
                     return {400, "text/plain; charset=utf-8", e.what()};
                   }
                 });
    server.route(runtime::http_method::post, "/v1/tokenizer",
                 [&](const runtime::http_request&) { return json_answer(fingerprint); });
    server.start();
    std::cout << "milesrt_teacher_server: " << model_dir << " on http://" << address << ":"
              << server.port() << std::endl;
    int sig = 0;
    sigwait(&stop, &sig);
  } catch (const std::exception& e) {
    std::cerr << "milesrt_teacher_server: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
