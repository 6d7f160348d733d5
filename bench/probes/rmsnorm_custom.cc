// Fused RMSNorm for MindSpore's CPU AOT custom operators: y = w * x / sqrt(mean(x^2) + eps), and its gradient.
#include <cmath>
#include <cstdint>
#include <cstring>
static inline int64_t numel(int nd, const int64_t *s) { int64_t n = 1; for (int i = 0; i < nd; ++i) n *= s[i]; return n; }

extern "C" int RmsFwd(int nparam, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  if (nparam != 4) return 1;
  const float *x = static_cast<const float *>(params[0]), *w = static_cast<const float *>(params[1]);
  const float eps = *static_cast<const float *>(params[2]);
  float *y = static_cast<float *>(params[3]);
  const int64_t D = shapes[0][ndims[0] - 1], n = numel(ndims[0], shapes[0]) / D;
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D; float *yr = y + i * D;
    float ss = 0.f;
    _Pragma("omp simd reduction(+:ss)") for (int64_t j = 0; j < D; ++j) ss += xr[j] * xr[j];
    const float r = 1.f / std::sqrt(ss / D + eps);
    for (int64_t j = 0; j < D; ++j) yr[j] = w[j] * (xr[j] * r);
  }
  return 0;
}

// inputs x [n, D], w [D], dy [n, D], eps [1]; outputs dx [n, D], dw [D]
extern "C" int RmsBwd(int nparam, void **params, int *ndims, int64_t **shapes, const char **, void *, void *) {
  if (nparam != 6) return 1;
  const float *x = static_cast<const float *>(params[0]), *w = static_cast<const float *>(params[1]);
  const float *dy = static_cast<const float *>(params[2]);
  const float eps = *static_cast<const float *>(params[3]);
  float *dx = static_cast<float *>(params[4]), *dw = static_cast<float *>(params[5]);
  const int64_t D = shapes[0][ndims[0] - 1], n = numel(ndims[0], shapes[0]) / D;
  std::memset(dw, 0, sizeof(float) * D);
  for (int64_t i = 0; i < n; ++i) {
    const float *xr = x + i * D, *gr = dy + i * D; float *dxr = dx + i * D;
    float ss = 0.f;
    _Pragma("omp simd reduction(+:ss)") for (int64_t j = 0; j < D; ++j) ss += xr[j] * xr[j];
    const float r = 1.f / std::sqrt(ss / D + eps);
    float dot = 0.f;
    _Pragma("omp simd reduction(+:dot)") for (int64_t j = 0; j < D; ++j) { const float xn = xr[j] * r; dot += gr[j] * w[j] * xn; dw[j] += gr[j] * xn; }
    const float c = dot / D;
    for (int64_t j = 0; j < D; ++j) dxr[j] = r * (gr[j] * w[j] - xr[j] * r * c);
  }
  return 0;
}
