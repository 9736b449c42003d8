// Tests of the reference CPU LSTM: hand-computed forward values, finite-difference gradients, float vs double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ragtrain/backend/cpu_lstm.hpp"
#include "ragtrain/core/rng.hpp"
#include "ragtrain/model/model.hpp"

namespace ragtrain {
namespace {

ModelShape make_shape(int64_t F, int64_t H, int64_t L, Task task) {
  ModelShape s;
  s.input_size = F;
  s.hidden = H;
  s.layers = L;
  s.task = task;
  s.outputs = task == Task::Classification ? 5 : 3;
  return s;
}

std::vector<float> uniform_floats(int64_t n, double lo, double hi, uint64_t seed) {
  Rng rng(seed, 7);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& e : v) e = static_cast<float>(rng.uniform(lo, hi));
  return v;
}

// A sequence with its label (classification) or target (regression), and parameters for a shape.
struct Problem {
  ParamLayout layout;
  std::vector<float> params;   // U(-0.5, 0.5), float so the double copy is exact
  std::vector<float> x;        // (length, F)
  int64_t length;
  int32_t label;
  std::vector<float> target;   // (K)
  DropoutDraw drop;            // none unless a test sets it: the mask is then fixed by its key

  Problem(const ModelShape& s, int64_t len, uint64_t seed)
      : layout(s),
        params(uniform_floats(layout.total(), -0.5, 0.5, seed)),
        x(uniform_floats(len * s.input_size, -1.0, 1.0, seed + 1)),
        length(len),
        label(static_cast<int32_t>(seed % static_cast<uint64_t>(s.outputs))),
        target(uniform_floats(s.outputs, -1.0, 1.0, seed + 2)) {}

  template <class T>
  std::vector<T> params_as() const {
    return std::vector<T>(params.begin(), params.end());
  }

  template <class T>
  T loss(const std::vector<T>& p, LstmCache<T>& cache, std::vector<T>& d_out) const {
    const T* out = lstm_forward(layout, p.data(), x.data(), length, cache, drop);
    d_out.resize(static_cast<size_t>(layout.shape().outputs));
    return loss_and_grad(layout.shape().task, out, layout.shape().outputs, label, target.data(), d_out.data());
  }

  // Loss and its gradient w.r.t. every parameter.
  template <class T>
  T loss_and_params_grad(const std::vector<T>& p, std::vector<T>& grad) const {
    LstmCache<T> cache;
    std::vector<T> d_out;
    const T l = loss(p, cache, d_out);
    grad.assign(p.size(), T(0));
    lstm_backward(layout, p.data(), x.data(), cache, d_out.data(), grad.data());
    return l;
  }
};

std::string describe(const ModelShape& s, int64_t len) {
  return std::string(task_name(s.task)) + " F=" + std::to_string(s.input_size) + " H=" +
         std::to_string(s.hidden) + " L=" + std::to_string(s.layers) + (s.bidirectional ? " bidirectional" : "") +
         " pool=" + pool_name(s.pool) + " length=" + std::to_string(len);
}

const ParamTensor& tensor_of(const ParamLayout& layout, int64_t i) {
  for (const ParamTensor& t : layout.tensors())
    if (i >= t.offset && i < t.offset + t.size) return t;
  return layout.tensors().back();
}

void expect_grad_matches_finite_differences(const ModelShape& s, int64_t len, uint64_t seed,
                                            const DropoutDraw& drop = {}) {
  const double step = 1e-6;
  Problem pr(s, len, seed);
  pr.drop = drop;
  std::vector<double> p = pr.params_as<double>();
  std::vector<double> grad;
  pr.loss_and_params_grad(p, grad);

  LstmCache<double> cache;
  std::vector<double> d_out;
  int failures = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    const double saved = p[i];
    p[i] = saved + step;
    const double up = pr.loss(p, cache, d_out);
    p[i] = saved - step;
    const double down = pr.loss(p, cache, d_out);
    p[i] = saved;
    const double fd = (up - down) / (2 * step);
    if (std::abs(grad[i] - fd) > 1e-6 + 1e-5 * std::abs(fd) && ++failures <= 5) {
      const ParamTensor& t = tensor_of(pr.layout, static_cast<int64_t>(i));
      ADD_FAILURE() << describe(s, len) << " dropout " << drop.rates.between << "/" << drop.rates.head << ": "
                    << t.name << "[" << static_cast<int64_t>(i) - t.offset
                    << "]: backward " << grad[i] << " vs finite difference " << fd;
    }
  }
  EXPECT_EQ(failures, 0) << describe(s, len);
}

