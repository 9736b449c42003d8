// A cuDNN v9 LSTM of (F -> H, L layers), batch one: the RNN descriptor, per-length data descriptors, the buffers
// one sequence needs (reused across steps), forward in training mode and the two backward passes, the map from
// PyTorch's parameter layout to cuDNN's weight space, and the start-up measurement of the algorithms.
#pragma once

#include <cudnn.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_raii.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

const char* rnn_algo_name(cudnnRNNAlgo_t algo);                  // "standard", "persist_static", ...
std::optional<cudnnRNNAlgo_t> parse_rnn_algo(const std::string& name);

class CudnnLstm {
 public:
  // Sets the descriptor (FP32 data and math, CUDNN_FMA_MATH: no TF32, double bias like PyTorch, no dropout).
  // Throws InternalError carrying cuDNN's status when the algorithm is not supported for this shape.
  CudnnLstm(cudnnHandle_t handle, cudaStream_t stream, int64_t input_size, int64_t hidden, int64_t layers,
            cudnnRNNAlgo_t algo);

  cudnnRNNAlgo_t algo() const { return algo_; }
  int64_t input_size() const { return F_; }
  int64_t hidden() const { return H_; }
  int64_t layers() const { return L_; }

  // Weight space size in floats (may exceed the PyTorch LSTM parameter count if cuDNN pads).
  int64_t weight_floats() const { return static_cast<int64_t>(weight_bytes_ / sizeof(float)); }

  // For each element of the LSTM tensors of `layout` (weight_ih_l0 ... bias_hh_l{L-1}, in PyTorch's flat order),
  // its index in the weight space, from cudnnGetRNNWeightParams on a weight space starting at `weights`.
  std::vector<int64_t> pytorch_to_weight_space(const ParamLayout& layout, const float* weights) const;

  // Makes sequences of length T runnable: data descriptors and buffers big enough. Buffers only grow; when one
  // moves, generation() changes (CUDA graphs that captured the old addresses must be dropped). Waits for the
  // stream before freeing a buffer. Never call it while the stream is being captured.
  void prepare(int64_t T);
  uint64_t generation() const { return generation_; }
  int64_t max_length() const { return max_T_; }

  // Forward in training mode over x (T, F); y (T, H) and the final states stay in the object's buffers.
  void forward(int64_t T, const float* x, const float* weights);
  // Backward data from dhy (set through d_hy_last(); dy is zero) then backward weights, ADDED into d_weights.
  void backward(int64_t T, const float* x, const float* weights, float* d_weights);

  float* x_staging() const { return x_stage_.get(); }          // (max_length, F) fixed-address input
  const float* h_last() const { return hy_.get() + (L_ - 1) * H_; }   // (H) last layer, last timestep
  float* d_h_last() const { return dhy_.get() + (L_ - 1) * H_; }      // (H) seed of the backward pass

 private:
  struct LengthDescs {
    RnnDataDesc x, y;
    size_t work = 0, reserve = 0;   // bytes cuDNN needs at this length (training mode)
  };
  const LengthDescs& descs(int64_t T);

  cudnnHandle_t handle_;
  cudaStream_t stream_;
  int64_t F_, H_, L_;
  cudnnRNNAlgo_t algo_;
  DropoutDesc dropout_;
  RnnDesc rnn_;
  TensorDesc h_desc_;            // (L, 1, H) for hx/hy/dhy (and c)
  size_t weight_bytes_ = 0;
  std::unordered_map<int64_t, LengthDescs> by_length_;
  int64_t max_T_ = 0;
  uint64_t generation_ = 0;
  DeviceBuffer<int32_t> seq_lengths_;   // (max_T + 1) seq_lengths_[T] == T: cuDNN's device copy of the lengths
  DeviceBuffer<float> x_stage_;         // (max_T, F)
  DeviceBuffer<float> y_;               // (max_T, H) last layer's outputs
  DeviceBuffer<float> dy_;              // (max_T, H) zeros: the loss reaches the LSTM only through dhy
  DeviceBuffer<float> dx_;              // (max_T, F) d loss / d x, unused but cuDNN writes it
  DeviceBuffer<float> hy_;              // (L, H) final hidden states
  DeviceBuffer<float> dhy_;             // (L, H) zeros except the last layer's row
  DeviceBuffer<unsigned char> work_;    // cuDNN workspace
  DeviceBuffer<unsigned char> reserve_; // cuDNN reserve space (forward -> backward)
};

// One algorithm's result of the start-up measurement.
struct AlgoTiming {
  cudnnRNNAlgo_t algo = CUDNN_RNN_ALGO_STANDARD;
  bool usable = false;
  double us = 0;            // median forward + backward data + backward weights, one sequence of the probe length
  std::string why;          // why not usable
};

// Runs forward + both backward passes for each candidate on random weights and input of length T and returns
// the timings; algorithms cuDNN rejects are marked unusable with its message.
std::vector<AlgoTiming> measure_algorithms(cudnnHandle_t handle, cudaStream_t stream, int64_t input_size,
                                           int64_t hidden, int64_t layers, int64_t T,
                                           const std::vector<cudnnRNNAlgo_t>& candidates);

}  // namespace ragtrain
