// Where a warp of the split weight-gradient GEMM (fused_split_grad.cu) takes its tensor-core operands in shared memory
// and where its sums go: pure index arithmetic, host and device, so the unit tests replay a warp's mma on the host
// from these functions and check it against a plain GEMM (a wrong lane map sums the wrong products and only some
// shapes would show it on the GPU).
//
// A warp sums a tile of 64 gate rows x 32 columns of z as 4 x 4 mma tiles of 16 x 8 (m16n8k8, timesteps the
// reduction). Which gate row a tile's row stands for is ours to choose, as long as the sums are stored where they
// belong: lane (g, t) = (lane / 4, lane % 4) holds rows g and g + 8 of every row tile, and they are made the 8 rows
// 4g .. 4g + 3 and 32 + 4g .. 35 + 4g, so that two float4 loads a timestep give the lane its whole A operand (eight
// scalar loads in the mma's own row order); its column g of every column tile likewise is column 4g + ni of the
// warp's 32, one float4. With rows of the staged chunk a pitch of 8 (mod 32) floats apart, each quarter warp's float4s
// fall on the 32 banks once.
#pragma once

#include "host_device.hpp"

namespace ragtrain {

constexpr int kSgMi = 4, kSgNi = 4;   // a warp's row tiles (16 rows each) and column tiles (8 columns each)

// The warp's gate row that row r (0..15) of row tile mi stands for, and its z column for column n (0..7) of column
// tile ni.
RAGTRAIN_HD int sg_row(int mi, int r) { return 32 * (mi >> 1) + 4 * (r & 7) + 2 * (mi & 1) + (r >> 3); }
RAGTRAIN_HD int sg_col(int ni, int n) { return 4 * n + ni; }

struct SgVec {   // four floats read as one (ld.shared.v4 on the device)
  float v[4];
};
RAGTRAIN_HD SgVec sg_load4(const float* p) {
#ifdef __CUDA_ARCH__
  const float4 f = *reinterpret_cast<const float4*>(p);
  return {{f.x, f.y, f.z, f.w}};
#else
  return {{p[0], p[1], p[2], p[3]}};
#endif
}

// Lane `lane`'s operands for timesteps 8 kk .. 8 kk + 7 of a staged chunk: a[mi] its A fragment of row tile mi
// (rows g, g + 8 at timesteps t, t + 4, in the mma's register order), b[ni] its B fragment of column tile ni
// (timesteps t, t + 4). A: the chunk's d gates from the warp's first row, a timestep `pa` floats on; Z: its z from
// the warp's first column, `pb` on. Six float4 loads.
RAGTRAIN_HD void sg_fragments(const float* A, int pa, const float* Z, int pb, int lane, int kk, float (&a)[kSgMi][4],
                              float (&b)[kSgNi][2]) {
  const int g = lane >> 2, t = lane & 3;
RAGTRAIN_UNROLL
  for (int kh = 0; kh < 2; ++kh) {
    const int k = 8 * kk + t + 4 * kh;
RAGTRAIN_UNROLL
    for (int q = 0; q < 2; ++q) {   // rows 32 q + 4g + j: row tile 2q + j / 2, its row g + 8 (j % 2)
      const SgVec v = sg_load4(A + k * pa + 32 * q + 4 * g);
      a[2 * q][2 * kh] = v.v[0];
      a[2 * q][2 * kh + 1] = v.v[1];
      a[2 * q + 1][2 * kh] = v.v[2];
      a[2 * q + 1][2 * kh + 1] = v.v[3];
    }
    const SgVec w = sg_load4(Z + k * pb + 4 * g);   // columns 4g + ni
RAGTRAIN_UNROLL
    for (int ni = 0; ni < kSgNi; ++ni) b[ni][kh] = w.v[ni];
  }
}

// Where the lane's accumulator e (0..3) of tile (mi, ni) belongs in the warp's 64 x 32: the mma's row g + 8 (e / 2)
// and column 2t + e % 2. For one column, the lane's rows of row tiles 2q and 2q + 1 are 32 q + 4g + 0..3 (one float4
// store: sg_out4).
RAGTRAIN_HD int sg_out_row(int lane, int mi, int e) { return sg_row(mi, (lane >> 2) + 8 * (e >> 1)); }
RAGTRAIN_HD int sg_out_col(int lane, int ni, int e) { return sg_col(ni, 2 * (lane & 3) + (e & 1)); }
// The four sums of rows 32 q + 4g + 0..3, column sg_out_col(lane, ni, c), in row order.
RAGTRAIN_HD SgVec sg_out4(const float (&acc)[kSgMi][kSgNi][4], int q, int ni, int c) {
  return {{acc[2 * q][ni][c], acc[2 * q][ni][2 + c], acc[2 * q + 1][ni][c], acc[2 * q + 1][ni][2 + c]}};
}

}  // namespace ragtrain