TEST(CpuLstmGrad, MatchesCentralFiniteDifferences) {
  uint64_t seed = 100;
  for (Task task : {Task::Classification, Task::Regression})
    for (int64_t L : {1, 2, 3})
      for (int64_t len : {1, 2, 7, 30}) {
        const int64_t H = 4 + static_cast<int64_t>(seed % 5);
        expect_grad_matches_finite_differences(make_shape(3, H, L, task), len, seed++);
      }
}

// Every model option, alone and together: direction x depth x pooling x dropout (between layers and before the
// head, a fixed mask: the key does not change between the perturbed evaluations).
TEST(CpuLstmGrad, MatchesFiniteDifferencesForEveryOption) {
  uint64_t seed = 700;
  for (bool bidi : {false, true})
    for (int64_t L : {1, 2})
      for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max})
        for (double p : {0.0, 0.3}) {
          ModelShape s = make_shape(3, 5, L, seed % 2 ? Task::Regression : Task::Classification);
          s.bidirectional = bidi;
          s.pool = pool;
          DropoutDraw drop;
          drop.rates = DropoutRates{p, p};
          drop.key = DropoutKey{seed, 17, 4};
          for (int64_t len : {1, 6}) expect_grad_matches_finite_differences(s, len, seed++, drop);
        }
}

// The reverse direction of layer 0 is a forward LSTM over the sequence read backwards: a unidirectional model with
// the reverse weights, run on the reversed input, gives the same states in reverse order.
TEST(CpuLstmForward, ReverseDirectionReadsTheSequenceBackwards) {
  ModelShape bi = make_shape(3, 6, 1, Task::Classification);
  bi.bidirectional = true;
  const Problem pr(bi, 9, 31);
  const ParamLayout uni_layout(make_shape(3, 6, 1, Task::Classification));
  std::vector<double> p = pr.params_as<double>(), q(static_cast<size_t>(uni_layout.total()), 0.0);
  auto copy = [&](const ParamTensor& from, const ParamTensor& to) {
    std::copy(p.begin() + from.offset, p.begin() + from.offset + from.size, q.begin() + to.offset);
  };
  copy(pr.layout.w_ih(0, 1), uni_layout.w_ih(0));
  copy(pr.layout.w_hh(0, 1), uni_layout.w_hh(0));
  copy(pr.layout.b_ih(0, 1), uni_layout.b_ih(0));
  copy(pr.layout.b_hh(0, 1), uni_layout.b_hh(0));
  std::vector<float> reversed(pr.x.size());
  for (int64_t t = 0; t < pr.length; ++t)
    std::copy(pr.x.begin() + t * 3, pr.x.begin() + (t + 1) * 3, reversed.begin() + (pr.length - 1 - t) * 3);
  LstmCache<double> a, b;
  lstm_forward(pr.layout, p.data(), pr.x.data(), pr.length, a);
  lstm_forward(uni_layout, q.data(), reversed.data(), pr.length, b);
  for (int64_t t = 0; t < pr.length; ++t)
    for (int64_t k = 0; k < 6; ++k)
      EXPECT_EQ(a.h[0][static_cast<size_t>(t * 12 + 6 + k)], b.h[0][static_cast<size_t>((pr.length - 1 - t) * 6 + k)])
          << "t=" << t << " k=" << k;
}

