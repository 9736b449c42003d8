// Parameter layout and initialisation.
#include "ragtrain/model/model.hpp"

#include <cmath>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

const char* task_name(Task t) { return t == Task::Classification ? "classification" : "regression"; }

ParamLayout::ParamLayout(const ModelShape& shape) : shape_(shape) {
  RT_CHECK(shape.input_size > 0 && shape.hidden > 0 && shape.layers > 0 && shape.outputs > 0,
           "model shape must be positive");
  const int64_t H = shape.hidden;
  auto add = [&](std::string name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    tensors_.push_back(ParamTensor{std::move(name), std::move(dims), total_, n});
    total_ += n;
  };
  for (int64_t l = 0; l < shape.layers; ++l) {
    const int64_t in = l == 0 ? shape.input_size : H;
    const std::string s = std::to_string(l);
    add("lstm.weight_ih_l" + s, {4 * H, in});
    add("lstm.weight_hh_l" + s, {4 * H, H});
    add("lstm.bias_ih_l" + s, {4 * H});
    add("lstm.bias_hh_l" + s, {4 * H});
  }
  add("fc.weight", {shape.outputs, H});
  add("fc.bias", {shape.outputs});
}

std::vector<float> init_params(const ParamLayout& layout, uint64_t seed) {
  std::vector<float> p(static_cast<size_t>(layout.total()));
  const double bound = 1.0 / std::sqrt(static_cast<double>(layout.shape().hidden));
  Rng rng(seed, /*stream=*/0x1417);
  for (float& v : p) v = static_cast<float>(rng.uniform(-bound, bound));
  return p;
}

}  // namespace ragtrain
