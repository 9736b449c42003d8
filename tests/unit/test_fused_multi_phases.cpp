// The multi-sequence cluster kernel's mbarrier accounting (fused_multi_phases.hpp), played on the host: for ragged
// lengths, every phase a block waits on expects exactly the bytes its senders put in it, no phase receives bytes it
// does not expect, each phase is armed before anything is sent into it, and no phase is armed for 0 bytes (it would
// complete at once and leave a lagging warp waiting on the parity of the wrong phase, forever: the hang this test
// first missed, seen on the H100 at K = 32 and 41). The schedule below follows
// fused_cluster_multi.cu's loops (which buffer each step waits on and re-arms, which sequences send); the bytes
// expected come from the functions the kernel calls.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "../../src/backend/cuda/fused_multi_phases.hpp"

namespace ragtrain {
namespace {

// One buffer's mbarrier: the bytes each phase was armed for and the bytes sent into it, phase by phase.
struct Buffer {
  std::vector<uint32_t> expected, sent;
  void arm(uint32_t bytes) {
    expected.push_back(bytes);
    sent.push_back(0);
  }
};

struct Played {
  std::string failure;   // empty: every check held
};

// The forward (phase = h) or the backward (d gates) of one cluster of S sequences. extra: bytes added to every
// phase's expectation (0: the kernel's; else a wrong accounting the play must catch); arm_zero: arm phases of 0 bytes
// too (the kernel before multi_arm_phase, which the play must catch).
Played play(const std::vector<int>& len, bool backward, uint32_t extra = 0, bool arm_zero = false) {
  const int S = static_cast<int>(len.size()), H = 200;
  const uint32_t h_bytes = 8 * 13;   // any per-sequence amount: what matters is the count of senders
  const int T = *std::max_element(len.begin(), len.end());
  const uint32_t per_send = backward ? 16u * H : h_bytes;
  auto expect = [&](int u) {
    return extra + (backward ? multi_dg_expect(len.data(), S, H, u) : multi_h_expect(len.data(), S, h_bytes, u));
  };
  Buffer buf[2];
  std::vector<int> content[2];   // the vector (h_u or step u's d gates) each armed phase is meant to hold
  bool skipped[2] = {false, false};   // a phase of the buffer was left unarmed (then none may follow it)
  std::string arm_failure;
  auto arm = [&](int b, int u) {
    const uint32_t e = expect(u);
    if (!arm_zero && !multi_arm_phase(e)) {
      skipped[b] = true;
      return;
    }
    if (e == 0 && arm_failure.empty())
      arm_failure = "buffer " + std::to_string(b) + " is armed for no bytes (the phase of " + std::to_string(u) + ")";
    if (skipped[b] && arm_failure.empty())
      arm_failure = "buffer " + std::to_string(b) + " is armed after a phase it left unarmed";
    buf[b].arm(e);
    content[b].push_back(u);
  };
  // The first phases, as the kernel's thread 0 arms them before the cluster barrier.
  if (backward) {
    arm(1, T - 1);
    arm(0, T - 2);
  } else {
    arm(1, 0);
    arm(0, 1);
  }
  for (int k = 0; k < T; ++k) {
    const int t = backward ? T - 1 - k : k;   // the timestep of this step
    const int cur = k % 2;                    // the buffer read this step
    if (k > 0) {
      const int phase = (k - 1) / 2;          // the parity the kernel waits for counts phases of this buffer
      const int holds = backward ? t + 1 : t - 1;
      if (phase >= static_cast<int>(buf[cur].expected.size()) || content[cur][static_cast<size_t>(phase)] != holds)
        return {"step " + std::to_string(k) + " waits on a phase that is not the one holding " + std::to_string(holds)};
      if (buf[cur].expected[static_cast<size_t>(phase)] == 0)
        return {"step " + std::to_string(k) + " waits on a phase armed for no bytes"};
      if (buf[cur].sent[static_cast<size_t>(phase)] != buf[cur].expected[static_cast<size_t>(phase)])
        return {"step " + std::to_string(k) + ": the phase got " + std::to_string(buf[cur].sent[phase]) +
                " bytes, armed for " + std::to_string(buf[cur].expected[phase])};
      arm(cur, backward ? t - 1 : t + 1);
    }
    // This step's sends, into the other buffer, where the phase holding this step's vector must already be armed.
    for (int s = 0; s < S; ++s) {
      if (t >= len[static_cast<size_t>(s)]) continue;   // not running at this step
      const bool sends = backward ? t > 0 : t + 1 < len[static_cast<size_t>(s)];
      if (!sends) continue;
      const int other = cur ^ 1;
      const auto at = std::find(content[other].begin(), content[other].end(), t);
      if (at == content[other].end())
        return {"step " + std::to_string(k) + " sends " + std::to_string(t) + " before its phase is armed"};
      buf[other].sent[static_cast<size_t>(at - content[other].begin())] += per_send;
    }
  }
  if (!arm_failure.empty()) return {arm_failure};
  for (int b = 0; b < 2; ++b)
    for (size_t i = 0; i < buf[b].sent.size(); ++i)
      if (buf[b].sent[i] > 0 && buf[b].sent[i] != buf[b].expected[i])
        return {"buffer " + std::to_string(b) + " phase " + std::to_string(i) + " got " +
                std::to_string(buf[b].sent[i]) + " bytes, armed for " + std::to_string(buf[b].expected[i])};
  return {};
}

std::string show(const std::vector<int>& len) {
  std::string s;
  for (int v : len) s += std::to_string(v) + " ";
  return s;
}

TEST(FusedMultiPhases, EveryWaitGetsExactlyTheBytesSentIntoIt) {
  // The edges: equal lengths, one sequence, lengths 1 and 2 (nothing or one vector sent), empty places, unsorted,
  // eight sequences.
  const std::vector<std::vector<int>> cases = {{5, 5, 5, 5}, {1, 1, 1, 1}, {2, 1, 0, 0}, {130, 0, 0, 0}, {3, 2, 1, 1},
                                               {7, 64, 2, 97}, {2, 2, 2, 2}, {1, 0, 0, 0}, {130, 129, 1, 2},
                                               {9, 1, 3, 9, 0, 2, 8, 5}};
  for (const auto& len : cases)
    for (bool backward : {false, true}) {
      const Played r = play(len, backward);
      EXPECT_TRUE(r.failure.empty()) << (backward ? "backward" : "forward") << ", lengths " << show(len) << ": "
                                     << r.failure;
    }
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> length(0, 40);
  for (int i = 0; i < 2000; ++i) {
    std::vector<int> len = {1 + length(rng)};   // 4 sequences a cluster, then 8
    while (len.size() < (i % 2 ? 8u : 4u)) len.push_back(length(rng));
    for (bool backward : {false, true}) {
      const Played r = play(len, backward);
      ASSERT_TRUE(r.failure.empty()) << (backward ? "backward" : "forward") << ", lengths " << show(len) << ": "
                                     << r.failure;
    }
  }
}

// The play can fail: one sender too many in every phase is caught, forward and backward; and the edges of the
// expectations themselves.
TEST(FusedMultiPhases, AWrongAccountingIsCaught) {
  const std::vector<int> len = {4, 3, 0, 0};
  for (bool backward : {false, true}) {
    EXPECT_TRUE(play(len, backward).failure.empty());
    EXPECT_FALSE(play(len, backward, backward ? 16u * 200 : 8u * 13).failure.empty());
    // Arming the phases of 0 bytes too (the forward's after h_{T-2}, the backward's step 0): caught.
    EXPECT_NE(play(len, backward, 0, true).failure.find("armed for no bytes"), std::string::npos);
  }
  EXPECT_FALSE(multi_arm_phase(0));
  EXPECT_TRUE(multi_arm_phase(16));
  EXPECT_EQ(multi_dg_expect(len.data(), 4, 10, 0), 0u);       // nothing is sent upstream of the first step
  EXPECT_EQ(multi_h_expect(len.data(), 4, 8, 3), 0u);         // h_{T-1} goes to no one
  EXPECT_EQ(multi_h_expect(len.data(), 4, 8, 1), 16u);        // h_1: both sequences (lengths 4 and 3) send it
  EXPECT_EQ(multi_dg_expect(len.data(), 4, 10, 3), 160u);     // step 3's d gates: only the sequence of length 4
}

}  // namespace
}  // namespace ragtrain
