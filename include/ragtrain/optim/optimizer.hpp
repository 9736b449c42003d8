// SGD with momentum, Adam and AdamW over the flat parameter buffer (PyTorch semantics), and global-norm clipping.
// This is the reference the GPU's fused optimizer kernel reproduces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ragtrain {

// Parsed once from --optimizer (cli/options.cpp); the update code switches on it, never on a string.
enum class OptimizerKind { Sgd, Adam, AdamW };
const char* optimizer_name(OptimizerKind k);                          // "sgd" | "adam" | "adamw"
std::optional<OptimizerKind> parse_optimizer_kind(const std::string& name);

// --lr-decay after the warm-up.
enum class LrDecay { None, Linear, Cosine };
const char* lr_decay_name(LrDecay d);                                  // "none" | "linear" | "cosine"
std::optional<LrDecay> parse_lr_decay(const std::string& name);

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::Adam;
  double momentum = 0.9;       // sgd
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weight_decay = 0.0;   // L2 added to the gradient (sgd, adam); decoupled (adamw)
  double clip = 0.0;           // max global gradient norm; 0 = off
};

// What a checkpoint keeps of an optimizer: SGD's momentum buffer or Adam's moments, flat in PyTorch layout like
// the parameters (v empty for SGD), and the step count that drives Adam's bias correction.
struct OptimizerState {
  std::vector<float> m, v;
  int64_t steps_taken = 0;
};

class Optimizer {
 public:
  Optimizer(const OptimizerConfig& cfg, int64_t num_params);

  // One update with the averaged gradient `grad` (modified: clipping scales it). Returns the gradient's global
  // norm before clipping. Every rank calls it with identical inputs, so every rank stays identical.
  double step(float* params, float* grad, float lr);
  // The same with the norm global_norm(grad) already computed (the caller checked it for NaN/Inf first).
  double step(float* params, float* grad, float lr, double norm);

  int64_t steps_taken() const { return t_; }
  const OptimizerConfig& config() const { return cfg_; }
  // State for checkpoints: SGD momentum buffer or Adam's first/second moments, each (num_params).
  std::vector<float>& m() { return m_; }
  std::vector<float>& v() { return v_; }
  void set_steps_taken(int64_t t) { t_ = t; }
  OptimizerState state() const { return OptimizerState{m_, v_, t_}; }
  // Restores a checkpoint's state; UserError when its sizes do not fit this optimizer (another model or kind).
  void set_state(const OptimizerState& s);

 private:
  OptimizerConfig cfg_;
  int64_t n_;
  int64_t t_ = 0;
  std::vector<float> m_, v_;
};

// Global L2 norm in double (order fixed, so bitwise reproducible).
double global_norm(const float* g, int64_t n);

// Learning rate at `step` (0-based) of `total_steps`: linear warm-up to `lr` over `warmup` steps, then
// none | linear | cosine decay to lr * final_fraction at the last step.
struct LrSchedule {
  double lr = 1e-3;
  int64_t warmup = 0;
  LrDecay decay = LrDecay::None;
  double final_fraction = 0.0;
  int64_t total_steps = 1;

  double at(int64_t step) const;
};

}  // namespace ragtrain
