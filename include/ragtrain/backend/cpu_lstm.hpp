// Reference LSTM + Linear head + loss on one sequence, forward and backward, in float or double.
// This is the math every backend is checked against; it follows PyTorch's nn.LSTM (gate order i, f, g, o;
// c_t = f*c_{t-1} + i*g; h_t = o*tanh(c_t); zero initial state; the reverse direction reads the sequence from its
// own last step back; dropout on every layer's outputs but the last), pooling over the valid steps (model.hpp's
// Pool), nn.Dropout and nn.Linear.
#pragma once

#include <cstdint>
#include <vector>

#include "ragtrain/model/dropout_mask.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {

// Activations of one forward pass, kept for the backward pass. Reused across calls to avoid allocation.
// Arrays are indexed by time t (not by processing order), D = directions, "(l, d)" = one per layer and direction.
template <class T>
struct LstmCache {
  int64_t length = 0;
  std::vector<std::vector<T>> gates;   // per (l, d): (T, 4H) post-activation i, f, g, o
  std::vector<std::vector<T>> c;       // per (l, d): (T, H) cell state
  std::vector<std::vector<T>> tanh_c;  // per (l, d): (T, H) tanh(c), so the backward pass need not recompute it
  std::vector<std::vector<T>> h;       // per layer: (T, D*H) outputs, forward h then reverse h at each t
  std::vector<std::vector<T>> keep;    // per layer < L-1, with dropout: (T, D*H) 0 or 1/(1-p)
  std::vector<std::vector<T>> dropped; // per layer < L-1, with dropout: (T, D*H) h * keep, the next layer's input
  bool between_dropout = false;        // keep/dropped are in use
  std::vector<T> pooled;               // (D*H) the pooled top-layer outputs
  std::vector<int64_t> argmax;         // (D*H) max pool: the first step holding each unit's max
  std::vector<T> head_keep;            // (D*H) 0 or 1/(1-p), with head dropout
  std::vector<T> head_in;              // (D*H) pooled * head_keep: what the Linear head reads
  bool head_dropout = false;
  std::vector<T> out;                  // (outputs) head output (logits or regression values)
  std::vector<T> scratch;              // backend-private temporaries
  mutable std::vector<T> work;         // backward temporaries: lstm_backward takes the cache as const
};

// The dropout of one training sequence: its rates and the key of its mask (dropout_mask.hpp). The default, rates
// zero, is no dropout: evaluation and inference.
struct DropoutDraw {
  DropoutRates rates;
  DropoutKey key;
};

// Forward over x (length, F) float32 rows; fills cache and returns a pointer to cache.out.
template <class T>
const T* lstm_forward(const ParamLayout& layout, const T* params, const float* x, int64_t length,
                      LstmCache<T>& cache, const DropoutDraw& dropout = {});

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