// Pooling reads the top layer's outputs exactly as documented, and dropout off means no mask at all.
TEST(CpuLstmForward, PoolsTheTopLayerOutputs) {
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    ModelShape s = make_shape(2, 3, 2, Task::Regression);
    s.bidirectional = true;
    s.pool = pool;
    const Problem pr(s, 5, 41);
    const std::vector<double> p = pr.params_as<double>();
    LstmCache<double> c;
    lstm_forward(pr.layout, p.data(), pr.x.data(), pr.length, c);
    const std::vector<double>& h = c.h[1];   // (5, 6)
    for (int64_t k = 0; k < 6; ++k) {
      double want = 0;
      if (pool == Pool::Last) want = k < 3 ? h[static_cast<size_t>(4 * 6 + k)] : h[static_cast<size_t>(k)];
      if (pool == Pool::Mean) {
        for (int64_t t = 0; t < 5; ++t) want += h[static_cast<size_t>(t * 6 + k)];
        want /= 5;
      }
      if (pool == Pool::Max) {
        want = -1e300;
        for (int64_t t = 0; t < 5; ++t) want = std::max(want, h[static_cast<size_t>(t * 6 + k)]);
      }
      EXPECT_EQ(c.pooled[static_cast<size_t>(k)], want) << pool_name(pool) << " unit " << k;
      EXPECT_EQ(c.head_in[static_cast<size_t>(k)], want) << "no head dropout";
    }
  }
}

// The masks: the rate is respected, kept units are scaled by 1/(1-p), the draw depends on every key (so a
// different step or sequence gets a different mask) and on nothing else.
TEST(DropoutMask, RateScaleAndKeys) {
  const double p = 0.3;
  const uint32_t thr = dropout_threshold(p);
  int64_t dropped = 0, n = 0, differ_step = 0, differ_seq = 0;
  const DropoutKey k{5, 10, 20}, k_step{5, 11, 20}, k_seq{5, 10, 21};
  for (int64_t layer = 0; layer < 4; ++layer)
    for (int64_t t = 0; t < 100; ++t)
      for (int64_t u = 0; u < 50; ++u, ++n) {
        const bool keep = dropout_keep(k, layer, t, u, thr);
        dropped += keep ? 0 : 1;
        EXPECT_EQ(keep, dropout_keep(k, layer, t, u, thr));
        differ_step += keep != dropout_keep(k_step, layer, t, u, thr);
        differ_seq += keep != dropout_keep(k_seq, layer, t, u, thr);
      }
  const double rate = static_cast<double>(dropped) / static_cast<double>(n);
  EXPECT_NEAR(rate, p, 0.015) << n << " draws";   // 20000 draws: sd 0.0032
  // Independent masks disagree on a fraction 2p(1-p) = 0.42 of the units.
  EXPECT_NEAR(static_cast<double>(differ_step) / static_cast<double>(n), 0.42, 0.03);
  EXPECT_NEAR(static_cast<double>(differ_seq) / static_cast<double>(n), 0.42, 0.03);
  EXPECT_EQ(dropout_threshold(0.0), 0u);
  EXPECT_DOUBLE_EQ(dropout_scale(0.25), 4.0 / 3.0);

  // In the model: the head's input is the pooled vector times 0 or 1/(1-p), and some units of each kind occur.
  ModelShape s = make_shape(2, 16, 2, Task::Classification);
  s.bidirectional = true;
  s.pool = Pool::Mean;
  const Problem pr(s, 7, 51);
  const std::vector<double> params = pr.params_as<double>();
  LstmCache<double> c;
  DropoutDraw drop;
  drop.rates = DropoutRates{0.5, 0.5};
  drop.key = k;
  lstm_forward(pr.layout, params.data(), pr.x.data(), pr.length, c, drop);
  int zeros = 0, scaled = 0;
  for (size_t i = 0; i < c.pooled.size(); ++i) {
    if (c.head_in[i] == 0.0) ++zeros;
    if (c.head_in[i] == c.pooled[i] * 2.0 && c.pooled[i] != 0.0) ++scaled;
  }
  EXPECT_EQ(zeros + scaled, 32);
  EXPECT_GT(zeros, 4);
  EXPECT_GT(scaled, 4);
  int layer_zeros = 0;
  for (size_t i = 0; i < c.dropped[0].size(); ++i) {
    EXPECT_EQ(c.dropped[0][i], c.h[0][i] * c.keep[0][i]);
    layer_zeros += c.keep[0][i] == 0.0;
  }
  EXPECT_GT(layer_zeros, 7 * 32 / 4) << "about half of the first layer's outputs are dropped";
}

