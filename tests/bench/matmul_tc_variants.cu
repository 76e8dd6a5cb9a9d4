// matmul_tc_variants.cu: f64 tensor-core matrix multiplies (C = A B, row
// major, 4096^3 by default) in several forms, against each other and against
// cuBLAS's cublasDgemm (issue 25: what tests/bench/matmul_tc.kern lacks to
// come within 2x of cuBLAS on cuda).
//
//   nvcc -O3 -arch=sm_90 -std=c++17 -o matmul_tc_variants matmul_tc_variants.cu -lcublas
//   (with -DKJIT_VARIANT -I<kjit.h's folder> -L<libkjit.so's> -lkjit: a "kjit" row too)
//   ./matmul_tc_variants list          the variants' names, one a line
//   ./matmul_tc_variants run NAME [N]  one variant: prints one line
//       NAME ms TFLOP/s err_vs_cublas err_vs_ref regs local_bytes smem_bytes
//            chain_bits (of 64) m8_bits_percent (against "current")
//
// tests/gpu/matmul_variants.sh runs each variant in a process of its own (a
// variant that faults cannot spoil the others' figures) and prints the table.
//
// The variants are one template (tc_gemm below) whose parameters are the
// choices in question, so that two rows differ in the named choice only:
//   - the instruction: mma.sync m8n8k4 (sm_80, what mma() issues) or the
//     sm_90 f64 shapes m16n8k4, m16n8k8, m16n8k16 (PTX ISA 7.8);
//   - the block tile BM x BN x BK and the warp tile WM x WN;
//   - the stages of shared memory: 1 (the current algorithm: the next tiles
//     wait in registers, two __syncthreads a k-step), 2 (double buffering
//     through registers: one __syncthreads a k-step), or cp.async pipelines
//     of 3-4 stages (what cuBLAS-like kernels do; no .kern form has them);
//   - 128-bit (f64x2) global loads and shared stores against 64-bit ones;
//   - the order of the blocks (rows of blocks in groups of 8, for L2).
// The shared tiles' rows are padded by 4 elements (conflict-free fragment
// reads, 16-byte aligned rows for 128-bit stores and cp.async).
// "current" is the CUDA C twin of the .kern before sm_90's m16n8k4 (bounds
// checks included); it, the current_k4 and k4_clamp rows and the kjit row
// take any N, the template variants multiples of their tiles (the host
// refuses others).
//
// Every result is checked in full against cuBLAS's (the largest difference
// relative to cuBLAS's element; the inputs are uniform in [0, 1), so no
// element is near 0) and at 64 sampled elements against long-double sums;
// the bits are compared with the cpu's fma chain at those 64 elements and
// with current's (mma.sync m8n8k4) in every element: whether the sm_90 shapes
// could stand in for mma() where the cpu's bits must be kept.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                   \
    do {                                                                              \
        cudaError_t err_ = (call);                                                    \
        if (err_ != cudaSuccess) {                                                    \
            std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call,        \
                         cudaGetErrorString(err_));                                   \
            std::exit(1);                                                             \
        }                                                                             \
    } while (0)

// ------------------------------------------------------ the current kernel

__device__ __forceinline__ void dmma(double a, double b, double &d0, double &d1)
{
    asm volatile("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
                 : "+d"(d0), "+d"(d1)
                 : "d"(a), "d"(b));
}

