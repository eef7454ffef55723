#include "actors/critic/critic_core.hpp"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <chrono>
#include <stdexcept>

#include "actors/lib/llm/safetensors.hpp"
#include "actors/lib/rl/advantages.hpp"
#include "actors/lib/rl/builtin.hpp"
#include "actors/lib/rl/losses.hpp"
#include "actors/lib/rl/master_weights.hpp"
#include "runtime/core/timer.hpp"

namespace milesrt::critic {
namespace fs = std::filesystem;
using llm::sample_msg;

namespace {

/// The head [hidden + 1] fp32 from a value_head.safetensors file.
at::Tensor read_head(const fs::path& file, int64_t hidden) {
  llm::safetensors_checkpoint ckpt(file);
  auto tensor = [&](const std::string& name, std::vector<int64_t> shape) {
    const auto& v = ckpt.get(name);
    if (v.shape != shape) {
      throw std::runtime_error(file.string() + ": tensor '" + name +
                               "' has the wrong shape (the value head is Linear(" +
                               std::to_string(hidden) + ", 1))");
    }
    const auto dt = v.type == llm::dtype::f32    ? at::kFloat
                    : v.type == llm::dtype::bf16 ? at::kBFloat16
                                                 : at::kHalf;
    return at::from_blob(const_cast<uint8_t*>(v.data),
                         {static_cast<int64_t>(v.nbytes / llm::dtype_size(v.type))}, dt)
        .to(at::kFloat)
        .clone();
  };
  return at::cat({tensor("value_head.weight", {1, hidden}), tensor("value_head.bias", {1})});
}

}  // namespace

critic_core::critic_core(std::unique_ptr<llm::decoder> model, at::Tensor head,
                         critic_options options)
    : model_(std::move(model)), options_(std::move(options)) {
  const int64_t h = model_->config().hidden_size;
  const auto dev = model_->device();
  if (!head.defined()) head = at::zeros({h + 1}, at::kFloat);
  TORCH_CHECK(head.numel() == h + 1, "critic: the value head needs ", h + 1, " values, got ",
              head.numel());
  auto& params = model_->mutable_params();
  params.enable_grad();
  decoder_numel_ = params.buffer().numel();
  master_ = at::cat({params.buffer().detach().to(at::kFloat).flatten(),
                     head.detach().to(dev, at::kFloat).flatten()})
                .contiguous();
  head_ = master_.narrow(0, decoder_numel_, h + 1).clone();
  head_.set_requires_grad(true);
  adam_ = std::make_unique<rl::adamw>(options_.optimizer, master_);
}

std::unique_ptr<critic_core> critic_core::load(const fs::path& dir, at::ScalarType dtype,
                                               at::Device device, critic_options options) {
  auto model = llm::decoder::load(dir, dtype, device);
  at::Tensor head;
  if (fs::exists(dir / value_head_file))
    head = read_head(dir / value_head_file, model->config().hidden_size);
  return std::make_unique<critic_core>(std::move(model), head, std::move(options));
}

at::Tensor critic_core::head() const { return head_.detach().to(at::kCPU).clone(); }

at::Tensor critic_core::predict(const std::vector<sample_msg>& samples, size_t begin,
                                size_t end) const {
  std::vector<llm::segment> segments;
  std::vector<int64_t> rows;
  int64_t row = 0;
  for (size_t i = begin; i < end; ++i) {
    const auto& s = samples[i];
    if (s.output.empty()) continue;
    if (s.prompt.empty())
      throw std::invalid_argument("sample " + std::to_string(i) + " has no prompt token");
    std::vector<int64_t> full = s.prompt;
    full.insert(full.end(), s.output.begin(), s.output.end());
    const int64_t P = static_cast<int64_t>(s.prompt.size()), L = static_cast<int64_t>(full.size());
    for (int64_t t = 0; t < static_cast<int64_t>(s.output.size()); ++t)
      rows.push_back(row + P - 1 + t);
    segments.push_back({std::move(full), 0, nullptr});
    row += L;
  }
  if (rows.empty()) return at::zeros({0}, at::kFloat);
  auto fr = model_->forward(segments, {});
  const int64_t h = model_->config().hidden_size;
  auto picked =
      fr.hidden.index_select(0, at::tensor(rows, at::kLong).to(model_->device())).to(at::kFloat);
  // A per-row reduction: each token's value is independent of how many rows are packed.
  return (picked * head_.narrow(0, 0, h)).sum(-1) + head_.narrow(0, h, 1);
}

std::vector<std::vector<float>> critic_core::values(const std::vector<sample_msg>& samples) const {
  at::NoGradGuard no_grad;
  auto v = predict(samples, 0, samples.size()).to(at::kCPU).contiguous();
  std::vector<std::vector<float>> out(samples.size());
  const float* p = v.data_ptr<float>();
  for (size_t i = 0; i < samples.size(); ++i) {
    out[i].assign(p, p + samples[i].output.size());
    p += samples[i].output.size();
  }
  return out;
}

critic_core::step_inputs critic_core::gather(const std::vector<sample_msg>& samples,
                                             const std::vector<size_t>& group_sizes) const {
  // The values the samples carry (from the critic's "groups" port) are the old values of the
  // clipped loss and the GAE baseline; samples without them get this critic's values now.
  step_inputs in;
  std::vector<size_t> missing;
  for (size_t i = 0; i < samples.size(); ++i) {
    if (samples[i].values.size() != samples[i].output.size()) missing.push_back(i);
  }
  std::vector<std::vector<float>> fresh;
  if (!missing.empty()) {
    std::vector<sample_msg> need;
    for (size_t i : missing) need.push_back(samples[i]);
    fresh = values(need);
  }
  size_t next_missing = 0;
  int64_t g = 0;
  size_t in_group = 0;
  for (size_t i = 0; i < samples.size(); ++i) {
    while (in_group == group_sizes[g]) {
      g++;
      in_group = 0;
    }
    in_group++;
    const auto& s = samples[i];
    in.rewards.push_back(s.reward);
    in.groups.push_back(g);
    const auto& v = next_missing < missing.size() && missing[next_missing] == i
                        ? fresh[next_missing++]
                        : s.values;
    in.old_values.insert(in.old_values.end(), v.begin(), v.end());
    for (size_t t = 0; t < s.output.size(); ++t) in.seq_index.push_back(static_cast<int64_t>(i));
  }
  return in;
}

double critic_core::backward_groups(const std::vector<sample_msg>& samples,
                                    const std::vector<size_t>& group_sizes, const at::Tensor& old_t,
                                    const at::Tensor& returns, const at::Tensor& mask_t) {
  const auto N = static_cast<double>(old_t.numel());
  const auto dev = model_->device();
  double loss_sum = 0;
  size_t begin = 0;
  int64_t offset = 0;
  for (size_t n : group_sizes) {
    int64_t tokens = 0;
    for (size_t i = begin; i < begin + n; ++i)
      tokens += static_cast<int64_t>(samples[i].output.size());
    if (tokens > 0) {
      auto v = predict(samples, begin, begin + n);
      auto slice = [&](const at::Tensor& t) { return t.narrow(0, offset, tokens).to(dev); };
      auto loss =
          rl::value_loss(v, slice(old_t), slice(returns), slice(mask_t), options_.value_clip, N);
      loss_sum += loss.item<double>();
      loss.backward();
    }
    begin += n;
    offset += tokens;
  }
  return loss_sum;
}

rl::adamw::step_info critic_core::optimizer_step() {
  auto& params = model_->mutable_params();
  auto dgrad = params.grad();
  auto hgrad = head_.grad();
  auto grad =
      at::cat({dgrad.defined() ? dgrad.to(at::kFloat).flatten()
                               : at::zeros({decoder_numel_}, master_.options()),
               hgrad.defined() ? hgrad.flatten()
                               : at::zeros_like(master_.narrow(0, decoder_numel_, head_.numel()))});
  auto info = adam_->step(master_, grad);
  if (dgrad.defined()) dgrad.zero_();
  if (hgrad.defined()) hgrad.zero_();
  if (!info.skipped) publish_master();
  return info;
}

std::map<std::string, double> critic_core::train(const std::vector<sample_msg>& samples,
                                                 const std::vector<size_t>& group_sizes) {
  const timer t0;
  const auto fopt = at::TensorOptions().dtype(at::kFloat);
  size_t total = 0;
  for (size_t n : group_sizes) total += n;
  if (total != samples.size())
    throw std::invalid_argument("critic: group sizes do not add up to the samples");
  const step_inputs in = gather(samples, group_sizes);
  const int64_t N = static_cast<int64_t>(in.old_values.size());
  std::map<std::string, double> m;
  if (N == 0) {
    m["critic_loss"] = 0;
    return m;
  }
  auto old_t = at::tensor(in.old_values, fopt);
  auto mask_t = at::ones({N}, fopt);
  rl::advantage_options ao;
  ao.gamma = options_.gamma;
  ao.lambda = options_.lambda;
  auto returns =
      rl::token_advantages(*rl::make_gae_estimator(), at::tensor(in.rewards, fopt), in.groups,
                           at::tensor(in.seq_index, at::kLong), mask_t, at::Tensor(), old_t, ao)
          .returns;
  // One forward + backward per group; the loss is normalised by the step's token count, so the
  // gradients add up to the step's.
  const double loss_sum = backward_groups(samples, group_sizes, old_t, returns, mask_t);
  const auto info = optimizer_step();
  m["critic_loss"] = loss_sum;
  m["critic_grad_norm"] = info.grad_norm;
  m["critic_lr"] = info.lr;
  m["critic_value_mean"] = old_t.mean().item<double>();
  m["critic_return_mean"] = returns.mean().item<double>();
  m["critic_skipped_steps"] = info.skipped ? 1 : 0;
  m["critic_train_seconds"] = t0.seconds();
  return m;
}

void critic_core::publish_master() {
  auto& params = model_->mutable_params();
  {
    at::NoGradGuard no_grad;
    params.buffer().detach().copy_(master_.narrow(0, 0, decoder_numel_));
    head_.detach().copy_(master_.narrow(0, decoder_numel_, head_.numel()));
    rl::check_finite_weights(master_, "critic", adam_->steps());
  }
  // Outside the guard: views made under no-grad would not carry gradients to the buffer.
  params.rebuild_views();
}

void critic_core::save(const fs::path& dir) const {
  const fs::path model_dir = dir / "model";
  fs::create_directories(model_dir);
  model_->save(model_dir);
  // write_safetensors names its file model.safetensors: write into a folder of its own, then move.
  const int64_t h = model_->config().hidden_size;
  auto head = head_.detach().to(at::kCPU).contiguous();
  const fs::path tmp = model_dir / ".value_head.tmp";
  fs::remove_all(tmp);
  llm::write_safetensors(
      tmp, {{"value_head.weight", llm::dtype::f32, {1, h}, head.data_ptr<float>(), size_t(h) * 4},
            {"value_head.bias", llm::dtype::f32, {1}, head.data_ptr<float>() + h, 4}});
  fs::rename(tmp / "model.safetensors", model_dir / value_head_file);
  fs::remove_all(tmp);
  rl::save_optimizer_state(dir, *adam_, master_, model_->dtype() != at::kFloat);
}

void critic_core::restore(const fs::path& dir) {
  const fs::path model_dir = dir / "model";
  auto saved = llm::decoder::load(model_dir, at::kFloat, at::Device(at::kCPU));
  if (saved->params().names() != model_->params().names() ||
      saved->params().shapes() != model_->params().shapes()) {
    throw std::runtime_error(model_dir.string() +
                             ": the saved model has other parameters than this critic");
  }
  auto head = read_head(model_dir / value_head_file, model_->config().hidden_size);
  rl::load_optimizer_state(dir, *adam_);
  // fp32 saves are exact; a bf16 decoder resumes its fp32 master weights from master.bin.
  at::Tensor master;
  if (model_->dtype() != at::kFloat) {
    master = rl::read_master(dir, master_.numel());
  } else {
    master = at::cat({saved->params().buffer().detach().flatten(), head});
  }
  {
    at::NoGradGuard no_grad;
    master_.copy_(master.to(master_.device()));
  }
  publish_master();
}

}  // namespace milesrt::critic