// Odd sizes wider than one register block take the partial-block paths of the matrix-vector kernel.
TEST(CpuLstmGrad, MatchesFiniteDifferencesForAnOddWideHiddenSize) {
  expect_grad_matches_finite_differences(make_shape(3, 19, 2, Task::Regression), 5, 300);
}

// The float path must agree with the double path within the tolerance the GPU backend is held to.
void expect_float_matches_double(const ModelShape& s, int64_t len, uint64_t seed) {
  const Problem pr(s, len, seed);
  std::vector<float> gf;
  std::vector<double> gd;
  const float lf = pr.loss_and_params_grad(pr.params_as<float>(), gf);
  const double ld = pr.loss_and_params_grad(pr.params_as<double>(), gd);
  EXPECT_LE(std::abs(lf - ld), 1e-7 + 1e-5 * std::abs(ld)) << describe(s, len) << ": loss " << lf << " vs " << ld;
  int failures = 0;
  for (size_t i = 0; i < gd.size(); ++i)
    if (std::abs(gf[i] - gd[i]) > 1e-7 + 1e-5 * std::abs(gd[i]) && ++failures <= 5)
      ADD_FAILURE() << describe(s, len) << ": " << tensor_of(pr.layout, static_cast<int64_t>(i)).name
                    << " float " << gf[i] << " vs double " << gd[i];
  EXPECT_EQ(failures, 0) << describe(s, len);
}

TEST(CpuLstmFloat, AgreesWithDouble) {
  uint64_t seed = 500;
  for (Task task : {Task::Classification, Task::Regression})
    for (int64_t L : {1, 2})
      for (int64_t len : {1, 7, 130}) expect_float_matches_double(make_shape(3, 8, L, task), len, seed++);
  // H = 50: 4H and H are not multiples of the float kernel's block width.
  expect_float_matches_double(make_shape(3, 50, 2, Task::Classification), 40, seed++);
  for (Pool pool : {Pool::Last, Pool::Mean, Pool::Max}) {
    ModelShape s = make_shape(3, 8, 2, Task::Classification);
    s.bidirectional = true;
    s.pool = pool;
    expect_float_matches_double(s, 50, seed++);
  }
}

// PyTorch's names, shapes and order: per layer weight_ih, weight_hh, bias_ih, bias_hh, then the _reverse four;
// layer 1 reads both directions (2H); the head reads 2H.
TEST(ParamLayout, BidirectionalFollowsPyTorch) {
  ModelShape s = make_shape(3, 4, 2, Task::Classification);
  s.bidirectional = true;
  const ParamLayout layout(s);
  const std::vector<std::string> names = {
      "lstm.weight_ih_l0", "lstm.weight_hh_l0", "lstm.bias_ih_l0", "lstm.bias_hh_l0", "lstm.weight_ih_l0_reverse",
      "lstm.weight_hh_l0_reverse", "lstm.bias_ih_l0_reverse", "lstm.bias_hh_l0_reverse", "lstm.weight_ih_l1",
      "lstm.weight_hh_l1", "lstm.bias_ih_l1", "lstm.bias_hh_l1", "lstm.weight_ih_l1_reverse",
      "lstm.weight_hh_l1_reverse", "lstm.bias_ih_l1_reverse", "lstm.bias_hh_l1_reverse", "fc.weight", "fc.bias"};
  ASSERT_EQ(layout.tensors().size(), names.size());
  int64_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(layout.tensors()[i].name, names[i]);
    EXPECT_EQ(layout.tensors()[i].offset, offset);
    offset += layout.tensors()[i].size;
  }
  EXPECT_EQ(layout.total(), offset);
  EXPECT_EQ(layout.w_ih(1, 0).shape, (std::vector<int64_t>{16, 8}));
  EXPECT_EQ(layout.w_ih(1, 1).name, "lstm.weight_ih_l1_reverse");
  EXPECT_EQ(layout.fc_weight().shape, (std::vector<int64_t>{5, 8}));
  // nn.LSTM(3, 4, 2, bidirectional=True) + nn.Linear(8, 5): 2 * (4*4*(3+4+2)) + 2 * (4*4*(8+4+2)) + 5*8 + 5.
  EXPECT_EQ(layout.total(), 2 * 144 + 2 * 224 + 45);
}