__global__ void __launch_bounds__(256) matmul_tc(const double *a, const double *b, double *c, int n,
                                                 int m, int depth)
{
    __shared__ double at[128][20], bt[16][132];
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int g = lane / 4, t = lane % 4;
    int wm = (warp % 2) * 64, wn = (warp / 2) * 32;
    long row0 = (long)blockIdx.y * 128, col0 = (long)blockIdx.x * 128;
    double acc[8][4][2] = {};
    double na[8], nb[8];
#pragma unroll
    for (int l = 0; l < 8; l++) {
        int e = tid + 256 * l;
        na[l] = row0 + e / 16 < n && e % 16 < depth ? a[(row0 + e / 16) * depth + e % 16] : 0.0;
        nb[l] = e / 128 < depth && col0 + e % 128 < m ? b[(long)(e / 128) * m + col0 + e % 128] : 0.0;
    }
    for (int k0 = 0; k0 < depth; k0 += 16) {
#pragma unroll
        for (int l = 0; l < 8; l++) {
            int e = tid + 256 * l;
            at[e / 16][e % 16] = na[l];
            bt[e / 128][e % 128] = nb[l];
        }
        __syncthreads();
        int k1 = k0 + 16;
#pragma unroll
        for (int l = 0; l < 8; l++) {
            int e = tid + 256 * l;
            long r = row0 + e / 16, s = col0 + e % 128;
            int k = k1 + e % 16, kb = k1 + e / 128;
            na[l] = r < n && k < depth ? a[r * depth + k] : 0.0;
            nb[l] = kb < depth && s < m ? b[(long)kb * m + s] : 0.0;
        }
#pragma unroll
        for (int kk = 0; kk < 16; kk += 4) {
            double fa[8], fb[4];
#pragma unroll
            for (int i = 0; i < 8; i++)
                fa[i] = at[wm + 8 * i + g][kk + t];
#pragma unroll
            for (int j = 0; j < 4; j++)
                fb[j] = bt[kk + t][wn + 8 * j + g];
#pragma unroll
            for (int i = 0; i < 8; i++)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    dmma(fa[i], fb[j], acc[i][j][0], acc[i][j][1]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            long r = row0 + wm + 8 * i + g, s = col0 + wn + 8 * j + 2 * t;
            if (r < n && s < m)
                c[r * m + s] = acc[i][j][0];
            if (r < n && s + 1 < m)
                c[r * m + s + 1] = acc[i][j][1];
        }
}

// ------------------------------------------------------- the instructions
//
// Fragments (PTX ISA, "Matrix Fragments for mma.m16n8k*", .f64), lane
// l = 4 g + t:
//   A (16 x K): a[q], q < K/2, at row g + 8 (q % 2), column t + 4 (q / 2)
//   B (K x 8):  b[q], q < K/4, at row t + 4 q, column g
//   C (16 x 8): c[0], c[1] at row g, columns 2t, 2t + 1; c[2], c[3] at row g + 8
// m8n8k4 is the same with K = 4 and the rows g alone (a[0], b[0], c[0..1]).

template <int SHAPE> struct Mma;

template <> struct Mma<0> { // m8n8k4
    static constexpr int TM = 8, TK = 4, AQ = 1, BQ = 1, CQ = 2;
    __device__ static __forceinline__ void run(const double *a, const double *b, double *c)
    {
        asm("mma.sync.aligned.m8n8k4.row.col.f64.f64.f64.f64 {%0, %1}, {%2}, {%3}, {%0, %1};"
            : "+d"(c[0]), "+d"(c[1])
            : "d"(a[0]), "d"(b[0]));
    }
};

template <> struct Mma<4> { // m16n8k4
    static constexpr int TM = 16, TK = 4, AQ = 2, BQ = 1, CQ = 4;
    __device__ static __forceinline__ void run(const double *a, const double *b, double *c)
    {
        asm("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
            "{%0, %1, %2, %3};"
            : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
            : "d"(a[0]), "d"(a[1]), "d"(b[0]));
    }
};

template <> struct Mma<8> { // m16n8k8
    static constexpr int TM = 16, TK = 8, AQ = 4, BQ = 2, CQ = 4;
    __device__ static __forceinline__ void run(const double *a, const double *b, double *c)
    {
        asm("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
            "{%8, %9}, {%0, %1, %2, %3};"
            : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
    }
};

template <> struct Mma<16> { // m16n8k16
    static constexpr int TM = 16, TK = 16, AQ = 8, BQ = 4, CQ = 4;
    __device__ static __forceinline__ void run(const double *a, const double *b, double *c)
    {
        asm("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
            "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};"
            : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
            : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]),
              "d"(a[7]), "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
    }
};

__device__ __forceinline__ void cp_async16(void *shared, const void *global)
{
    unsigned s = (unsigned)__cvta_generic_to_shared(shared);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(s), "l"(global));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N> __device__ __forceinline__ void cp_async_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N));
}

// The current kernel with m16n8k4 on the tiles 2p and 2p + 1 of a column
// (what kjit issues on sm_90 since ptx_mma.c), and cheaper forms of its
// bounds checks, each expressible in a .kern:
//   BOUNDS 0: as the current kernel (a row, a column and k checked a load);
//   BOUNDS 1: rows and columns past the edge clamped to the last one (their
//             products land only in elements never stored), k checked;
//   BOUNDS 2: as 1, and the loads of a k tile wholly inside unchecked (a
//             branch a k-step, the same for the whole block).
__device__ __forceinline__ void dmma16(double a0, double a1, double b, double &d0, double &d1,
                                       double &d2, double &d3)
{
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, "
                 "{%6}, {%0, %1, %2, %3};"
                 : "+d"(d0), "+d"(d1), "+d"(d2), "+d"(d3)
                 : "d"(a0), "d"(a1), "d"(b));
}

