#pragma once
/// A model's parameters in one flat buffer (model.hpp's decoder keeps them here): each tensor a
/// view into it, one flat gradient beside it for training.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace milesrt::llm {

/// All parameters of a model in one flat buffer (one dtype, one device), each tensor a view into
/// it: a whole model is copied in one transfer, and shared without copies.
class flat_params {
 public:
  flat_params(const std::vector<std::pair<std::string, std::vector<int64_t>>>& specs,
              at::ScalarType dtype, at::Device device);
  /// The tensor named `name` (a view into the buffer); throws naming it when unknown.
  const at::Tensor& get(const std::string& name) const;
  bool contains(const std::string& name) const;
  /// The flat buffer itself.
  const at::Tensor& buffer() const { return buffer_; }
  const std::vector<std::string>& names() const { return names_; }
  /// For training: gives the parameters one flat gradient buffer (same dtype and device) and makes
  /// each parameter a leaf that requires grad, its .grad a view into that buffer, so backward
  /// passes accumulate every gradient in place there.
  void enable_grad();
  /// The flat gradient (undefined until enable_grad()); zero it after each optimizer step.
  const at::Tensor& grad() const { return grad_; }
  /// Makes the views again (after the buffer was replaced or updated in place).
  void rebuild_views();
  /// The shape of each parameter, in order.
  const std::vector<std::vector<int64_t>>& shapes() const { return shapes_; }
  /// Each parameter's name and element count, in buffer order.
  std::vector<std::pair<std::string, int64_t>> element_counts() const;
  /// The first tensor holding NaN or inf, with a message part: "tensor 'NAME' holds N non-finite
  /// values (NaN or inf)"; nullopt when every value is finite. One reduction over the buffer (its
  /// min and max, which NaN and inf reach) and no buffer-sized temporary; only a buffer that fails
  /// is searched tensor by tensor.
  std::optional<std::pair<std::string, std::string>> first_non_finite() const;
  /// A new buffer with the same names and shapes holding these values (converted to `dtype` on
  /// `device`); nothing is shared with this one.
  std::shared_ptr<flat_params> copy(at::ScalarType dtype, at::Device device) const;

 private:
  at::Tensor buffer_, grad_;
  std::vector<std::string> names_;
  /// names_' positions by name (a forward looks up a dozen tensors a layer).
  std::unordered_map<std::string, size_t> index_;
  std::vector<at::Tensor> views_;
  std::vector<std::vector<int64_t>> shapes_;
};

}  // namespace milesrt::llm