TEST(CpuLstmFloat, AgreesWithDoubleOnALongSequence) {
  for (Task task : {Task::Classification, Task::Regression})
    expect_float_matches_double(make_shape(3, 16, 1, task), 2000, 900 + static_cast<uint64_t>(task));
}

// hidden = 1, F = 1: every gate is a scalar, so the LSTM equations can be written out in full.
struct TinyModel {
  ParamLayout layout{[] {
    ModelShape s;
    s.input_size = 1;
    s.hidden = 1;
    s.layers = 1;
    s.outputs = 2;
    return s;
  }()};
  // Gate order i, f, g, o.
  std::vector<double> w_ih{0.5, -0.3, 0.8, 0.2}, w_hh{0.4, 0.6, -0.5, 0.9};
  std::vector<double> b_ih{0.1, 0.2, -0.1, 0.05}, b_hh{0.05, -0.1, 0.2, 0.1};
  std::vector<double> fc_w{1.5, -2.0}, fc_b{0.3, -0.1};

  std::vector<double> flat() const {
    std::vector<double> p(static_cast<size_t>(layout.total()));
    auto put = [&](const ParamTensor& t, const std::vector<double>& v) {
      std::copy(v.begin(), v.end(), p.begin() + t.offset);
    };
    put(layout.w_ih(0), w_ih);
    put(layout.w_hh(0), w_hh);
    put(layout.b_ih(0), b_ih);
    put(layout.b_hh(0), b_hh);
    put(layout.fc_weight(), fc_w);
    put(layout.fc_bias(), fc_b);
    return p;
  }
};

double sig(double v) { return 1.0 / (1.0 + std::exp(-v)); }

TEST(CpuLstmForward, HandComputedSingleStep) {
  const TinyModel m;
  const std::vector<double> p = m.flat();
  const float x = 0.7f;
  LstmCache<double> cache;
  const double* out = lstm_forward(m.layout, p.data(), &x, 1, cache);

  // c_{-1} = h_{-1} = 0, so the forget gate and weight_hh play no part.
  const double xd = x;
  const double i = sig(0.5 * xd + 0.1 + 0.05);
  const double g = std::tanh(0.8 * xd + -0.1 + 0.2);
  const double o = sig(0.2 * xd + 0.05 + 0.1);
  const double c = i * g;
  const double h = o * std::tanh(c);
  EXPECT_NEAR(out[0], 1.5 * h + 0.3, 1e-14);
  EXPECT_NEAR(out[1], -2.0 * h - 0.1, 1e-14);
  // The same values evaluated independently (Python, math module, x = 0.7 exactly).
  EXPECT_NEAR(out[0], 0.5961974605327278, 1e-7);
  EXPECT_NEAR(out[1], -0.4949299473769705, 1e-7);
}

TEST(CpuLstmForward, HandComputedTwoSteps) {
  const TinyModel m;
  const std::vector<double> p = m.flat();
  const float x[2] = {0.7f, -1.2f};
  LstmCache<double> cache;
  const double* out = lstm_forward(m.layout, p.data(), x, 2, cache);

  const double x0 = x[0], x1 = x[1];
  const double i0 = sig(0.5 * x0 + 0.15), g0 = std::tanh(0.8 * x0 + 0.1), o0 = sig(0.2 * x0 + 0.15);
  const double c0 = i0 * g0;
  const double h0 = o0 * std::tanh(c0);
  // Second step: weight_hh and the forget gate now matter.
  const double i1 = sig(0.5 * x1 + 0.4 * h0 + 0.15);
  const double f1 = sig(-0.3 * x1 + 0.6 * h0 + 0.1);
  const double g1 = std::tanh(0.8 * x1 - 0.5 * h0 + 0.1);
  const double o1 = sig(0.2 * x1 + 0.9 * h0 + 0.15);
  const double c1 = f1 * c0 + i1 * g1;
  const double h1 = o1 * std::tanh(c1);
  EXPECT_NEAR(out[0], 1.5 * h1 + 0.3, 1e-14);
  EXPECT_NEAR(out[1], -2.0 * h1 - 0.1, 1e-14);
  EXPECT_NEAR(out[0], 0.24295851861272094, 1e-7);
  EXPECT_NEAR(out[1], -0.023944691483627947, 1e-7);
}