template <int BOUNDS>
__global__ void __launch_bounds__(256) matmul_tc16(const double *a, const double *b, double *c, int n,
                                                   int m, int depth)
{
    __shared__ double at[128][20], bt[16][132];
    int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    int g = lane / 4, t = lane % 4;
    int wm = (warp % 2) * 64, wn = (warp / 2) * 32;
    long row0 = (long)blockIdx.y * 128, col0 = (long)blockIdx.x * 128;
    if (n == 0 || m == 0)
        return;
    double acc[8][4][2] = {};
    double na[8], nb[8];
    auto load = [&](int k1) { // the first tile checked always, as the .kern
        bool inside = BOUNDS == 2 && k1 > 0 && k1 + 16 <= depth;
#pragma unroll
        for (int l = 0; l < 8; l++) {
            int e = tid + 256 * l;
            long r = row0 + e / 16, s = col0 + e % 128;
            int k = k1 + e % 16, kb = k1 + e / 128;
            if (BOUNDS == 0) {
                na[l] = r < n && k < depth ? a[r * depth + k] : 0.0;
                nb[l] = kb < depth && s < m ? b[(long)kb * m + s] : 0.0;
            } else {
                long rc = r < n ? r : n - 1, sc = s < m ? s : m - 1;
                if (inside) {
                    na[l] = a[rc * depth + k];
                    nb[l] = b[(long)kb * m + sc];
                } else {
                    na[l] = k < depth ? a[rc * depth + k] : 0.0;
                    nb[l] = kb < depth ? b[(long)kb * m + sc] : 0.0;
                }
            }
        }
    };
    load(0);
    for (int k0 = 0; k0 < depth; k0 += 16) {
#pragma unroll
        for (int l = 0; l < 8; l++) {
            int e = tid + 256 * l;
            at[e / 16][e % 16] = na[l];
            bt[e / 128][e % 128] = nb[l];
        }
        __syncthreads();
        load(k0 + 16);
#pragma unroll
        for (int kk = 0; kk < 16; kk += 4) {
            double fa[8], fb[4];
#pragma unroll
            for (int i = 0; i < 8; i++)
                fa[i] = at[wm + 8 * i + g][kk + t];
#pragma unroll
            for (int j = 0; j < 4; j++)
                fb[j] = bt[kk + t][wn + 8 * j + g];
#pragma unroll
            for (int i = 0; i < 8; i += 2)
#pragma unroll
                for (int j = 0; j < 4; j++)
                    dmma16(fa[i], fa[i + 1], fb[j], acc[i][j][0], acc[i][j][1], acc[i + 1][j][0],
                           acc[i + 1][j][1]);
        }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 8; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            long r = row0 + wm + 8 * i + g, s = col0 + wn + 8 * j + 2 * t;
            if (r < n && s < m)
                c[r * m + s] = acc[i][j][0];
            if (r < n && s + 1 < m)
                c[r * m + s + 1] = acc[i][j][1];
        }
}

template <int BOUNDS> static void launch_tc16(const double *a, const double *b, double *c, int n)
{
    matmul_tc16<BOUNDS><<<dim3((n + 127) / 128, (n + 127) / 128), 256>>>(a, b, c, n, n, n);
}

// ------------------------------------------------------ the template kernel

// STAGES: 1 or 2 through registers (ASYNC false), 2 to 4 by cp.async.
// VEC: 128-bit global loads and shared stores (ASYNC copies 16 bytes always).
// GROUP: blocks run down groups of GROUP rows of blocks (0: row by row).
template <int SHAPE, int BM, int BN, int BK_, int WM, int WN, int STAGES, bool ASYNC, bool VEC,
          int GROUP, int MINB>
struct Gemm {
    using M = Mma<SHAPE>;
    static constexpr int NT = 32 * (BM / WM) * (BN / WN), BK = BK_;
    static constexpr int LDA = BK + 4, LDB = BN + 4;
    static constexpr int STAGE = BM * LDA + BK_ * LDB; // doubles
    static constexpr size_t SMEM = (size_t)STAGES * STAGE * sizeof(double);
    static constexpr int MI = WM / M::TM, NJ = WN / 8;
    static constexpr int V = (VEC || ASYNC) ? 2 : 1;
    static constexpr int LA = BM * BK / (NT * V), LB = BK * BN / (NT * V);
    static_assert(BM % WM == 0 && BN % WN == 0 && WM % M::TM == 0 && WN % 8 == 0, "tiles");
    static_assert(BK % M::TK == 0, "BK");
    static_assert(BM * BK % (NT * V) == 0 && BK * BN % (NT * V) == 0, "loads");
    static_assert(ASYNC ? STAGES >= 2 : STAGES <= 2, "stages");
};

template <class G>
__device__ __forceinline__ void tile_compute(const double *As, const double *Bs, int wm, int wn, int g,
                                             int t, double (&acc)[G::MI][G::NJ][G::M::CQ])
{
    using M = typename G::M;
#pragma unroll
    for (int kk = 0; kk < G::BK; kk += M::TK) {
        double fa[G::MI][M::AQ], fb[G::NJ][M::BQ];
#pragma unroll
        for (int i = 0; i < G::MI; i++)
#pragma unroll
            for (int q = 0; q < M::AQ; q++)
                fa[i][q] = As[(wm + M::TM * i + g + 8 * (q % 2)) * G::LDA + kk + t + 4 * (q / 2)];
#pragma unroll
        for (int j = 0; j < G::NJ; j++)
#pragma unroll
            for (int q = 0; q < M::BQ; q++)
                fb[j][q] = Bs[(kk + t + 4 * q) * G::LDB + wn + 8 * j + g];
#pragma unroll
        for (int i = 0; i < G::MI; i++)
#pragma unroll
            for (int j = 0; j < G::NJ; j++)
                M::run(fa[i], fb[j], acc[i][j]);
    }
}

