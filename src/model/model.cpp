// Parameter layout and initialisation.
#include "ragtrain/model/model.hpp"

#include <cmath>

#include "ragtrain/core/error.hpp"
#include "ragtrain/core/rng.hpp"

namespace ragtrain {

const char* task_name(Task t) { return t == Task::Classification ? "classification" : "regression"; }

const char* pool_name(Pool p) {
  switch (p) {
    case Pool::Last: return "last";
    case Pool::Mean: return "mean";
    case Pool::Max: return "max";
  }
  return "last";
}

std::optional<Pool> parse_pool(const std::string& name) {
  for (Pool p : {Pool::Last, Pool::Mean, Pool::Max})
    if (name == pool_name(p)) return p;
  return std::nullopt;
}

std::string describe(const ModelShape& s) {
  return RT_MSG("LSTM(input " << s.input_size << ", hidden " << s.hidden << ", layers " << s.layers
                              << (s.bidirectional ? ", bidirectional" : "") << ") + " << pool_name(s.pool)
                              << " pool + Linear(" << s.head_input() << " -> " << s.outputs << ")");
}

ParamLayout::ParamLayout(const ModelShape& shape) : shape_(shape) {
  RT_CHECK(shape.input_size > 0 && shape.hidden > 0 && shape.layers > 0 && shape.outputs > 0,
           "model shape must be positive");
  const int64_t H = shape.hidden, D = shape.directions();
  auto add = [&](std::string name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    tensors_.push_back(ParamTensor{std::move(name), std::move(dims), total_, n});
    total_ += n;
  };
  for (int64_t l = 0; l < shape.layers; ++l) {
    const int64_t in = l == 0 ? shape.input_size : D * H;
    for (int64_t d = 0; d < D; ++d) {
      const std::string s = std::to_string(l) + (d == 1 ? "_reverse" : "");
      add("lstm.weight_ih_l" + s, {4 * H, in});
      add("lstm.weight_hh_l" + s, {4 * H, H});
      add("lstm.bias_ih_l" + s, {4 * H});
      add("lstm.bias_hh_l" + s, {4 * H});
    }
  }
  add("fc.weight", {shape.outputs, D * H});
  add("fc.bias", {shape.outputs});
}

std::vector<float> init_params(const ParamLayout& layout, uint64_t seed) {
  std::vector<float> p(static_cast<size_t>(layout.total()));
  const double bound = 1.0 / std::sqrt(static_cast<double>(layout.shape().hidden));
  const double head_bound = 1.0 / std::sqrt(static_cast<double>(layout.shape().head_input()));
  const int64_t head0 = layout.fc_weight().offset;   // the head's tensors come last
  Rng rng(seed, /*stream=*/0x1417);
  for (int64_t i = 0; i < layout.total(); ++i) {
    const double b = i < head0 ? bound : head_bound;
    p[static_cast<size_t>(i)] = static_cast<float>(rng.uniform(-b, b));
  }
  return p;
}

}  // namespace ragtrain
