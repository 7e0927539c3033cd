// ksol's per-column bias for CUTLASS 3.x sm_90 TMA warp-specialized epilogues, loaded ahead of
// time by the epilogue's producer load warp.
//
// CUTLASS's row broadcast (Sm90RowBroadcast) loads a tile's bias from global memory when the
// consumer warpgroups start the tile's epilogue, then synchronizes them: every tile pays a
// global-memory round trip and a barrier while the tensor cores wait. This node is a leaf of an
// epilogue visitor tree (Sm90EVT) that asks for the producer load warp instead
// (is_producer_load_needed). That warp walks the same subtiles as the consumers, one pipeline stage
// per subtile, while the consumers are still in the tile's mainloop: for each subtile it copies the
// subtile's EpiN bias values into the stage's slice of shared memory and arrives on the stage's
// barrier (the epilogue's PipelineTransactionAsync: each producer thread arrives, with release
// semantics). The consumers wait on that barrier as they do for C, read their columns of the slice
// into registers in previsit, and release the stage. The C load is not asked for (is_C_load_needed
// is false), so a program without C moves no C.
//
// Stages and EpilogueTile must be the epilogue's own (CUTLASS's EpilogueDescriptor gives both); the
// generated code asserts it against the built collective.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/cutlass.h>
#include <cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp>

namespace ksol::cutlass_ext {

template <int Stages, class EpilogueTile, class ElementBias, class ElementCompute>
struct Sm90RowBiasPrefetch {
  static_assert(Stages >= 1, "the epilogue's load pipeline has at least one stage");
  static constexpr int kEpiN = int(cute::size<1>(EpilogueTile{}));
  // A producer lane copies the elements lane, lane + 32, ... of a subtile's slice.
  static constexpr int kPerLane = (kEpiN + 31) / 32;

  struct SharedStorage {
    alignas(16) cute::array_aligned<ElementBias, Stages * kEpiN> smem;
  };

  struct Arguments {
    ElementBias const* ptr_bias = nullptr;
  };
  using Params = Arguments;

  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) {
    return args;
  }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) {
    return true;  // no shape limits; the bias pointer is the caller's (the generated launcher passes the ABI's)
  }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) {
    return 0;
  }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }

  CUTLASS_HOST_DEVICE Sm90RowBiasPrefetch() {}
  CUTLASS_HOST_DEVICE Sm90RowBiasPrefetch(Params const& params, SharedStorage const& storage)
      : params(params), smem(const_cast<ElementBias*>(storage.smem.data())) {}

  Params params;
  ElementBias* smem = nullptr;

  CUTLASS_DEVICE bool is_producer_load_needed() const { return true; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_zero() const { return false; }

  // The producer load warp's side: one call of step per subtile, after the stage is acquired and
  // before the warp's arrivals commit it.
  struct ProducerLoadCallbacks : cutlass::epilogue::fusion::EmptyProducerLoadCallbacks {
    CUTLASS_DEVICE ProducerLoadCallbacks(ElementBias const* bias, ElementBias* smem, int tile_n0, int n)
        : bias(bias), smem(smem), tile_n0(tile_n0), n(n) {}
    ElementBias const* bias;
    ElementBias* smem;
    int tile_n0;  // the tile's first column
    int n;        // the problem's N: columns at or past it read as 0

    CUTLASS_DEVICE void step(uint64_t*, int, int epi_n, int load_iteration, bool) {
      ElementBias* slice = smem + (load_iteration % Stages) * kEpiN;
      const int lane = int(threadIdx.x % 32);
      const int first = tile_n0 + epi_n * kEpiN;
      CUTLASS_PRAGMA_UNROLL
      for (int j = 0; j < kPerLane; ++j) {
        const int i = lane + 32 * j;
        if (i < kEpiN) slice[i] = first + i < n ? bias[first + i] : ElementBias(0);
      }
    }
  };

  template <class... Args>
  CUTLASS_DEVICE auto get_producer_load_callbacks(cutlass::epilogue::fusion::ProducerLoadArgs<Args...> const& args) {
    const int n = int(cute::get<1>(args.problem_shape_mnkl));
    const int tile_n0 = int(cute::get<1>(args.tile_coord_mnkl)) * int(cute::size<1>(args.tile_shape_mnk));
    return ProducerLoadCallbacks(params.ptr_bias, smem, tile_n0, n);
  }

  // The consumers' side. tSR_sBias: the thread's elements of a subtile, as offsets into stage 0's
  // slice (CPY, CPY_M, CPY_N, EPI_M, EPI_N; stride 0 along M); tSR_rBias: those of the current
  // subtile in registers, with the same broadcast modes.
  template <class STensor, class RTensor>
  struct ConsumerStoreCallbacks : cutlass::epilogue::fusion::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(STensor s, RTensor r) : tSR_sBias(s), tSR_rBias(r) {}
    STensor tSR_sBias;
    RTensor tSR_rBias;

    CUTLASS_DEVICE void previsit(int epi_m, int epi_n, int load_iteration, bool) {
      auto sub = tSR_sBias(cute::_, cute::_, cute::_, epi_m, epi_n);
      auto staged = cute::make_tensor(sub.data() + (load_iteration % Stages) * kEpiN, sub.layout());
      auto src = cute::filter_zeros(staged);
      auto dst = cute::filter_zeros(tSR_rBias);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < int(cute::size(src)); ++i) dst(i) = ElementCompute(src(i));
    }

    template <class ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<ElementCompute, FragmentSize> visit(
        cutlass::Array<ElementAccumulator, FragmentSize> const&, int epi_v, int, int) {
      cutlass::Array<ElementCompute, FragmentSize> r;
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) r[i] = tSR_rBias(epi_v * FragmentSize + i);
      return r;
    }
  };

  template <bool ReferenceSrc, class... Args>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(cutlass::epilogue::fusion::ConsumerStoreArgs<Args...> const& args) {
    using namespace cute;
    constexpr int kCtaM = int(size<0>(decltype(args.tile_shape_mnk){}));
    constexpr int kCtaN = int(size<1>(decltype(args.tile_shape_mnk){}));
    static_assert(kCtaN % kEpiN == 0, "the epilogue subtile's N divides the tile's");
    static_assert(int(size<1>(decltype(args.epi_tile){})) == kEpiN, "EpilogueTile is the epilogue's own");
    // Column n of the tile is element n % kEpiN of a slice; every row reads the same.
    auto layout = make_layout(make_shape(Int<kCtaM>{}, make_shape(Int<kEpiN>{}, Int<kCtaN / kEpiN>{})),
                              make_stride(_0{}, make_stride(_1{}, _0{})));
    Tensor sBias = make_tensor(make_smem_ptr(smem), layout);
    Tensor tSR_sBias = cutlass::epilogue::fusion::sm90_partition_for_epilogue<ReferenceSrc>(
        sBias, args.epi_tile, args.tiled_copy, args.thread_idx);
    Tensor tSR_rBias = make_tensor_like<ElementCompute>(take<0, 3>(tSR_sBias));
    return ConsumerStoreCallbacks<decltype(tSR_sBias), decltype(tSR_rBias)>(tSR_sBias, tSR_rBias);
  }
};

}  // namespace ksol::cutlass_ext
