#include "actors/lib/llm/flat_params.hpp"

#include <ATen/ATen.h>

#include <cmath>
#include <stdexcept>

namespace milesrt::llm {

flat_params::flat_params(const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs,
                         at::ScalarType dtype, at::Device device) {
  int64_t total = 0;
  for (const auto& [name, shape] : specs) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    total += n;
  }
  buffer_ = at::zeros({total}, at::TensorOptions().dtype(dtype).device(device));
  for (const auto& [name, shape] : specs) {
    index_.emplace(name, names_.size());  // the first of a repeated name wins, as it always did
    names_.push_back(name);
    shapes_.push_back(shape);
  }
  rebuild_views();
}

void flat_params::rebuild_views() {
  views_.clear();
  int64_t offset = 0;
  for (const auto& shape : shapes_) {
    int64_t n = 1;
    for (auto s : shape) n *= s;
    if (grad_.defined()) {
      // A leaf per parameter whose .grad is its slice of the flat gradient: autograd accumulates
      // into it in place (a view of the flat buffer would route every parameter's gradient
      // through a buffer-sized zero tensor).
      auto leaf = buffer_.narrow(0, offset, n).view(shape).detach();
      leaf.requires_grad_(true);
      leaf.mutable_grad() = grad_.narrow(0, offset, n).view(shape);
      views_.push_back(std::move(leaf));
    } else {
      views_.push_back(buffer_.narrow(0, offset, n).view(shape));
    }
    offset += n;
  }
}

std::vector<std::pair<std::string, int64_t>> flat_params::element_counts() const {
  std::vector<std::pair<std::string, int64_t>> out;
  for (size_t i = 0; i < names_.size(); ++i) {
    int64_t n = 1;
    for (auto s : shapes_[i]) n *= s;
    out.emplace_back(names_[i], n);
  }
  return out;
}

std::optional<std::pair<std::string, std::string>> flat_params::first_non_finite() const {
  if (buffer_.numel() == 0) return std::nullopt;
  const auto [lo, hi] = at::aminmax(buffer_.detach());
  if (std::isfinite(lo.item<double>()) && std::isfinite(hi.item<double>())) return std::nullopt;
  for (size_t i = 0; i < names_.size(); ++i) {
    const int64_t bad = at::logical_not(at::isfinite(views_[i].detach())).sum().item<int64_t>();
    if (bad > 0) {
      return std::make_pair(names_[i], "tensor '" + names_[i] + "' holds " + std::to_string(bad) +
                                           " non-finite value" + (bad == 1 ? "" : "s") +
                                           " (NaN or inf)");
    }
  }
  return std::nullopt;
}

std::shared_ptr<flat_params> flat_params::copy(at::ScalarType dtype, at::Device device) const {
  // Not through the constructor, which zeroes the buffer: one pass over the bytes, not two. The
  // views are made on the host while the device copies.
  auto out = std::make_shared<flat_params>(
      std::vector<std::pair<std::string, std::vector<int64_t>>>{}, dtype, device);
  out->names_ = names_;
  out->index_ = index_;
  out->shapes_ = shapes_;
  out->buffer_ = at::empty({buffer_.numel()}, at::TensorOptions().dtype(dtype).device(device));
  out->buffer_.copy_(buffer_.detach());
  out->rebuild_views();
  return out;
}

void flat_params::enable_grad() {
  if (!grad_.defined()) grad_ = at::zeros_like(buffer_, at::MemoryFormat::Contiguous);
  rebuild_views();
}

const at::Tensor& flat_params::get(const std::string& name) const {
  if (auto it = index_.find(name); it != index_.end()) return views_[it->second];
  throw std::out_of_range("model has no parameter '" + name + "'");
}

bool flat_params::contains(const std::string& name) const { return index_.count(name) != 0; }

}  // namespace milesrt::llm
