#include "actors/lib/dist/gloo_collectives.hpp"

// ProcessGroupGloo.hpp declares its class only under USE_C10D_GLOO, which libtorch was built with.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <caf/sec.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <vector>

#include "actors/lib/dist/rendezvous.hpp"

namespace milesrt::dist {
namespace {

class gloo_collectives final : public collectives {
 public:
  gloo_collectives(group_options o, c10::intrusive_ptr<c10d::Store> store,
                   c10::intrusive_ptr<c10d::ProcessGroupGloo> pg)
      : options_(std::move(o)), store_(std::move(store)), pg_(std::move(pg)) {}

  const char* backend() const override { return "gloo"; }
  int rank() const override { return options_.rank; }
  int world_size() const override { return options_.world_size; }
  at::Device device() const override { return at::kCPU; }

  void all_reduce(at::Tensor& t) override {
    std::vector<at::Tensor> ts{t};
    wait("all_reduce", pg_->allreduce(ts));
  }

  void reduce_scatter(at::Tensor& out, const at::Tensor& in) override {
    TORCH_CHECK(in.numel() == out.numel() * options_.world_size, "reduce_scatter: in has ",
                in.numel(), " elements, out ", out.numel(), ", world ", options_.world_size);
    auto input = in;
    wait("reduce_scatter", pg_->_reduce_scatter_base(out, input));
  }

  void all_gather(at::Tensor& out, const at::Tensor& in) override {
    TORCH_CHECK(out.numel() == in.numel() * options_.world_size, "all_gather: out has ",
                out.numel(), " elements, in ", in.numel(), ", world ", options_.world_size);
    auto input = in;
    wait("all_gather", pg_->_allgather_base(out, input));
  }

  void broadcast(at::Tensor& t, int root) override {
    TORCH_CHECK(root >= 0 && root < options_.world_size, "broadcast: root ", root,
                " is outside the group of ", options_.world_size);
    std::vector<at::Tensor> ts{t};
    c10d::BroadcastOptions bo;
    bo.rootRank = root;
    wait("broadcast", pg_->broadcast(ts, bo));
  }

  void barrier() override { wait("barrier", pg_->barrier()); }

 private:
  void wait(const char* op, const c10::intrusive_ptr<c10d::Work>& work) {
    try {
      work->wait();
    } catch (const std::exception& e) {
      std::string what = e.what();
      throw collective_failed("gloo " + std::string(op) + " failed on " + describe_rank(options_) +
                              ": " + what.substr(0, what.find('\n')));
    }
  }

  group_options options_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> pg_;
};

}  // namespace

caf::expected<std::unique_ptr<collectives>> make_gloo_collectives(const group_options& o) {
  auto store = rendezvous(o);
  if (!store) return std::move(store.error());
  try {
    auto opts = c10d::ProcessGroupGloo::Options::create(o.op_timeout);
    // Loopback stays on loopback; another host is reached through this host's own name.
    const bool local = o.host == "127.0.0.1" || o.host == "localhost";
    opts->devices.push_back(local ? c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1")
                                  : c10d::ProcessGroupGloo::createDefaultDevice());
    opts->threads = 1;  // one worker thread: the ranks share a few cores
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("milesrt/gloo", *store);
    auto pg = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, o.rank, o.world_size, opts);
    return std::unique_ptr<collectives>(
        std::make_unique<gloo_collectives>(o, std::move(*store), std::move(pg)));
  } catch (const std::exception& e) {
    std::string what = e.what();
    return caf::make_error(caf::sec::runtime_error, "gloo: could not form the group on " +
                                                        describe_rank(o) + ": " +
                                                        what.substr(0, what.find('\n')));
  }
}

}  // namespace milesrt::dist