TEST(CpuLstmForward, ReusedCacheGivesTheSameResult) {
  const ModelShape s = make_shape(3, 6, 2, Task::Regression);
  const Problem longer(s, 40, 11), shorter(s, 5, 12);
  const std::vector<double> p = shorter.params_as<double>();
  std::vector<double> fresh;
  const double l_fresh = shorter.loss_and_params_grad(p, fresh);

  LstmCache<double> cache;
  std::vector<double> d_out;
  longer.loss(p, cache, d_out);
  const double l_reused = shorter.loss(p, cache, d_out);
  std::vector<double> reused(p.size(), 0.0);
  lstm_backward(shorter.layout, p.data(), shorter.x.data(), cache, d_out.data(), reused.data());
  EXPECT_EQ(l_reused, l_fresh);
  EXPECT_EQ(reused, fresh);
}

TEST(CpuLstmBackward, AddsIntoGrad) {
  const Problem pr(make_shape(3, 5, 2, Task::Classification), 9, 21);
  const std::vector<double> p = pr.params_as<double>();
  LstmCache<double> cache;
  std::vector<double> d_out;
  pr.loss(p, cache, d_out);
  std::vector<double> once(p.size(), 0.0), twice(p.size(), 0.0);
  lstm_backward(pr.layout, p.data(), pr.x.data(), cache, d_out.data(), once.data());
  lstm_backward(pr.layout, p.data(), pr.x.data(), cache, d_out.data(), twice.data());
  lstm_backward(pr.layout, p.data(), pr.x.data(), cache, d_out.data(), twice.data());
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(twice[i], 2 * once[i]) << i;
}

TEST(CpuLstmLoss, CrossEntropyOfUniformLogitsIsLogC) {
  const std::vector<double> out(5, 0.7);
  std::vector<double> d(5);
  EXPECT_NEAR(loss_and_grad(Task::Classification, out.data(), 5, 3, nullptr, d.data()), std::log(5.0), 1e-15);
  for (int k = 0; k < 5; ++k) EXPECT_NEAR(d[static_cast<size_t>(k)], 0.2 - (k == 3 ? 1.0 : 0.0), 1e-15);

  const std::vector<float> outf(4, -3.0f);
  std::vector<float> df(4);
  EXPECT_NEAR(loss_and_grad(Task::Classification, outf.data(), 4, 0, nullptr, df.data()), std::log(4.0f), 1e-6);
}

TEST(CpuLstmLoss, CrossEntropyIsStableForHugeLogits) {
  const std::vector<double> out{1000.0, 0.0};
  std::vector<double> d(2);
  EXPECT_NEAR(loss_and_grad(Task::Classification, out.data(), 2, 1, nullptr, d.data()), 1000.0, 1e-9);
  EXPECT_NEAR(d[0], 1.0, 1e-15);
  EXPECT_NEAR(d[1], -1.0, 1e-15);
}

TEST(CpuLstmLoss, MeanSquaredErrorKnownValue) {
  const std::vector<double> out{1.0, 2.0, 3.0};
  const std::vector<float> target{0.0f, 2.0f, 5.0f};
  std::vector<double> d(3);
  EXPECT_NEAR(loss_and_grad(Task::Regression, out.data(), 3, 0, target.data(), d.data()), 5.0 / 3.0, 1e-15);
  EXPECT_NEAR(d[0], 2.0 / 3.0, 1e-15);
  EXPECT_NEAR(d[1], 0.0, 1e-15);
  EXPECT_NEAR(d[2], -4.0 / 3.0, 1e-15);
}

TEST(CpuLstmLoss, ArgmaxTiesPickTheFirst) {
  const std::vector<float> f{1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(argmax(f.data(), 4), 1);
  const std::vector<double> d{-1.0, -1.0};
  EXPECT_EQ(argmax(d.data(), 2), 0);
  const std::vector<double> last{0.0, 1.0, 2.0};
  EXPECT_EQ(argmax(last.data(), 3), 2);
}

}  // namespace
}  // namespace ragtrain
