// The model's shape and its flat parameter buffer in PyTorch's layout and gate order (i, f, g, o).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ragtrain {

enum class Task { Classification, Regression };
const char* task_name(Task t);

// What the head reads of the top layer's outputs (T, D*H), over each sequence's own valid steps only.
//  last: the final states, as PyTorch's h_n: the forward direction's h at the last step and (bidirectional) the
//        reverse direction's h after reading the first step, concatenated (h_n[-2], h_n[-1]).
//  mean: the mean over the steps.   max: the elementwise max over the steps (gradient to the first argmax).
enum class Pool { Last, Mean, Max };
const char* pool_name(Pool p);                          // "last" | "mean" | "max"
std::optional<Pool> parse_pool(const std::string& name);

// LSTM(input_size -> hidden, num_layers, bidirectional) + pooling over time + Linear(D*hidden -> outputs),
// D = 2 when bidirectional. Everything that changes the parameter layout or what the head computes.
struct ModelShape {
  int64_t input_size = 0;   // F, from the data
  int64_t hidden = 50;      // H
  int64_t layers = 1;       // L
  int64_t outputs = 0;      // classes for classification, K targets for regression
  Task task = Task::Classification;
  bool bidirectional = false;
  Pool pool = Pool::Last;

  int64_t directions() const { return bidirectional ? 2 : 1; }   // D
  int64_t head_input() const { return directions() * hidden; }   // D*H: a layer's output width, the head's input

  bool operator==(const ModelShape& o) const {
    return input_size == o.input_size && hidden == o.hidden && layers == o.layers && outputs == o.outputs &&
           task == o.task && bidirectional == o.bidirectional && pool == o.pool;
  }
  bool operator!=(const ModelShape& o) const { return !(*this == o); }
};

// The parameter count of the model, in double: shapes from a file or the options are checked with it before
// ParamLayout's int64 sizes or any allocation use them (no overflow for a damaged header or a typo).
double parameter_count(const ModelShape& s);

// Bytes one rank allocates to train this model on `batch` sequences of up to `max_length` steps: the parameters,
// their gradient and two optimizer moments, and a step's activations (every layer's and direction's gates, cell
// and hidden states, and the input). An estimate within a small factor, in double (no overflow): for refusing
// sizes that cannot fit before anything is allocated (a --hidden typo, a file declaring 2^31 classes).
double training_bytes(const ModelShape& s, int64_t batch, int64_t max_length);

// One line naming the model, e.g. "LSTM(input 12, hidden 50, layers 2, bidirectional) + mean pool + Linear(100 -> 9)".
std::string describe(const ModelShape& s);

// Training-time dropout rates, as nn.LSTM(dropout=between) and nn.Dropout(head) before the Linear head. Training
// options (they do not change the parameters), stored in checkpoints for the record and for --resume; never applied
// in eval, predict or inference.
struct DropoutRates {
  double between = 0;   // on the outputs of every LSTM layer but the last
  double head = 0;      // on the head's input (the pooled vector)
  bool any() const { return between > 0 || head > 0; }
};

// One named tensor inside the flat buffer, as nn.LSTM / nn.Linear name it.
struct ParamTensor {
  std::string name;             // "lstm.weight_ih_l0", ..., "fc.weight", "fc.bias"
  std::vector<int64_t> shape;   // PyTorch shape, row-major
  int64_t offset = 0;           // first element in the flat buffer
  int64_t size = 0;             // element count
};

// The flat buffer layout, nn.LSTM's parameter order: for each layer l and direction d (forward, then "_reverse" when
// bidirectional), weight_ih_l{l}[_reverse] (4H, in_l), weight_hh_l{l}[_reverse] (4H, H), bias_ih_l{l}[_reverse] (4H),
// bias_hh_l{l}[_reverse] (4H); then fc.weight (outputs, D*H) and fc.bias (outputs). in_0 = F, in_l = D*H for l > 0.
class ParamLayout {
 public:
  explicit ParamLayout(const ModelShape& shape);

  const ModelShape& shape() const { return shape_; }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  int64_t total() const { return total_; }

  // The per-layer tensors and the head; layer in [0, layers), dir 0 (forward) or 1 (reverse, when bidirectional).
  const ParamTensor& w_ih(int64_t layer, int64_t dir = 0) const { return tensors_[lstm_index(layer, dir)]; }
  const ParamTensor& w_hh(int64_t layer, int64_t dir = 0) const { return tensors_[lstm_index(layer, dir) + 1]; }
  const ParamTensor& b_ih(int64_t layer, int64_t dir = 0) const { return tensors_[lstm_index(layer, dir) + 2]; }
  const ParamTensor& b_hh(int64_t layer, int64_t dir = 0) const { return tensors_[lstm_index(layer, dir) + 3]; }
  const ParamTensor& fc_weight() const { return tensors_[lstm_index(shape_.layers, 0)]; }
  const ParamTensor& fc_bias() const { return tensors_[lstm_index(shape_.layers, 0) + 1]; }

 private:
  size_t lstm_index(int64_t layer, int64_t dir) const {
    return static_cast<size_t>(4 * (layer * shape_.directions() + dir));
  }

  ModelShape shape_;
  std::vector<ParamTensor> tensors_;
  int64_t total_ = 0;
};

// PyTorch's default initialisation: every LSTM tensor U(-1/sqrt(H), 1/sqrt(H)); fc.weight and fc.bias
// U(-1/sqrt(D*H), 1/sqrt(D*H)) (kaiming_uniform(a=sqrt(5)) reduces to this bound for fan_in = D*H).
// Deterministic for a seed, independent of the rank count.
std::vector<float> init_params(const ParamLayout& layout, uint64_t seed);

}  // namespace ragtrain
