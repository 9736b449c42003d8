// Reference LSTM + Linear head + loss on one sequence, forward and backward, in float or double.
// This is the math every backend is checked against; it follows PyTorch's nn.LSTM (gate order i, f, g, o;
// c_t = f*c_{t-1} + i*g; h_t = o*tanh(c_t); zero initial state) and nn.Linear on the last timestep's h.
#pragma once

#include <cstdint>
#include <vector>

#include "ragtrain/model/model.hpp"

namespace ragtrain {

// Activations of one forward pass, kept for the backward pass. Reused across calls to avoid allocation.
template <class T>
struct LstmCache {
  int64_t length = 0;
  std::vector<std::vector<T>> gates;   // per layer: (T, 4H) post-activation i, f, g, o
  std::vector<std::vector<T>> c;       // per layer: (T, H) cell state
  std::vector<std::vector<T>> h;       // per layer: (T, H) hidden state (the next layer's input)
  std::vector<T> out;                  // (outputs) head output (logits or regression values)
  std::vector<T> scratch;              // backend-private temporaries
  std::vector<std::vector<T>> tanh_c;  // per layer: (T, H) tanh(c), so the backward pass need not recompute it
  mutable std::vector<T> work;         // backward temporaries: lstm_backward takes the cache as const
};

// Forward over x (length, F) float32 rows; fills cache and returns a pointer to cache.out.
template <class T>
const T* lstm_forward(const ParamLayout& layout, const T* params, const float* x, int64_t length,
                      LstmCache<T>& cache);

// Backward from d_out (outputs) through the head and every layer; ADDS d(loss)/d(params) into grad (flat,
// same layout as params). Requires the cache of the matching lstm_forward.
template <class T>
void lstm_backward(const ParamLayout& layout, const T* params, const float* x, const LstmCache<T>& cache,
                   const T* d_out, T* grad);

// Per-sequence loss and its gradient w.r.t. the head output.
// Classification: cross-entropy of softmax(out) against `label`. Regression: mean over K of (out - target)^2,
// so that the mean over a batch equals PyTorch's MSELoss(reduction='mean') over (batch, K).
template <class T>
T loss_and_grad(Task task, const T* out, int64_t outputs, int32_t label, const float* target, T* d_out);

// Index of the largest output (ties: the first); the predicted class.
template <class T>
int32_t argmax(const T* out, int64_t outputs);

}  // namespace ragtrain
