// ksol's stand-in for CUTLASS's tools/util/include/cutlass/util/packed_stride.hpp.
//
// CUTLASS's sm90 implicit-GEMM conv mainloop
// (cutlass/conv/collective/sm90_implicit_gemm_gmma_ss_warpspecialized.hpp) includes
// "cutlass/util/packed_stride.hpp" and calls make_cute_packed_stride(StrideA{}, stride_A, op) and
// the same for B. That header lives in CUTLASS's tools/ tree, which the nvidia-cutlass wheel that
// setup.sh unpacks does not ship (only include/). This header gives the two overloads a forward
// (fprop) conv needs, written by ksol from the stride conventions of
// cutlass/conv/collective/detail.hpp; generated GEMM sources do not include it. ksol compiles
// with -I include before CUTLASS's include tree, so this file is the one found.
//
// The flat strides arrive in the tensors' own order: the activation [N, (D,) (H,) W, C], the
// filter [K, (T,) (R,) S, C]. CuTe's stride tuples list the spatial modes reversed (w first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "cute/container/array.hpp"
#include "cute/layout.hpp"
#include "cutlass/conv/convolution.h"

namespace cutlass {
namespace ksol_packed_stride {

// ((w, h, d, n), _1): inner mode i takes the flat stride st[R - 2 - i] (R: the rank with N and C).
template <class Inner, class IntT, std::size_t R, std::size_t... I>
CUTLASS_HOST_DEVICE void reversed(Inner& inner, cute::array<IntT, R> const& st, std::index_sequence<I...>) {
  ((cute::get<I>(inner) = st[R - 2 - I]), ...);
}

// (_1, s, r, t): inner mode j + 1 takes the flat stride st[R - 2 - j].
template <class Inner, class IntT, std::size_t R, std::size_t... J>
CUTLASS_HOST_DEVICE void taps(Inner& inner, cute::array<IntT, R> const& st, std::index_sequence<J...>) {
  ((cute::get<J + 1>(inner) = st[R - 2 - J]), ...);
}

}  // namespace ksol_packed_stride

// Forward conv, A (the activation): ((w, h, d, n), _1).
template <class... IntTs, class IntT, std::size_t R>
CUTLASS_HOST_DEVICE cute::Stride<cute::Stride<IntTs...>, cute::Int<1>> make_cute_packed_stride(
    cute::Stride<cute::Stride<IntTs...>, cute::Int<1>> s, cute::array<IntT, R> const& st, conv::Operator) {
  static_assert(sizeof...(IntTs) == R - 1, "stride rank mismatch");
  ksol_packed_stride::reversed(cute::get<0>(s), st, std::make_index_sequence<R - 1>{});
  return s;
}

// Forward conv, B (the filter [K, (T,) (R,) S, C]): (k, (_1, s, r, t)).
template <class IntK, class... IntTs, class IntT, std::size_t R>
CUTLASS_HOST_DEVICE cute::Stride<IntK, cute::Stride<cute::Int<1>, IntTs...>> make_cute_packed_stride(
    cute::Stride<IntK, cute::Stride<cute::Int<1>, IntTs...>> s, cute::array<IntT, R> const& st, conv::Operator) {
  static_assert(sizeof...(IntTs) == R - 2, "stride rank mismatch");
  cute::get<0>(s) = st[0];
  ksol_packed_stride::taps(cute::get<1>(s), st, std::make_index_sequence<R - 2>{});
  return s;
}

}  // namespace cutlass