template <int SHAPE, int BM, int BN, int BK, int WM, int WN, int STAGES, bool ASYNC, bool VEC,
          int GROUP, int MINB>
__global__ void __launch_bounds__(Gemm<SHAPE, BM, BN, BK, WM, WN, STAGES, ASYNC, VEC, GROUP, MINB>::NT,
                                  MINB)
    tc_gemm(const double *__restrict__ a, const double *__restrict__ b, double *__restrict__ c, int n,
            int m, int depth)
{
    using G = Gemm<SHAPE, BM, BN, BK, WM, WN, STAGES, ASYNC, VEC, GROUP, MINB>;
    using M = typename G::M;
    extern __shared__ __align__(16) double smem[];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int g = lane / 4, t = lane % 4;
    const int wm = (warp % (BM / WM)) * WM, wn = (warp / (BM / WM)) * WN;
    const int nbm = n / BM, nbn = m / BN, pid = blockIdx.x;
    int bm, bn;
    if (GROUP > 0) {
        int per_group = GROUP * nbn, first = pid / per_group * GROUP;
        int rows = min(nbm - first, GROUP);
        bm = first + pid % per_group % rows;
        bn = pid % per_group / rows;
    } else {
        bm = pid / nbn;
        bn = pid % nbn;
    }
    const long row0 = (long)bm * BM, col0 = (long)bn * BN;
    const double *ablock = a + row0 * depth, *bblock = b + col0;

    double acc[G::MI][G::NJ][M::CQ];
#pragma unroll
    for (int i = 0; i < G::MI; i++)
#pragma unroll
        for (int j = 0; j < G::NJ; j++)
#pragma unroll
            for (int q = 0; q < M::CQ; q++)
                acc[i][j][q] = 0.0;

    const int ktiles = depth / BK;
    constexpr int V = G::V;
    if constexpr (ASYNC) {
        auto issue = [&](int kt, int stage) {
            double *As = smem + stage * G::STAGE, *Bs = As + BM * G::LDA;
            const long k0 = (long)kt * BK;
#pragma unroll
            for (int l = 0; l < G::LA; l++) {
                int e = tid + G::NT * l, r = e / (BK / 2), k = e % (BK / 2) * 2;
                cp_async16(As + r * G::LDA + k, ablock + (long)r * depth + k0 + k);
            }
#pragma unroll
            for (int l = 0; l < G::LB; l++) {
                int e = tid + G::NT * l, r = e / (BN / 2), s = e % (BN / 2) * 2;
                cp_async16(Bs + r * G::LDB + s, bblock + (k0 + r) * m + s);
            }
        };
#pragma unroll
        for (int s = 0; s < STAGES - 1; s++) {
            if (s < ktiles)
                issue(s, s);
            cp_async_commit();
        }
        for (int kt = 0; kt < ktiles; kt++) {
            cp_async_wait<STAGES - 2>();
            __syncthreads();
            int next = kt + STAGES - 1;
            if (next < ktiles)
                issue(next, next % STAGES);
            cp_async_commit();
            const double *As = smem + (kt % STAGES) * G::STAGE, *Bs = As + BM * G::LDA;
            tile_compute<G>(As, Bs, wm, wn, g, t, acc);
        }
        cp_async_wait<0>();
    } else {
        double ra[G::LA * V], rb[G::LB * V];
        auto load = [&](int kt) {
            const long k0 = (long)kt * BK;
#pragma unroll
            for (int l = 0; l < G::LA; l++) {
                int e = tid + G::NT * l, r = e / (BK / V), k = e % (BK / V) * V;
                const double *p = ablock + (long)r * depth + k0 + k;
                if (V == 2) {
                    double2 v = *(const double2 *)p;
                    ra[2 * l] = v.x;
                    ra[2 * l + 1] = v.y;
                } else {
                    ra[l] = *p;
                }
            }
#pragma unroll
            for (int l = 0; l < G::LB; l++) {
                int e = tid + G::NT * l, r = e / (BN / V), s = e % (BN / V) * V;
                const double *p = bblock + (k0 + r) * m + s;
                if (V == 2) {
                    double2 v = *(const double2 *)p;
                    rb[2 * l] = v.x;
                    rb[2 * l + 1] = v.y;
                } else {
                    rb[l] = *p;
                }
            }
        };
        auto store = [&](int stage) {
            double *As = smem + stage * G::STAGE, *Bs = As + BM * G::LDA;
#pragma unroll
            for (int l = 0; l < G::LA; l++) {
                int e = tid + G::NT * l, r = e / (BK / V), k = e % (BK / V) * V;
                if (V == 2)
                    *(double2 *)(As + r * G::LDA + k) = make_double2(ra[2 * l], ra[2 * l + 1]);
                else
                    As[r * G::LDA + k] = ra[l];
            }
#pragma unroll
            for (int l = 0; l < G::LB; l++) {
                int e = tid + G::NT * l, r = e / (BN / V), s = e % (BN / V) * V;
                if (V == 2)
                    *(double2 *)(Bs + r * G::LDB + s) = make_double2(rb[2 * l], rb[2 * l + 1]);
                else
                    Bs[r * G::LDB + s] = rb[l];
            }
        };
        load(0);
        store(0);
        __syncthreads();
        for (int kt = 0; kt < ktiles; kt++) {
            const int cur = STAGES == 2 ? kt & 1 : 0;
            if (kt + 1 < ktiles)
                load(kt + 1);
            const double *As = smem + cur * G::STAGE, *Bs = As + BM * G::LDA;
            tile_compute<G>(As, Bs, wm, wn, g, t, acc);
            if (STAGES == 1) {
                __syncthreads();
                if (kt + 1 < ktiles)
                    store(0);
            } else if (kt + 1 < ktiles) {
                store(cur ^ 1);
            }
            __syncthreads();
        }
    }
#pragma unroll
    for (int i = 0; i < G::MI; i++)
#pragma unroll
        for (int j = 0; j < G::NJ; j++) {
            long r = row0 + wm + M::TM * i + g, s = col0 + wn + 8 * j + 2 * t;
            *(double2 *)(c + r * m + s) = make_double2(acc[i][j][0], acc[i][j][1]);
            if (M::CQ == 4)
                *(double2 *)(c + (r + 8) * m + s) = make_double2(acc[i][j][2], acc[i][j][3]);
        }
}

