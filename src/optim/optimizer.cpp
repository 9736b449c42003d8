// Optimizer updates, clipping and the learning-rate schedule.
#include "ragtrain/optim/optimizer.hpp"

#include <cmath>

#include "ragtrain/core/error.hpp"

namespace ragtrain {

const char* optimizer_name(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::Sgd: return "sgd";
    case OptimizerKind::Adam: return "adam";
    case OptimizerKind::AdamW: return "adamw";
  }
  return "?";
}

std::optional<OptimizerKind> parse_optimizer_kind(const std::string& name) {
  for (OptimizerKind k : {OptimizerKind::Sgd, OptimizerKind::Adam, OptimizerKind::AdamW})
    if (name == optimizer_name(k)) return k;
  return std::nullopt;
}

const char* lr_decay_name(LrDecay d) {
  switch (d) {
    case LrDecay::None: return "none";
    case LrDecay::Linear: return "linear";
    case LrDecay::Cosine: return "cosine";
  }
  return "?";
}

std::optional<LrDecay> parse_lr_decay(const std::string& name) {
  for (LrDecay d : {LrDecay::None, LrDecay::Linear, LrDecay::Cosine})
    if (name == lr_decay_name(d)) return d;
  return std::nullopt;
}

Optimizer::Optimizer(const OptimizerConfig& cfg, int64_t num_params) : cfg_(cfg), n_(num_params) {
  m_.assign(static_cast<size_t>(n_), 0.0f);
  if (cfg.kind != OptimizerKind::Sgd) v_.assign(static_cast<size_t>(n_), 0.0f);
}

void Optimizer::set_state(const OptimizerState& s) {
  USER_CHECK(s.m.size() == m_.size() && s.v.size() == v_.size(),
             "optimizer state of " << s.m.size() << "+" << s.v.size() << " values for " << m_.size() << "+"
                                   << v_.size() << " expected (" << optimizer_name(cfg_.kind) << ")",
             "resume with the --optimizer of the run that wrote the checkpoint");
  m_ = s.m;
  v_ = s.v;
  t_ = s.steps_taken;
}

double global_norm(const float* g, int64_t n) {
  double s = 0.0;
  for (int64_t i = 0; i < n; ++i) s += static_cast<double>(g[i]) * g[i];
  return std::sqrt(s);
}

double Optimizer::step(float* p, float* g, float lr) { return step(p, g, lr, global_norm(g, n_)); }

double Optimizer::step(float* p, float* g, float lr, double norm) {
  if (cfg_.clip > 0 && norm > cfg_.clip) {
    // Same rule as torch.nn.utils.clip_grad_norm_: scale by clip / (norm + 1e-6).
    const float scale = static_cast<float>(cfg_.clip / (norm + 1e-6));
    for (int64_t i = 0; i < n_; ++i) g[i] *= scale;
  }
  ++t_;
  const float wd = static_cast<float>(cfg_.weight_decay);
  if (cfg_.kind == OptimizerKind::Sgd) {
    const float mu = static_cast<float>(cfg_.momentum);
    for (int64_t i = 0; i < n_; ++i) {
      const float gi = g[i] + wd * p[i];
      // torch.optim.SGD: the first step initialises the buffer with the gradient itself.
      m_[static_cast<size_t>(i)] = t_ == 1 ? gi : mu * m_[static_cast<size_t>(i)] + gi;
      p[i] -= lr * (mu > 0 ? m_[static_cast<size_t>(i)] : gi);
    }
    return norm;
  }
  const bool decoupled = cfg_.kind == OptimizerKind::AdamW;
  const float b1 = static_cast<float>(cfg_.beta1), b2 = static_cast<float>(cfg_.beta2);
  const float eps = static_cast<float>(cfg_.eps);
  const float bc1 = static_cast<float>(1.0 - std::pow(cfg_.beta1, static_cast<double>(t_)));
  const float bc2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(cfg_.beta2, static_cast<double>(t_))));
  const float step_size = lr / bc1;
  for (int64_t i = 0; i < n_; ++i) {
    const size_t k = static_cast<size_t>(i);
    float gi = g[i];
    if (decoupled)
      p[i] *= 1.0f - lr * wd;
    else
      gi += wd * p[i];
    m_[k] = b1 * m_[k] + (1.0f - b1) * gi;
    v_[k] = b2 * v_[k] + (1.0f - b2) * gi * gi;
    p[i] -= step_size * m_[k] / (std::sqrt(v_[k]) / bc2_sqrt + eps);
  }
  return norm;
}

double LrSchedule::at(int64_t step) const {
  if (warmup > 0 && step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const int64_t span = total_steps - warmup;
  if (decay == LrDecay::None || span <= 1) return lr;
  const double progress = std::min(1.0, static_cast<double>(step - warmup) / static_cast<double>(span - 1));
  const double lo = lr * final_fraction;
  if (decay == LrDecay::Linear) return lr - (lr - lo) * progress;
  return lo + 0.5 * (lr - lo) * (1.0 + std::cos(3.141592653589793 * progress));
}

}  // namespace ragtrain
