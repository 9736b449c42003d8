// The model's shape and its flat parameter buffer in PyTorch's layout and gate order (i, f, g, o).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ragtrain {

enum class Task { Classification, Regression };
const char* task_name(Task t);

// LSTM(input_size -> hidden, num_layers) + Linear(hidden -> outputs) on the last timestep.
struct ModelShape {
  int64_t input_size = 0;   // F, from the data
  int64_t hidden = 50;      // H
  int64_t layers = 1;       // L
  int64_t outputs = 0;      // classes for classification, K targets for regression
  Task task = Task::Classification;

  bool operator==(const ModelShape& o) const {
    return input_size == o.input_size && hidden == o.hidden && layers == o.layers && outputs == o.outputs &&
           task == o.task;
  }
};

// One named tensor inside the flat buffer, as nn.LSTM / nn.Linear name it.
struct ParamTensor {
  std::string name;             // "lstm.weight_ih_l0", ..., "fc.weight", "fc.bias"
  std::vector<int64_t> shape;   // PyTorch shape, row-major
  int64_t offset = 0;           // first element in the flat buffer
  int64_t size = 0;             // element count
};

// The flat buffer layout: for each layer l, weight_ih_l (4H, in_l), weight_hh_l (4H, H), bias_ih_l (4H),
// bias_hh_l (4H); then fc.weight (outputs, H) and fc.bias (outputs). in_0 = F, in_l = H for l > 0.
class ParamLayout {
 public:
  explicit ParamLayout(const ModelShape& shape);

  const ModelShape& shape() const { return shape_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }

  // Offsets of the per-layer tensors and the head; layer in [0, layers).
  const ParamTensor& w_ih(int64_t layer) const { return tensors_[static_cast<size_t>(4 * layer)]; }
  const ParamTensor& w_hh(int64_t layer) const { return tensors_[static_cast<size_t>(4 * layer + 1)]; }
  const ParamTensor& b_ih(int64_t layer) const { return tensors_[static_cast<size_t>(4 * layer + 2)]; }
  const ParamTensor& b_hh(int64_t layer) const { return tensors_[static_cast<size_t>(4 * layer + 3)]; }
  const ParamTensor& fc_weight() const { return tensors_[static_cast<size_t>(4 * shape_.layers)]; }
  const ParamTensor& fc_bias() const { return tensors_[static_cast<size_t>(4 * shape_.layers + 1)]; }

 private:
  ModelShape shape_;
  std::vector<ParamTensor> tensors_;
  int64_t total_ = 0;
};

// PyTorch's default initialisation: every LSTM tensor U(-1/sqrt(H), 1/sqrt(H)); fc.weight and fc.bias
// U(-1/sqrt(H), 1/sqrt(H)) (kaiming_uniform(a=sqrt(5)) reduces to this bound for fan_in = H).
// Deterministic for a seed, independent of the rank count.
std::vector<float> init_params(const ParamLayout& layout, uint64_t seed);

}  // namespace ragtrain