// ------------------------------------------------------------- the table

struct Variant {
    const char *name, *what;
    const void *func;
    int threads, bm, bn, bk;
    size_t smem;
    void (*launch)(const double *, const double *, double *, int);
};

template <int SHAPE, int BM, int BN, int BK, int WM, int WN, int STAGES, bool ASYNC, bool VEC,
          int GROUP, int MINB>
static Variant make(const char *name, const char *what)
{
    using G = Gemm<SHAPE, BM, BN, BK, WM, WN, STAGES, ASYNC, VEC, GROUP, MINB>;
    auto kernel = tc_gemm<SHAPE, BM, BN, BK, WM, WN, STAGES, ASYNC, VEC, GROUP, MINB>;
    Variant v{name, what, (const void *)kernel, G::NT, BM, BN, BK, G::SMEM, nullptr};
    v.launch = [](const double *a, const double *b, double *c, int n) {
        tc_gemm<SHAPE, BM, BN, BK, WM, WN, STAGES, ASYNC, VEC, GROUP, MINB>
            <<<(n / BM) * (n / BN), G::NT, G::SMEM>>>(a, b, c, n, n, n);
    };
    return v;
}

static void launch_current(const double *a, const double *b, double *c, int n)
{
    matmul_tc<<<dim3((n + 127) / 128, (n + 127) / 128), 256>>>(a, b, c, n, n, n);
}

#ifdef KJIT_VARIANT
// The "kjit" row: tests/bench/matmul_tc.kern ($KJIT_MATMUL_KERN) through
// libkjit on the same device buffers, launched as bench_gpu.cu does (built
// so by tests/gpu/matmul_variants.sh when it finds libkjit.so).
#include "kjit.h"

static void kjit_check(kjit_context *context, kjit_status status, const char *what)
{
    if (status != KJIT_OK) {
        std::fprintf(stderr, "matmul_tc_variants: kjit: %s: %s: %s\n", what, kjit_status_name(status),
                     context ? kjit_last_error(context) : "");
        std::exit(1);
    }
}

