// A cuDNN v9 LSTM of (F -> H, L layers, one or two directions) over a batch of B sequences: the RNN descriptors,
// per-shape data descriptors, the buffers a batch needs (reused across steps), forward in training mode and the two
// backward passes, the map from PyTorch's parameter layout to cuDNN's weight space, and the algorithm measurement.
// With dropout between layers the layers run as separate cuDNN calls ("segments") with ragtrain's own mask between
// them (model/dropout_mask.hpp), so the GPU drops exactly the units the CPU reference drops.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "cuda_raii.hpp"
#include "dropout.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

const char* rnn_algo_name(cudnnRNNAlgo_t algo);                  // "standard", "persist_static", ...
std::optional<cudnnRNNAlgo_t> parse_rnn_algo(const std::string& name);

// How a batch of sequences of different lengths is handed to cuDNN. Both use the time-major padded buffers
// x (T, B, F), y and dy (T, B, H), T = the batch's longest length; sequence b's step t lives at row t * B + b.
//  padded: every sequence is zero-padded AT THE END to T and cuDNN sees B equal lengths (SEQ_MAJOR_PACKED with
//          all lengths T, padded I/O off). Exact for our loss: the LSTM is causal and the head reads h at each
//          sequence's own last step t = len - 1, where its gradient enters as dy; dy is zero everywhere else, so
//          the states after len get zero gradient and add exact zeros to dW. Every algorithm accepts it, and one
//          captured CUDA graph serves every batch of the same (B, T).
//  ragged: per-sequence lengths in the descriptor (SEQ_MAJOR_UNPACKED, padded I/O on): no work on padding, but
//          the lengths are baked into the launches, so no graph can be reused across batches. The only exact layout
//          for a reverse direction, which must start at each sequence's own last step.
enum class BatchLayout { Padded, Ragged };
const char* batch_layout_name(BatchLayout layout);               // "padded" | "ragged"
std::optional<BatchLayout> parse_batch_layout(const std::string& name);

class CudnnLstm {
 public:
  // Descriptors of one batch shape; obtained from prepare() / prepare_ragged(), passed to forward()/backward().
  struct Batch {
    int64_t B = 0, T = 0;      // sequences, longest length (the padded time extent of x, y, dy)
    RnnDataDesc x, y;          // x (T, B, F) of the first segment, y (T, B, D*H) of every segment
    RnnDataDesc xi;            // (T, B, D*H): the input of the segments after the first
    TensorDesc h;              // (layers per segment * D, B, H) for the (absent) initial and final states
    size_t work = 0;           // bytes of workspace cuDNN needs for this batch (training mode, largest segment)
    std::vector<size_t> reserve;   // per segment: bytes of reserve space
  };

  // Sets the descriptors (FP32 data and math, CUDNN_FMA_MATH: no TF32, double bias like PyTorch, no cuDNN dropout).
  // The LSTM of `shape` (input_size, hidden, layers, bidirectional; the head's fields are not read here).
  // split_layers: one cuDNN call per layer (needed for ragtrain's dropout between layers), else one for all layers.
  // Throws InternalError carrying cuDNN's status when the algorithm is not supported for this shape.
  CudnnLstm(cudnnHandle_t handle, cudaStream_t stream, const ModelShape& shape, cudnnRNNAlgo_t algo,
            BatchLayout layout = BatchLayout::Padded, bool split_layers = false);

  cudnnRNNAlgo_t algo() const { return algo_; }
  BatchLayout layout() const { return layout_; }
  int64_t input_size() const { return F_; }
  int64_t hidden() const { return H_; }
  int64_t layers() const { return L_; }
  int64_t directions() const { return D_; }
  bool split_layers() const { return segments_.size() > 1; }

  // Weight space size in floats: the segments' weight spaces one after the other (each may exceed its PyTorch
  // parameter count if cuDNN pads; the gaps between segments keep each one 256-byte aligned).
  int64_t weight_floats() const { return weight_floats_; }

  // For each element of the LSTM tensors of `layout` (weight_ih_l0 ... bias_hh_l{L-1}[_reverse], in PyTorch's flat
  // order), its index in the weight space, from cudnnGetRNNWeightParams on a weight space starting at `weights`.
  std::vector<int64_t> pytorch_to_weight_space(const ParamLayout& layout, const float* weights) const;

  // The dropout between layers applied by forward(train = true) (split_layers only): the rate's threshold and
  // scale, and where the step and the batch's global sequence indices live on the device (written by the gather).
  void set_dropout(const DropoutArgs& d) { dropout_ = d; }

