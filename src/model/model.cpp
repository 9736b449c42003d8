// Parameter layout and initialisation.
#include "ragtrain/model/model.hpp"

#include <algorithm>
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

double parameter_count(const ModelShape& s) {
  const double f = static_cast<double>(s.input_size), h = static_cast<double>(s.hidden),
               d = static_cast<double>(s.directions()), c = static_cast<double>(s.outputs);
  // Per layer and direction 4H x (input + H) weights and two 4H biases (an upper bound for the layers past the
  // first, whose input is D*H); then the head.
  return static_cast<double>(s.layers) * d * 4 * h * (std::max(f, d * h) + h + 2) + d * h * c + c;
}

double training_bytes(const ModelShape& s, int64_t batch, int64_t max_length) {
  // A timestep's activations: the input, and the gates (4H), cell and hidden state of each layer and direction.
  const double per_step = static_cast<double>(s.input_size) + static_cast<double>(s.layers) *
                                                                   static_cast<double>(s.directions()) * 6 *
                                                                   static_cast<double>(s.hidden);
  // Parameters, gradient and two optimizer moments, float32; a step's activations.
  return 4.0 * (4 * parameter_count(s) + static_cast<double>(batch) * static_cast<double>(max_length) * per_step);
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
