// Optimizer and learning-rate schedule against values worked out by hand (PyTorch's update rules).
#include <gtest/gtest.h>

#include <cmath>

#include "ragtrain/optim/optimizer.hpp"

using namespace ragtrain;

TEST(Optimizer, SgdMomentumTwoSteps) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0.5;
  Optimizer opt(c, 2);
  std::vector<float> p = {1.0f, -2.0f}, g = {0.5f, 1.0f};
  opt.step(p.data(), g.data(), 0.1f);           // buf = g; p -= 0.1 * g
  EXPECT_FLOAT_EQ(p[0], 0.95f);
  EXPECT_FLOAT_EQ(p[1], -2.1f);
  g = {0.5f, 1.0f};
  opt.step(p.data(), g.data(), 0.1f);           // buf = 0.5*g + g = 1.5 g
  EXPECT_FLOAT_EQ(p[0], 0.95f - 0.075f);
  EXPECT_FLOAT_EQ(p[1], -2.1f - 0.15f);
}

TEST(Optimizer, SgdWeightDecayIsL2) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0.0;
  c.weight_decay = 0.1;
  Optimizer opt(c, 1);
  std::vector<float> p = {2.0f}, g = {0.0f};
  opt.step(p.data(), g.data(), 0.5f);   // g + wd*p = 0.2; p -= 0.5*0.2
  EXPECT_FLOAT_EQ(p[0], 1.9f);
}

TEST(Optimizer, AdamFirstStepMovesByLr) {
  // After one step m_hat = g and v_hat = g^2, so the update is lr * g / (|g| + eps) ~ lr * sign(g).
  OptimizerConfig c;
  c.kind = OptimizerKind::Adam;
  Optimizer opt(c, 3);
  std::vector<float> p = {0.0f, 1.0f, -1.0f}, g = {3.0f, -0.01f, 1e-3f};
  opt.step(p.data(), g.data(), 0.01f);
  EXPECT_NEAR(p[0], -0.01f, 1e-7);
  EXPECT_NEAR(p[1], 1.01f, 1e-6);
  EXPECT_NEAR(p[2], -1.01f, 1e-6);
}

TEST(Optimizer, AdamSecondStepMatchesFormula) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Adam;
  c.beta1 = 0.9;
  c.beta2 = 0.99;
  Optimizer opt(c, 1);
  std::vector<float> p = {0.5f};
  std::vector<float> g = {1.0f};
  opt.step(p.data(), g.data(), 0.1f);
  g = {-2.0f};
  opt.step(p.data(), g.data(), 0.1f);
  const double m = 0.9 * 0.1 + 0.1 * -2.0, v = 0.99 * 0.01 + 0.01 * 4.0;
  const double mhat = m / (1 - 0.81), vhat = v / (1 - 0.9801);
  const double expect = 0.5 - 0.1 - 0.1 * mhat / (std::sqrt(vhat) + 1e-8);
  EXPECT_NEAR(p[0], expect, 1e-6);
}

TEST(Optimizer, AdamWDecaysDecoupled) {
  OptimizerConfig c;
  c.kind = OptimizerKind::AdamW;
  c.weight_decay = 0.5;
  Optimizer opt(c, 1);
  std::vector<float> p = {2.0f}, g = {1.0f};
  opt.step(p.data(), g.data(), 0.1f);   // p *= 1 - 0.1*0.5, then p -= 0.1*sign(g)
  EXPECT_NEAR(p[0], 2.0 * 0.95 - 0.1, 1e-6);
}

TEST(Optimizer, ClipScalesToMaxNorm) {
  OptimizerConfig c;
  c.kind = OptimizerKind::Sgd;
  c.momentum = 0;
  c.clip = 1.0;
  Optimizer opt(c, 2);
  std::vector<float> p = {0.0f, 0.0f}, g = {3.0f, 4.0f};
  const double norm = opt.step(p.data(), g.data(), 1.0f);
  EXPECT_DOUBLE_EQ(norm, 5.0);
  EXPECT_NEAR(p[0], -0.6, 1e-6);
  EXPECT_NEAR(p[1], -0.8, 1e-6);
}

TEST(LrSchedule, WarmupThenCosineToFinalFraction) {
  LrSchedule s{1.0, 10, LrDecay::Cosine, 0.1, 110};
  EXPECT_DOUBLE_EQ(s.at(0), 0.1);
  EXPECT_DOUBLE_EQ(s.at(9), 1.0);
  EXPECT_DOUBLE_EQ(s.at(10), 1.0);
  EXPECT_NEAR(s.at(109), 0.1, 1e-12);
  EXPECT_NEAR(s.at(10 + 99 / 2.0), 0.55, 0.02);
  LrSchedule lin{2.0, 0, LrDecay::Linear, 0.0, 11};
  EXPECT_DOUBLE_EQ(lin.at(0), 2.0);
  EXPECT_NEAR(lin.at(5), 1.0, 1e-12);
  EXPECT_NEAR(lin.at(10), 0.0, 1e-12);
  LrSchedule none{0.3, 0, LrDecay::None, 0.0, 5};
  EXPECT_DOUBLE_EQ(none.at(4), 0.3);
}