static void launch_kjit(const double *a, const double *b, double *c, int n)
{
    static kjit_context *context;
    static kjit_function *fn;
    static kjit_array av, bv, cv;
    static int64_t shape[2];
    if (!fn) {
        const char *path = std::getenv("KJIT_MATMUL_KERN");
        kjit_options options;
        kjit_options_init(&options);
        options.target = KJIT_TARGET_CUDA;
        kjit_check(nullptr, kjit_context_create(&options, &context), "context");
        kjit_module *module;
        kjit_check(context, kjit_compile_file(context, path ? path : "tests/bench/matmul_tc.kern", &module),
                   "compile");
        kjit_check(context, kjit_module_function(module, "matmul_tc", &fn), "matmul_tc");
    }
    shape[0] = shape[1] = n;
    av = kjit_array_make((void *)a, KJIT_F64, 2, shape);
    bv = kjit_array_make((void *)b, KJIT_F64, 2, shape);
    cv = kjit_array_make(c, KJIT_F64, 2, shape);
    av.memory = bv.memory = cv.memory = KJIT_MEMORY_DEVICE;
    kjit_arg args[3] = {kjit_arg_array(&av), kjit_arg_array(&bv), kjit_arg_array(&cv)};
    const uint32_t grid[3] = {(uint32_t)(n + 127) / 128, (uint32_t)(n + 127) / 128, 1};
    const uint32_t block[3] = {256, 1, 1};
    kjit_check(context, kjit_launch(fn, grid, block, args, 3, NULL), "launch");
}
#endif

// Template arguments: SHAPE (0: m8n8k4, 4/8/16: m16n8k4/k8/k16), BM, BN, BK,
// WM, WN, STAGES, ASYNC, VEC, GROUP, MINB (blocks an SM for __launch_bounds__).
static std::vector<Variant> variants()
{
    return {
        {"current", "bench_gpu.cu's matmul_tc (the .kern's twin, bounds checks)",
         (const void *)matmul_tc, 256, 1, 1, 1, 0, launch_current},
        {"current_k4", "current with m16n8k4 pairs (kjit on sm_90 since ptx_mma.c)",
         (const void *)matmul_tc16<0>, 256, 1, 1, 1, 0, launch_tc16<0>},
        {"k4_clamp", "current_k4, rows and columns clamped, k checked",
         (const void *)matmul_tc16<1>, 256, 1, 1, 1, 0, launch_tc16<1>},
        {"k4_clamp_inside", "k4_clamp, k tiles wholly inside unchecked (the .kern, bench_gpu.cu)",
         (const void *)matmul_tc16<2>, 256, 1, 1, 1, 0, launch_tc16<2>},
        make<0, 128, 128, 16, 64, 32, 1, false, false, 0, 1>("m8_s1", "current, no bounds checks"),
        make<0, 128, 128, 16, 64, 32, 2, false, false, 0, 1>("m8_s2", "m8n8k4, 2 stages by registers"),
        make<0, 128, 128, 16, 64, 32, 2, false, true, 0, 1>("m8_s2_v2", "m8_s2 + f64x2 loads"),
        make<0, 128, 128, 32, 64, 32, 2, false, false, 0, 1>("m8_s2_bk32", "m8_s2 with BK = 32"),
        make<0, 128, 128, 16, 64, 32, 2, false, false, 8, 1>("m8_s2_grp8", "m8_s2 + grouped block order"),
        make<0, 128, 64, 16, 64, 32, 2, false, false, 0, 2>("m8_s2_128x64", "m8_s2, 4 warps, 128 x 64 blocks"),
        make<0, 128, 128, 16, 32, 64, 2, false, false, 0, 1>("m8_s2_w32x64", "m8_s2, warp tile 32 x 64"),
        make<4, 128, 128, 16, 64, 32, 1, false, false, 0, 1>("k4_s1", "m16n8k4, else m8_s1"),
        make<4, 128, 128, 16, 64, 32, 2, false, false, 0, 1>("k4_s2", "m16n8k4, else m8_s2"),
        make<4, 128, 128, 16, 64, 32, 1, false, true, 0, 1>("k4_s1_v2", "k4_s1 + f64x2 loads"),
        make<4, 128, 128, 16, 64, 32, 2, false, true, 0, 1>("k4_s2_v2", "k4_s2 + f64x2 loads"),
        make<4, 128, 128, 16, 64, 32, 1, false, false, 8, 1>("k4_s1_grp8", "k4_s1 + grouped block order"),
        make<4, 128, 128, 16, 32, 64, 1, false, false, 0, 1>("k4_s1_w32x64", "k4_s1, warp tile 32 x 64"),
        make<8, 128, 128, 16, 64, 32, 1, false, false, 0, 1>("k8_s1", "m16n8k8, else m8_s1"),
        make<8, 128, 128, 16, 64, 32, 2, false, false, 0, 1>("k8_s2", "m16n8k8, else m8_s2"),
        make<8, 128, 128, 16, 64, 32, 2, false, true, 0, 1>("k8_s2_v2", "k8_s2 + f64x2 loads"),
        make<8, 128, 128, 32, 64, 32, 2, false, false, 0, 1>("k8_s2_bk32", "k8_s2 with BK = 32"),
        make<8, 128, 128, 16, 64, 32, 2, false, false, 8, 1>("k8_s2_grp8", "k8_s2 + grouped block order"),
        make<8, 128, 64, 16, 64, 32, 2, false, false, 0, 2>("k8_s2_128x64", "k8_s2, 4 warps, 128 x 64 blocks"),
        make<8, 128, 128, 16, 32, 64, 2, false, false, 0, 1>("k8_s2_w32x64", "k8_s2, warp tile 32 x 64"),
        make<0, 128, 128, 16, 32, 32, 2, false, false, 0, 1>("m8_s2_w32x32", "m8_s2, 16 warps of 32 x 32"),
        make<8, 128, 128, 16, 32, 32, 2, false, false, 0, 1>("k8_s2_w32x32", "k8_s2, 16 warps of 32 x 32"),
        make<16, 128, 128, 16, 64, 32, 1, false, false, 0, 1>("k16_s1", "m16n8k16, else m8_s1"),
        make<16, 128, 128, 16, 64, 32, 2, false, false, 0, 1>("k16_s2", "m16n8k16, else m8_s2"),
        make<16, 128, 128, 32, 64, 32, 2, false, false, 0, 1>("k16_s2_bk32", "k16_s2 with BK = 32"),
        make<0, 128, 128, 16, 64, 32, 3, true, true, 0, 1>("m8_async3", "m8n8k4, 3 cp.async stages"),
        make<4, 128, 128, 16, 64, 32, 3, true, true, 0, 1>("k4_async3", "m16n8k4, 3 cp.async stages"),
        make<8, 128, 128, 16, 64, 32, 3, true, true, 0, 1>("k8_async3", "m16n8k8, 3 cp.async stages"),
        make<8, 128, 128, 16, 64, 32, 4, true, true, 0, 1>("k8_async4", "m16n8k8, 4 cp.async stages"),
        make<8, 128, 128, 32, 64, 32, 3, true, true, 0, 1>("k8_async3_bk32", "k8_async3 with BK = 32"),
        make<8, 128, 128, 16, 32, 32, 3, true, true, 0, 1>("k8_async3_w32x32", "k8_async3, 16 warps of 32 x 32"),
        make<8, 128, 128, 16, 64, 32, 4, true, true, 8, 1>("k8_async4_grp8", "k8_async4 + grouped order"),
        make<16, 128, 128, 16, 64, 32, 4, true, true, 0, 1>("k16_async4", "m16n8k16, 4 cp.async stages"),
        make<16, 128, 128, 32, 64, 32, 3, true, true, 0, 1>("k16_async3_bk32", "m16n8k16, 3 stages, BK = 32"),
#ifdef KJIT_VARIANT
        {"kjit", "tests/bench/matmul_tc.kern through libkjit (its PTX: m16n8k4 pairs)", nullptr, 256,
         1, 1, 1, 0, launch_kjit},
#endif
        {"cublas", "cublasDgemm", nullptr, 0, 1, 1, 1, 0, nullptr},
    };
}

