"""CUDA C++ sources of the TMA, texture and surface kernels used by the tests and the docs."""

from __future__ import annotations

# A 2-D TMA copy: one thread issues cp.async.bulk.tensor for a TILE_H x TILE_W tile at
# (x0, y0) into shared memory, completing on an mbarrier; then the block stores the tile.
TMA_COPY = r"""
struct alignas(64) TensorMap { unsigned long long opaque[16]; };   // CUtensorMap

template <int TILE_H, int TILE_W>
__global__ void tma_copy(const __grid_constant__ TensorMap tmap, float* out, int x0, int y0) {
    __shared__ alignas(128) float tile[TILE_H * TILE_W];
    __shared__ alignas(8) unsigned long long bar;
    unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned tile_addr = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bar_addr), "r"((unsigned)sizeof(tile)) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2, %3}], [%4];"
            :: "r"(tile_addr), "l"((unsigned long long)&tmap), "r"(x0), "r"(y0), "r"(bar_addr)
            : "memory");
    }
    __syncthreads();
    asm volatile(
        "{\n .reg .pred done;\n"
        "WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
        " @!done bra WAIT_%=;\n}\n" :: "r"(bar_addr) : "memory");
    for (int i = threadIdx.x; i < TILE_H * TILE_W; i += blockDim.x) out[i] = tile[i];
}
"""

# The same for a rank-1 tensor map: one TILE-element tile starting at element x0.
TMA_COPY_1D = r"""
struct alignas(64) TensorMap { unsigned long long opaque[16]; };   // CUtensorMap

template <int TILE>
__global__ void tma_copy_1d(const __grid_constant__ TensorMap tmap, float* out, int x0) {
    __shared__ alignas(128) float tile[TILE];
    __shared__ alignas(8) unsigned long long bar;
    unsigned bar_addr = (unsigned)__cvta_generic_to_shared(&bar);
    unsigned tile_addr = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;"
                     :: "r"(bar_addr), "r"((unsigned)sizeof(tile)) : "memory");
        asm volatile(
            "cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%0], [%1, {%2}], [%3];"
            :: "r"(tile_addr), "l"((unsigned long long)&tmap), "r"(x0), "r"(bar_addr)
            : "memory");
    }
    __syncthreads();
    asm volatile(
        "{\n .reg .pred done;\n"
        "WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
        " @!done bra WAIT_%=;\n}\n" :: "r"(bar_addr) : "memory");
    for (int i = threadIdx.x; i < TILE; i += blockDim.x) out[i] = tile[i];
}
"""

# Sample a 2-D float texture at n (x, y) points.
TEX_SAMPLE = r"""
extern "C" __global__ void sample2d(cudaTextureObject_t tex, const float* xs, const float* ys,
                                    float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex2D<float>(tex, xs[i], ys[i]);
}
"""

# Write value y * w + x + bias into every texel of a w x h float surface.
SURF_WRITE = r"""
extern "C" __global__ void surf_fill(cudaSurfaceObject_t surf, int w, int h, float bias) {
    int x = blockIdx.x * blockDim.x + threadIdx.x;
    int y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x < w && y < h) surf2Dwrite(float(y * w + x) + bias, surf, x * (int)sizeof(float), y);
}
"""

# Fetch n floats from a linear (1-D, typed) texture.
TEX_FETCH1D = r"""
extern "C" __global__ void fetch1d(cudaTextureObject_t tex, float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = tex1Dfetch<float>(tex, i);
}
"""