  // Padded layout: B sequences of (padded) length T. Ragged layout: B sequences of length T, all equal (the
  // caller fills device_lengths() with T). Buffers only grow; when one moves, generation() changes (CUDA graphs
  // that captured the old addresses must be dropped). Waits for the stream before freeing a buffer. Never call it
  // while the stream is being captured. The reference stays valid for the object's lifetime.
  const Batch& prepare(int64_t B, int64_t T);
  // Ragged layout only: one sequence per entry of `lengths` (each >= 1), T = the longest. The returned descriptors
  // are rebuilt by the next prepare_ragged call.
  const Batch& prepare_ragged(const std::vector<int32_t>& lengths);
  uint64_t generation() const { return generation_; }

  // Forward in training mode over x (T, B, F); y (T, B, D*H) stays in the object's buffer. cuDNN reads the B
  // lengths (all T for the padded layout, the true lengths for the ragged one) from `lengths`, by default
  // device_lengths(). train: apply the dropout between layers (set_dropout); false for inference.
  void forward(const Batch& b, const float* x, const float* weights, const int32_t* lengths = nullptr,
               bool train = true);
  // Backward data from dy (the loss enters only there: dhy = dcy = 0), then backward weights ADDED into d_weights.
  void backward(const Batch& b, const float* x, const float* weights, float* d_weights,
                const int32_t* lengths = nullptr);

  // Fills device_lengths()[0..B) with T on the stream (callers that do not gather, e.g. measurements).
  void set_equal_lengths(int64_t B, int64_t T);

  float* x_staging() const { return x_stage_.get(); }          // (T, B, F) fixed-address input
  float* y() const { return segments_.back().y.get(); }         // (T, B, D*H) last layer's outputs
  float* dy() const { return segments_.back().dy.get(); }       // (T, B, D*H) d loss / d y, zero but for the heads
  int32_t* device_lengths() const { return lengths_.get(); }    // (B) what cuDNN reads as devSeqLengths
  int64_t capacity() const { return cap_rows_; }                // rows (T * B) the buffers hold

 private:
  // One cuDNN call's worth of layers: all L, or (split) one layer each.
  struct Segment {
    int64_t first_layer = 0, layers = 0, in = 0;   // PyTorch layers [first, first + layers), input width
    RnnDesc rnn;
    size_t weight_bytes = 0;
    int64_t weight_offset = 0;          // floats into the weight space
    DeviceBuffer<float> xi;             // (cap_rows, D*H) input after dropout (segments after the first)
    DeviceBuffer<float> y, dy;          // (cap_rows, D*H) outputs and d loss / d outputs
    DeviceBuffer<float> dx;             // (cap_rows, in) d loss / d input (unused for the first segment)
    DeviceBuffer<unsigned char> reserve;   // cuDNN reserve space (forward -> backward)
  };

  void make_batch(Batch& d, const std::vector<int32_t>& lengths, int64_t T) const;
  void grow(int64_t B, int64_t T, size_t work, const std::vector<size_t>& reserve);
  const float* segment_input(size_t k, const float* x, bool masked) const;

  cudnnHandle_t handle_;
  cudaStream_t stream_;
  int64_t F_, H_, L_, D_;
  cudnnRNNAlgo_t algo_;
  BatchLayout layout_;
  DropoutDesc no_dropout_;   // cuDNN's own dropout, off
  std::vector<Segment> segments_;
  int64_t weight_floats_ = 0;
  DropoutArgs dropout_;
  bool masked_ = false;      // the last forward applied the dropout masks (its backward must too)
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Batch>> by_shape_;   // padded: (B, T) -> descriptors
  std::unique_ptr<Batch> ragged_;                                             // ragged: the last batch's
  int64_t cap_rows_ = 0, cap_B_ = 0;
  uint64_t generation_ = 0;
  DeviceBuffer<int32_t> lengths_;       // (cap_B) devSeqLengths
  DeviceBuffer<float> x_stage_;         // (cap_rows, F)
  DeviceBuffer<float> dx_;              // (cap_rows, F) d loss / d x, unused but cuDNN writes it
  DeviceBuffer<unsigned char> work_;    // cuDNN workspace
};

// One algorithm's result of the start-up measurement.
struct AlgoTiming {
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  bool usable = false;
  double us = 0;            // median forward + backward data + backward weights of one batch of the probe shape
  std::string why;          // why not usable
};

// Runs forward + both backward passes of the LSTM of `shape` for each candidate on random weights and input, B
// sequences of length T (padded layout), and returns the timings; algorithms cuDNN rejects are marked unusable
// with its message. Never throws.
std::vector<AlgoTiming> measure_algorithms(cudnnHandle_t handle, cudaStream_t stream, const ModelShape& shape,
                                           int64_t T, int64_t B, const std::vector<cudnnRNNAlgo_t>& candidates,
                                           bool split_layers = false);

}  // namespace ragtrain