// ------------------------------------------------------------- the driver

static double rel_err_vs(const std::vector<double> &got, const std::vector<double> &want)
{
    double worst = 0;
    for (size_t e = 0; e < got.size(); e++) {
        double d = std::fabs(got[e] - want[e]) / std::fabs(want[e]);
        if (!(d <= worst)) // NaN counts as the worst
            worst = std::isnan(d) ? INFINITY : d;
    }
    return worst;
}

int main(int argc, char **argv)
{
    std::vector<Variant> all = variants();
    if (argc >= 2 && !std::strcmp(argv[1], "list")) {
        for (const Variant &v : all)
            std::printf("%s\t%s\n", v.name, v.what);
        return 0;
    }
    if (argc < 3 || std::strcmp(argv[1], "run")) {
        std::fprintf(stderr, "usage: %s list | run NAME [N]\n", argv[0]);
        return 2;
    }
    const Variant *var = nullptr;
    for (const Variant &v : all)
        if (!std::strcmp(v.name, argv[2]))
            var = &v;
    if (!var) {
        std::fprintf(stderr, "matmul_tc_variants: no variant %s\n", argv[2]);
        return 2;
    }
    const int n = argc > 3 ? std::atoi(argv[3]) : 4096;
    if (n <= 0) {
        std::fprintf(stderr, "matmul_tc_variants: N must be positive\n");
        return 2;
    }
    const size_t count = (size_t)n * n;

    std::vector<double> ha(count), hb(count);
    unsigned long long state = 88172645463325252ull;
    auto uniform = [&] { // xorshift64: uniform in [0, 1)
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return (state >> 11) * (1.0 / 9007199254740992.0);
    };
    for (double &x : ha)
        x = uniform();
    for (double &x : hb)
        x = uniform();
    double *a, *b, *c, *ref;
    CHECK(cudaMalloc(&a, count * sizeof(double)));
    CHECK(cudaMalloc(&b, count * sizeof(double)));
    CHECK(cudaMalloc(&c, count * sizeof(double)));
    CHECK(cudaMalloc(&ref, count * sizeof(double)));
    CHECK(cudaMemcpy(a, ha.data(), count * sizeof(double), cudaMemcpyHostToDevice));
    CHECK(cudaMemcpy(b, hb.data(), count * sizeof(double), cudaMemcpyHostToDevice));

    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "matmul_tc_variants: cublasCreate failed\n");
        return 1;
    }
    // Row-major C = A B is column-major C^T = B^T A^T.
    auto cublas = [&](double *out) {
        const double one = 1, zero = 0;
        cublasStatus_t s = cublasDgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, b, n, a, n,
                                       &zero, out, n);
        if (s != CUBLAS_STATUS_SUCCESS) {
            std::fprintf(stderr, "matmul_tc_variants: cublasDgemm: status %d\n", (int)s);
            std::exit(1);
        }
    };
    cublas(ref);
    CHECK(cudaDeviceSynchronize());

    int regs = 0, local = 0;
    size_t smem = 0;
    std::function<void()> run = [&] { cublas(c); };
    if (var->func) { // the kjit row's kernel is libkjit's own: no attributes here
        cudaFuncAttributes attr;
        CHECK(cudaFuncGetAttributes(&attr, var->func));
        regs = attr.numRegs;
        local = (int)attr.localSizeBytes;
        smem = attr.sharedSizeBytes + var->smem;
        if (var->smem > 48 * 1024)
            CHECK(cudaFuncSetAttribute(var->func, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)var->smem));
    }
    if (var->launch)
        run = [&] { var->launch(a, b, c, n); };
    if (n % var->bm || n % var->bn || n % var->bk) {
        std::fprintf(stderr, "matmul_tc_variants: %s needs N a multiple of its tiles\n", var->name);
        return 2;
    }

    CHECK(cudaMemset(c, 0xff, count * sizeof(double))); // NaN: an element not written shows
    run();
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    std::vector<double> got(count), want(count);
    CHECK(cudaMemcpy(got.data(), c, count * sizeof(double), cudaMemcpyDeviceToHost));
    CHECK(cudaMemcpy(want.data(), ref, count * sizeof(double), cudaMemcpyDeviceToHost));
    double err_cublas = rel_err_vs(got, want);
    // Against long double sums, and bit for bit against the fma chain the
    // cpu targets compute for mma() (docs/language.md: from 0.0, k = 0, 1,
    // ... in order, each fma rounded once).
    double err_ref = 0;
    int chain_same = 0;
    for (int s = 0; s < 64; s++) {
        size_t e = (size_t)s * 1000003 % count;
        size_t i = e / n, j = e % n;
        long double sum = 0;
        double chain = 0;
        for (int k = 0; k < n; k++) {
            sum += (long double)ha[i * n + k] * hb[(size_t)k * n + j];
            chain = std::fma(ha[i * n + k], hb[(size_t)k * n + j], chain);
        }
        double d = (double)(std::fabs((long double)got[e] - sum) / sum);
        if (!(d <= err_ref))
            err_ref = std::isnan(d) ? INFINITY : d;
        chain_same += std::memcmp(&chain, &got[e], sizeof chain) == 0;
    }
    // Bit for bit against "current" (mma.sync m8n8k4 over k in steps of 4,
    // in order; any N), in every element: whether another instruction shape
    // rounds as a chain of m8n8k4 does.
    long m8_same = 0;
    {
        const Variant *m8 = nullptr;
        for (const Variant &v : all)
            if (!std::strcmp(v.name, "current"))
                m8 = &v;
        CHECK(cudaMemset(ref, 0xff, count * sizeof(double)));
        m8->launch(a, b, ref, n);
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaMemcpy(want.data(), ref, count * sizeof(double), cudaMemcpyDeviceToHost));
        for (size_t e = 0; e < count; e++)
            m8_same += std::memcmp(&got[e], &want[e], sizeof(double)) == 0;
    }

    // 3 warm-ups, then 5 rounds of 10 launches between two events; the
    // median round's time a launch.
    for (int w = 0; w < 3; w++)
        run();
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t start, stop;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    std::vector<float> rounds;
    for (int r = 0; r < 5; r++) {
        CHECK(cudaEventRecord(start));
        for (int l = 0; l < 10; l++)
            run();
        CHECK(cudaEventRecord(stop));
        CHECK(cudaEventSynchronize(stop));
        float ms;
        CHECK(cudaEventElapsedTime(&ms, start, stop));
        rounds.push_back(ms / 10);
    }
    CHECK(cudaGetLastError());
    std::sort(rounds.begin(), rounds.end());
    double ms = rounds[rounds.size() / 2];
    double tflops = 2.0 * n * n * (double)n / (ms * 1e-3) / 1e12;
    std::printf("%s %.4f %.2f %.3g %.3g %d %d %zu %d %.4f\n", var->name, ms, tflops, err_cublas, err_ref,
                regs, local, smem, chain_same, 100.0 * m8_same / count);
    cublasDestroy(handle);
    return 0;
}
