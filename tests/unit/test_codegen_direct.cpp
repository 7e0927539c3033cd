// The direct family (src/codegen/direct.cpp): which programs are direct, the interpreter's meaning
// of divided indices and `outside -inf` by hand, every program generated and run on the CPU by the
// host emulation against the interpreter, and the generated sources through nvcc.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "codegen/interpret.h"
#include "compile/compiler.h"
#include "dsl/ir.h"
#include "task/inputs.h"
#include "task/task.h"

using namespace ksol;

namespace {

dsl::Program parse(const std::string& t) { return dsl::parse_program(t, "test.ksol"); }

std::string refusal(const dsl::Program& p) {
  codegen::Support s = codegen::can_implement(p, {});
  return s.ok ? "(accepted)" : s.reason;
}

struct Case {
  const char* name;
  const char* program;
  std::map<std::string, int64_t> dims;
};

// 3-D convolution with a bias; a transposed 1-D convolution (stride 2, padding 1, dilation 2);
// a transposed 2-D one (stride 2, padding 1) with an epilogue; a grouped 2-D convolution through
// 5-D views; max pools padded with -inf (2-D, 3-D); an average pool (padding counted, as
// PyTorch's default); a depthwise convolution and a max pool whose reads all stay inside (the
// kernel without bounds checks), the same pool with a ceil-mode row past the image (checked); an argmax over the middle index, converted to i64; a min over two indices.
const std::vector<Case> kCases = {
    {"conv3d",
     "kernel conv3d(X: f32[N, C, D, H, W] outside 0, F: f32[K, C, T, R, S], b: f32[K]) -> (Y: f32[N, K, O, P, Q]) {\n"
     "  acc[n, k, d, h, w] = sum(X[n, c, d+t-1, h*2+r-1, w+s*2-2] * F[k, c, t, r, s]) over c, t, r, s\n"
     "  Y[n, k, d, h, w] = acc[n, k, d, h, w] + b[k]\n}\n",
     {{"N", 2}, {"C", 3}, {"D", 4}, {"H", 5}, {"W", 6}, {"K", 2}, {"T", 3}, {"R", 3}, {"S", 2}, {"O", 4}, {"P", 3}, {"Q", 4}}},
    {"conv_transpose1d",
     "kernel convt1d(X: f32[N, C, L] outside 0, F: f32[C, K, S]) -> (Y: f32[N, K, Q]) {\n"
     "  Y[n, k, w] = sum(X[n, c, (w-s*2+1)/2] * F[c, k, s]) over c, s\n}\n",
     {{"N", 2}, {"C", 3}, {"L", 5}, {"K", 4}, {"S", 3}, {"Q", 11}}},
    {"conv_transpose2d",
     "kernel convt2d(X: f32[N, C, H, W] outside 0, F: f32[C, K, R, S], b: f32[K]) -> (Y: f32[N, K, P, Q]) {\n"
     "  acc[n, k, h, w] = sum(X[n, c, (h-r+1)/2, (w-s+1)/2] * F[c, k, r, s]) over c, r, s\n"
     "  Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k])\n}\n",
     {{"N", 1}, {"C", 2}, {"H", 3}, {"W", 4}, {"K", 3}, {"R", 3}, {"S", 3}, {"P", 5}, {"Q", 8}}},
    {"grouped",
     "kernel grouped(X: f32[N, G, C, H, W] outside 0, F: f32[G, K, C, R, S], b: f32[G, K]) -> (Y: f32[N, G, K, P, Q]) {\n"
     "  acc[n, g, k, h, w] = sum(X[n, g, c, h+r-1, w+s-1] * F[g, k, c, r, s]) over c, r, s\n"
     "  Y[n, g, k, h, w] = acc[n, g, k, h, w] + b[g, k]\n}\n",
     {{"N", 2}, {"G", 3}, {"C", 1}, {"H", 4}, {"W", 5}, {"K", 2}, {"R", 3}, {"S", 3}, {"P", 4}, {"Q", 5}}},
    {"max_pool2d",
     "kernel maxpool(X: f32[N, C, H, W] outside -inf) -> (Y: f32[N, C, P, Q]) {\n"
     "  Y[n, c, h, w] = max(X[n, c, h*2+r-1, w*2+s-1]) over r:3, s:3\n}\n",
     {{"N", 2}, {"C", 3}, {"H", 7}, {"W", 6}, {"P", 4}, {"Q", 3}}},
    {"max_pool3d",
     "kernel maxpool3(X: f32[N, C, D, H, W] outside -inf) -> (Y: f32[N, C, O, P, Q]) {\n"
     "  Y[n, c, d, h, w] = max(X[n, c, d*2+t, h*2+r*2-1, w+s]) over t:2, r:2, s:2\n}\n",
     {{"N", 1}, {"C", 2}, {"D", 5}, {"H", 6}, {"W", 4}, {"O", 2}, {"P", 3}, {"Q", 3}}},
    {"avg_pool2d",
     "kernel avgpool(X: f32[N, C, H, W] outside 0) -> (Y: f32[N, C, P, Q]) {\n"
     "  Y[n, c, h, w] = mean(X[n, c, h*2+r-1, w*2+s-1]) over r:3, s:3\n}\n",
     {{"N", 2}, {"C", 2}, {"H", 5}, {"W", 6}, {"P", 3}, {"Q", 3}}},
    {"depthwise_valid",
     "kernel dw_valid(X: f32[N, G, C, H, W] outside 0, F: f32[G, K, C, R, S]) -> (Y: f32[N, G, K, P, Q]) {\n"
     "  Y[n, g, k, h, w] = sum(X[n, g, c, h+r, w+s] * F[g, k, c, r, s]) over c, r, s\n}\n",
     {{"N", 2}, {"G", 3}, {"C", 1}, {"H", 5}, {"W", 7}, {"K", 1}, {"R", 2}, {"S", 3}, {"P", 4}, {"Q", 5}}},
    {"max_pool_inside",
     "kernel maxpool_in(X: f32[N, C, H, W] outside -inf) -> (Y: f32[N, C, P, Q]) {\n"
     "  Y[n, c, h, w] = max(X[n, c, h*2+r, w*2+s]) over r:2, s:2\n}\n",
     {{"N", 2}, {"C", 2}, {"H", 5}, {"W", 5}, {"P", 2}, {"Q", 2}}},
    {"max_pool_ceil",
     "kernel maxpool_in(X: f32[N, C, H, W] outside -inf) -> (Y: f32[N, C, P, Q]) {\n"
     "  Y[n, c, h, w] = max(X[n, c, h*2+r, w*2+s]) over r:2, s:2\n}\n",
     {{"N", 2}, {"C", 2}, {"H", 5}, {"W", 5}, {"P", 3}, {"Q", 2}}},
    {"max_pool_channels_last",
     "kernel pool_nhwc(X: f32[N, H, W, C] outside -inf, b: f32[C]) -> (Y: f32[N, C, P, Q]) {\n"
     "  acc[n, c, h, w] = max(X[n, h*2+r-1, w*2+s-1, c] + b[c]) over r:3, s:3\n"
     "  Y[n, c, h, w] = tanh(acc[n, c, h, w])\n}\n",
     {{"N", 2}, {"H", 7}, {"W", 6}, {"C", 3}, {"P", 4}, {"Q", 3}}},
    {"argmax",
     "kernel argmax_mid(X: f32[B, R, C]) -> (Y: i64[B, C]) {\n"
     "  am[b, c] = argmax(X[b, r, c]) over r\n"
     "  Y[b, c] = i64(am[b, c])\n}\n",
     {{"B", 3}, {"R", 7}, {"C", 5}}},
    {"min_two",
     "kernel min_two(X: f32[B, R, S, C]) -> (Y: f32[B, C]) {\n"
     "  Y[b, c] = min(X[b, r, s, c]) over r, s\n}\n",
     {{"B", 2}, {"R", 3}, {"S", 4}, {"C", 5}}},
    // More channels than one tile of order = tiles (8) and a last extent not a multiple of 4.
    {"max_pool_channels_last_wide",
     "kernel pool_nhwc_wide(X: f32[N, H, W, C] outside -inf, b: f32[C]) -> (Y: f32[N, C, P, Q]) {\n"
     "  acc[n, c, h, w] = max(X[n, h*2+r-1, w*2+s-1, c] + b[c]) over r:3, s:3\n"
     "  Y[n, c, h, w] = tanh(acc[n, c, h, w])\n}\n",
     {{"N", 2}, {"H", 9}, {"W", 11}, {"C", 19}, {"P", 5}, {"Q", 6}}},
    // More than one 32-wide tile of the channel and of the output's last index (order = staged).
    {"max_pool_channels_last_tiles",
     "kernel pool_nhwc_tiles(X: f32[N, H, W, C] outside -inf, b: f32[C]) -> (Y: f32[N, C, P, Q]) {\n"
     "  acc[n, c, h, w] = max(X[n, h*2+r-1, w*2+s-1, c] + b[c]) over r:3, s:3\n"
     "  Y[n, c, h, w] = tanh(acc[n, c, h, w])\n}\n",
     {{"N", 1}, {"H", 3}, {"W", 69}, {"C", 37}, {"P", 2}, {"Q", 35}}},
};

}  // namespace

TEST(CodegenDirect, RecognisesAcceptsAndNames) {
  for (const Case& c : kCases) {
    dsl::Program p = parse(c.program);
    EXPECT_EQ(p.family, "direct") << c.name;
    EXPECT_EQ(refusal(p), "(accepted)") << c.name;
  }
  dsl::Program p = parse(kCases[1].program);
  EXPECT_EQ(codegen::kernel_name(p), "direct_convt1d_f32_t256");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(p, {{"threads", "128"}})), "direct_convt1d_f32_t128");
  EXPECT_EQ(refusal(codegen::with_schedule(p, {{"split_k", "2"}})),
            "unknown schedule key 'split_k' for the direct family; it accepts threads, mainloop, tile, thread_tile, stages, "
            "fragments, items, order");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(p, {{"items", "4"}})), "direct_convt1d_f32_t256_i4");
  EXPECT_EQ(refusal(codegen::with_schedule(p, {{"items", "3"}})), "items = 3 must be one of 1, 2, 4, 8");
  // f32 products: the thread-per-output kernel; the tensor cores' knobs are refused with why.
  EXPECT_EQ(refusal(codegen::with_schedule(p, {{"mainloop", "mma"}})),
            "mainloop = mma: the program asks for f32 products, and the tensor cores take f32 data only as TF32 (write "
            "tf32(...) around both reads); use mainloop = loop");
  EXPECT_EQ(refusal(codegen::with_schedule(p, {{"tile", "[64, 64, 32]"}})),
            "tile = [64, 64, 32]: the mma kernel's; mainloop = loop runs a thread per output (leave tile [128, 128, 16] and "
            "thread_tile [4, 2])");
  // order: a channels-last image's pool takes its channel fastest (auto, one output a thread), or
  // the output's last index (order = last); elsewhere order = image is the same kernel, refused.
  dsl::Program nhwc = parse(kCases[10].program);
  EXPECT_EQ(codegen::kernel_name(nhwc), "direct_pool_nhwc_f32_t256_o1");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(nhwc, {{"order", "last"}})), "direct_pool_nhwc_f32_t256");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(nhwc, {{"items", "2"}})), "direct_pool_nhwc_f32_t256_i2");
  EXPECT_EQ(refusal(codegen::with_schedule(nhwc, {{"order", "image"}, {"items", "2"}})),
            "order = image: one output a thread (items 1); items > 1 takes consecutive outputs along the last index");
  EXPECT_NE(codegen::generate_cuda(nhwc, {}).find("c fastest (order = image)"), std::string::npos);
  // order = tiles: the channel and the output's last index in 8 x 4 tiles.
  const dsl::Program tiled = codegen::with_schedule(nhwc, {{"order", "tiles"}});
  EXPECT_EQ(codegen::kernel_name(tiled), "direct_pool_nhwc_f32_t256_ot1");
  EXPECT_NE(codegen::generate_cuda(tiled, {}).find("c and w in 8 x 4 tiles (order = tiles)"), std::string::npos);
  EXPECT_NE(codegen::generate_cuda(tiled, {}).find("((C + 7) / 8) * 8"), std::string::npos);  // the host's total
  // order = staged: 32 x 32 tiles of them, the outputs through shared memory.
  const dsl::Program staged = codegen::with_schedule(nhwc, {{"order", "staged"}});
  EXPECT_EQ(codegen::kernel_name(staged), "direct_pool_nhwc_f32_t256_os1");
  EXPECT_NE(codegen::generate_cuda(staged, {}).find("((C + 31) / 32) * 32"), std::string::npos);  // the host's total
  EXPECT_EQ(refusal(codegen::with_schedule(nhwc, {{"order", "staged"}, {"items", "4"}})),
            "order = staged: one output a thread (items 1); items > 1 takes consecutive outputs along the last index");
  EXPECT_EQ(refusal(codegen::with_schedule(nhwc, {{"order", "staged"}, {"threads", "96"}})),
            "order = staged: its 32 x 32 tile takes 32, 64, 128, 256, 512 or 1024 threads (threads = 96 does not divide it "
            "into whole rows)");
  EXPECT_EQ(refusal(codegen::with_schedule(nhwc, {{"order", "tiles"}, {"items", "2"}})),
            "order = tiles: one output a thread (items 1); items > 1 takes consecutive outputs along the last index");
  EXPECT_EQ(refusal(codegen::with_schedule(parse(kCases[4].program), {{"order", "tiles"}})),
            "order = tiles: the image's contiguous index does not read an output index other than the last (order = last "
            "reads and stores along the last already)");
  EXPECT_EQ(refusal(codegen::with_schedule(parse(kCases[4].program), {{"order", "image"}})),
            "order = image: the image's contiguous index does not read an output index other than the last (order = last "
            "is the same kernel)");
  // A schedule names every knob: the loop kernel's space is its thread counts times its outputs per
  // thread, at the mma knobs' defaults (order = image refused here: the same kernel as last).
  codegen::Space space = codegen::schedule_space(p, {});
  EXPECT_EQ(space.legal.size(), 16u);
  for (const codegen::Schedule& sch : space.legal)
    EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(p, sch)).find("_mma_"), std::string::npos);
  // The conv family keeps its 2-D convolution; the text forms print the new indices back.
  EXPECT_EQ(parse("kernel c(X: f32[N, C, H, W] outside 0, F: f32[K, C, 3, 3]) -> (Y: f32[N, K, H, W]) {\n"
                  "  Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s\n}\n")
                .family,
            "conv");
  EXPECT_NE(dsl::print_source(parse(kCases[1].program)).find("X[n, c, (w-s*2+1)/2]"), std::string::npos);
  EXPECT_NE(dsl::print_source(parse(kCases[4].program)).find("X: f32[N, C, H, W] outside -inf"), std::string::npos);
  EXPECT_NE(dsl::print_source(parse(kCases[4].program)).find("over r:3, s:3"), std::string::npos);
  EXPECT_EQ(dsl::print_source(parse(dsl::print_source(parse(kCases[2].program)))), dsl::print_source(parse(kCases[2].program)));
}

TEST(CodegenDirect, ErrorsSayWhatIsMissing) {
  auto error = [](const std::string& text) {
    try {
      parse(text);
    } catch (const dsl::DslError& e) {
      return std::string(e.what());
    }
    return std::string("(parsed)");
  };
  EXPECT_NE(error("kernel m(X: f32[N, H]) -> (Y: f32[N, P]) {\n  Y[n, h] = max(X[n, h*2+r]) over r:2\n}\n")
                .find("which leaves its extents at the edges; say what it holds there: X: f32[N, H] outside 0 (or outside -inf)"),
            std::string::npos);
  EXPECT_NE(error("kernel m(X: f32[N, H] outside 1) -> (Y: f32[N, H]) {\n  Y[n, h] = X[n, h]\n}\n")
                .find("only 0 or -inf may be read outside a tensor's extents"),
            std::string::npos);
  EXPECT_NE(error("kernel m(X: f32[N, H] outside 0) -> (Y: f32[N, P]) {\n  Y[n, h] = sum(X[n, (h+r)/0]) over r\n}\n")
                .find("an index divisor is a positive integer, not 0"),
            std::string::npos);
  EXPECT_NE(error("kernel m(X: f32[N, H] outside 0) -> (Y: f32[N, P]) {\n  Y[n, h] = sum(X[n, (h+1)/2]) over r\n}\n")
                .find("a divided index is a sum of two names"),
            std::string::npos);
  EXPECT_NE(error("kernel m(X: f32[N, H] outside 0) -> (Y: f32[N, P]) {\n  Y[n, h] = sum(X[n, h+r]) over r:R\n}\n")
                .find("'R' is not a dim of the program's parameters"),
            std::string::npos);
  EXPECT_NE(error("kernel m(X: f32[N, H] outside 0) -> (Y: f32[N, P]) {\n  Y[n, h] = argmax(X[n, h+r]) over r:2, s:2\n}\n")
                .find("only sum, max, min and mean reduce over several indices"),
            std::string::npos);
}

// The meaning by hand. A transposed 1-D convolution, stride 2, padding 1: output w takes input
// (w + 1 - s) / 2 where that is a whole index. A max pool of window 3, stride 2, padding 1:
// the padding is -inf, so an all-negative row keeps its own maximum.
TEST(CodegenDirect, InterpreterDividesIndicesAndPadsWithMinusInfinity) {
  dsl::Program t = parse(
      "kernel t(X: f32[L] outside 0, F: f32[S]) -> (Y: f32[Q]) {\n  Y[w] = sum(X[(w-s+1)/2] * F[s]) over s\n}\n");
  codegen::HostArrays out = codegen::interpret(t, {{"L", 3}, {"S", 3}, {"Q", 5}}, {{"X", {1, 2, 3}}, {"F", {1, 10, 100}}});
  // PyTorch: conv_transpose1d([1, 2, 3], [1, 10, 100], stride 2, padding 1) = [10, 102, 20, 203, 30].
  EXPECT_EQ(out["Y"], (std::vector<double>{10, 102, 20, 203, 30}));
  dsl::Program m = parse(
      "kernel m(X: f32[W] outside -inf) -> (Y: f32[Q]) {\n  Y[w] = max(X[w*2+s-1]) over s:3\n}\n");
  out = codegen::interpret(m, {{"W", 5}, {"Q", 3}}, {{"X", {-5, -4, -3, -2, -1}}});
  EXPECT_EQ(out["Y"], (std::vector<double>{-4, -2, -1}));
}

// Every case generated, built for the host's CUDA emulator and run, against the interpreter in
// float64 with the correctness gate's tolerance: the thread-per-output kernel with 32-bit indices
// (what these shapes get) at one output per thread and at four consecutive ones (most shapes' last
// extents are not multiples of 4, so rows end inside a group), and with 64-bit indices
// (KSOL_DIRECT_INDEX32_MAX 0 makes every shape too large for 32 bits) at two.
TEST(CodegenDirect, OnTheHostMatchesTheInterpreter) {
  const std::string no32 = "#define KSOL_DIRECT_INDEX32_MAX 0LL\n";
  // A channels-last image's pool decodes its channel fastest with one output a thread (order
  // auto): that kernel in both index widths too.
  // order = tiles ("tiles" below) on the channels-last pools, in both widths: outputs past the
  // tiles skipped, every output written once (the output buffer starts as NaNs).
  // order = staged ("staged") on them too: each tile's outputs through shared memory.
  for (const auto& [prefix, items] : {std::pair{std::string(), "1"}, std::pair{std::string(), "4"}, std::pair{no32, "2"},
                                      std::pair{no32, "1"}, std::pair{std::string(), "tiles"}, std::pair{no32, "tiles"},
                                      std::pair{std::string(), "staged"}, std::pair{no32, "staged"}})
  for (const Case& c : kCases) {
    const bool channels_last = std::string(c.name).rfind("max_pool_channels_last", 0) == 0;
    if (prefix == no32 && std::string(items) == "1" && !channels_last) continue;
    const bool ordered = std::string(items) == "tiles" || std::string(items) == "staged";
    if (ordered && !channels_last) continue;
    SCOPED_TRACE(std::string(c.name) + (prefix.empty() ? " (32-bit indices" : " (64-bit indices") + ", items " + items + ")");
    const dsl::Program p = codegen::with_schedule(
        parse(c.program), ordered ? codegen::Schedule{{"order", items}} : codegen::Schedule{{"items", items}});
    auto numel = [&](const dsl::Param& prm) {
      int64_t n = 1;
      for (const std::string& e : prm.extents) n *= dsl::extent_is_number(e) ? std::stoll(e) : c.dims.at(e);
      return n;
    };
    uint64_t state = 7;
    auto next = [&] {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<double>(static_cast<int64_t>(state >> 11) % 2000001 - 1000000) / 500000.0;
    };
    codegen::HostArrays in;
    std::vector<HostVec<uint8_t>> buffers;
    for (const dsl::Param& prm : p.inputs) {
      HostVec<uint8_t> bytes(numel(prm) * 4);
      for (int64_t i = 0; i < numel(prm); ++i) {
        store_from_double(DType::f32, bytes.data(), i, next());
        in[prm.name].push_back(load_as_double(DType::f32, bytes.data(), i));
      }
      buffers.push_back(bytes);
    }
    codegen::HostArrays want = codegen::interpret(p, c.dims, in);
    codegen::HostArrays abs_in = in;
    for (auto& [name, v] : abs_in)
      for (double& x : v) x = std::fabs(x);
    codegen::HostArrays mag = codegen::interpret(p, c.dims, abs_in);
    const dsl::Param& out = p.outputs[0];
    const DType out_dtype = *parse_dtype(dsl::type_name(out.type));
    buffers.emplace_back(numel(out) * dtype_size(out_dtype), 0xFF);
    std::vector<int64_t> dv;
    for (const std::string& d : p.dims) dv.push_back(c.dims.at(d));
    const std::string source = codegen::generate_cuda(p, {});
    if (std::string(items) == "staged") EXPECT_NE(source.find("ksol_stage[ksol_lane]"), std::string::npos) << c.name;
    EXPECT_NE(source.find("<int, true><<<"), std::string::npos) << c.name;
    EXPECT_NE(source.find("<int64_t, true><<<"), std::string::npos) << c.name;
    if (std::string(c.name) == "depthwise_valid" || std::string(c.name) == "max_pool_inside") {
      EXPECT_NE(source.find("<int64_t, false><<<"), std::string::npos) << c.name;
    }
    codegen::HostBuild build = codegen::build_for_host(prefix + source);
    ASSERT_TRUE(build.ok) << c.name << "\n" << build.message;
    codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dv);
    ASSERT_TRUE(r.ok) << c.name << ": " << r.message;
    ASSERT_EQ(r.rc, 0) << c.name;
    const std::vector<double>& w = want.at(out.name);
    if (out.type == dsl::Type::i64) {
      const int64_t* got = reinterpret_cast<const int64_t*>(buffers.back().data());
      for (size_t i = 0; i < w.size(); ++i) EXPECT_EQ(got[i], static_cast<int64_t>(w[i])) << c.name << " at " << i;
      continue;
    }
    Tolerance tol;
    tol.u_out = dtype_unit_roundoff(out_dtype);
    tol.u_acc = std::ldexp(1.0, -24);
    tol.growth = 8 + 2 * std::sqrt(64.0);
    std::vector<double> m(w.size());
    for (size_t i = 0; i < w.size(); ++i) m[i] = std::max(std::fabs(w[i]), std::fabs(mag.at(out.name)[i]));
    CompareResult cr = compare_output(tol, out_dtype, buffers.back().data(), w.data(), m.data(), static_cast<int64_t>(w.size()));
    EXPECT_TRUE(cr.ok) << c.name << ": " << cr.message;
  }
}

// The loop kernel's 32-bit indices do not narrow what the program computes: a dim used as a value
// stays 64-bit (H * H = 2^32 here, where every index fits 32 bits), and so does a mean's count.
TEST(CodegenDirect, DimsAsValuesStay64BitUnderNarrowIndices) {
  const dsl::Program p = parse(
      "kernel dv(A: f32[N, H] outside 0, F: f32[R]) -> (Y: i64[N, P]) {\n"
      "  acc[n, p] = sum(A[n, p+r] * F[r]) over r\n"
      "  Y[n, p] = H * H + i64(acc[n, p])\n}\n");
  const std::string source = codegen::generate_cuda(p, {});
  EXPECT_NE(source.find("((int64_t)H) * ((int64_t)H)"), std::string::npos) << source;
  codegen::HostBuild build = codegen::build_for_host(source);
  ASSERT_TRUE(build.ok) << build.message;
  const int64_t H = 65536;
  std::vector<HostVec<uint8_t>> buffers;
  HostVec<uint8_t> a(H * 4, 0), f(4, 0), y(8, 0xFF);
  reinterpret_cast<float*>(a.data())[0] = 3.0f;
  reinterpret_cast<float*>(f.data())[0] = 2.0f;
  buffers.push_back(a), buffers.push_back(f), buffers.push_back(y);
  codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, {1, H, 1, 1});  // N, H, R, P
  ASSERT_TRUE(r.ok) << r.message;
  ASSERT_EQ(r.rc, 0);
  EXPECT_EQ(reinterpret_cast<const int64_t*>(buffers.back().data())[0], H * H + 6);
  const std::string mean = codegen::generate_cuda(parse(
      "kernel m(A: f32[N, I], B: f32[N, J]) -> (Y: f32[N]) {\n  Y[n] = mean(A[n, i] * B[n, j]) over i, j\n}\n"), {});
  EXPECT_NE(mean.find("(float)((int64_t)I * J)"), std::string::npos) << mean;
}

// Names the loop kernel and its launch use (the template's Idx and kChecked, the host's inside and
// groups) are renamed where a program uses them.
TEST(CodegenDirect, ProgramNamesDoNotClashWithTheLoopKernels) {
  const dsl::Program p = codegen::with_schedule(parse(
      "kernel clash(inside: f32[Idx, groups] outside 0, kChecked: f32[R]) -> (Y: f32[Idx, P]) {\n"
      "  Y[n, p] = sum(inside[n, p+r] * kChecked[r]) over r\n}\n"), {{"items", "2"}});
  codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, {}));
  EXPECT_TRUE(build.ok) << build.message;
  // The tiled orders' kernels: indices, dims and a tensor named as their own locals, built and run
  // against the interpreter (a clash shadows a lane or a step and gives wrong values).
  const std::string text =
      "kernel clash2(X: f32[ksol_t, kRows, tiles, C] outside -inf, ksol_stage: f32[C]) -> (Y: f32[ksol_t, C, P, Q]) {\n"
      "  Y[ksol_lane, c, ksol_k, kSteps] = max(X[ksol_lane, ksol_k*2+r, kSteps*2+s, c] + ksol_stage[c]) over r:2, s:2\n}\n";
  const std::map<std::string, int64_t> dims = {{"ksol_t", 2}, {"kRows", 4}, {"tiles", 70}, {"C", 37}, {"P", 2}, {"Q", 35}};
  for (const char* order : {"tiles", "staged"}) {
    SCOPED_TRACE(order);
    const dsl::Program q = codegen::with_schedule(parse(text), {{"order", order}});
    const codegen::HostBuild b = codegen::build_for_host(codegen::generate_cuda(q, {}));
    ASSERT_TRUE(b.ok) << b.message;
    codegen::HostArrays in;
    std::vector<HostVec<uint8_t>> bufs;
    for (const dsl::Param& prm : q.inputs) {
      int64_t n = 1;
      for (const std::string& e : prm.extents) n *= dims.at(e);
      bufs.emplace_back(n * 4);
      for (int64_t i = 0; i < n; ++i) {
        store_from_double(DType::f32, bufs.back().data(), i, std::sin(0.7 * static_cast<double>(i)));
        in[prm.name].push_back(load_as_double(DType::f32, bufs.back().data(), i));
      }
    }
    const int64_t outputs = 2 * 37 * 2 * 35;
    bufs.emplace_back(outputs * 4, 0xFF);
    codegen::HostArrays want = codegen::interpret(q, dims, in);
    std::vector<int64_t> dv;
    for (const std::string& d : q.dims) dv.push_back(dims.at(d));
    const codegen::HostRun r = codegen::run_on_host(b.so_path, bufs, dv);
    ASSERT_TRUE(r.ok && r.rc == 0) << r.message;
    for (int64_t i = 0; i < outputs; ++i)
      ASSERT_NEAR(load_as_double(DType::f32, bufs.back().data(), i), want.at("Y")[i], 1e-6) << i;
  }
}

// The generated sources through nvcc.
TEST(CodegenDirect, GeneratedSourcesCompile) {
  std::vector<CompileJob> jobs;
  for (const Case& c : kCases) {
    dsl::Program p = parse(c.program);
    CompileJob j;
    j.source_path = codegen::kernel_name(p) + ".cu";
    j.source_text = codegen::generate_cuda(p, {});
    jobs.push_back(j);
  }
  for (const char* order : {"tiles", "staged"}) {
    CompileJob j;
    const dsl::Program tp = codegen::with_schedule(parse(kCases[10].program), {{"order", order}});
    j.source_path = codegen::kernel_name(tp) + ".cu";
    j.source_text = codegen::generate_cuda(tp, {});
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

// --- mainloop = mma: contractions on the tensor cores --------------------------------------------

namespace {

// TF32 and bf16 contractions the direct family takes to the tensor cores: a 3-D convolution with a
// bias, a transposed 2-D one (divided indices: taps between input pixels are zero), a grouped
// 2-D one (a grid layer per group), bf16 data with a bf16 output through an epilogue cast, a
// transposed 1-D one with dilation 2 (half its phases read no tap), a transposed 3-D one with
// strides 2, 2 and 3 (12 phases), and a strided, dilated 1-D one.
const std::vector<Case> kMmaCases = {
    {"conv3d_tf32",
     "kernel conv3d_tf32(X: f32[N, C, D, H, W] outside 0, F: f32[K, C, T, R, S], b: f32[K]) -> (Y: f32[N, K, O, P, Q]) {\n"
     "  acc[n, k, d, h, w] = sum(tf32(X[n, c, d+t-1, h*2+r-1, w+s*2-2]) * tf32(F[k, c, t, r, s])) over c, t, r, s\n"
     "  Y[n, k, d, h, w] = acc[n, k, d, h, w] + b[k]\n}\n",
     {{"N", 2}, {"C", 3}, {"D", 4}, {"H", 5}, {"W", 6}, {"K", 20}, {"T", 3}, {"R", 3}, {"S", 2}, {"O", 4}, {"P", 3}, {"Q", 4}}},
    {"conv_transpose2d_tf32",
     "kernel convt2d_tf32(X: f32[N, C, H, W] outside 0, F: f32[C, K, R, S], b: f32[K]) -> (Y: f32[N, K, P, Q]) {\n"
     "  acc[n, k, h, w] = sum(tf32(X[n, c, (h-r+1)/2, (w-s+1)/2]) * tf32(F[c, k, r, s])) over c, r, s\n"
     "  Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k])\n}\n",
     {{"N", 2}, {"C", 4}, {"H", 3}, {"W", 4}, {"K", 17}, {"R", 3}, {"S", 3}, {"P", 5}, {"Q", 8}}},
    {"grouped_tf32",
     "kernel grouped_tf32(X: f32[N, G, C, H, W] outside 0, F: f32[G, K, C, R, S]) -> (Y: f32[N, G, K, P, Q]) {\n"
     "  Y[n, g, k, h, w] = sum(tf32(X[n, g, c, h+r-1, w+s-1]) * tf32(F[g, k, c, r, s])) over c, r, s\n}\n",
     {{"N", 2}, {"G", 3}, {"C", 2}, {"H", 4}, {"W", 5}, {"K", 16}, {"R", 3}, {"S", 3}, {"P", 4}, {"Q", 5}}},
    {"conv3d_bf16",
     "kernel conv3d_bf16(X: bf16[N, C, D, H, W] outside 0, F: bf16[K, C, T, R, S]) -> (Y: bf16[N, K, O, P, Q]) {\n"
     "  acc[n, k, d, h, w] = sum(f32(X[n, c, d+t-1, h+r-1, w+s-1]) * f32(F[k, c, t, r, s])) over c, t, r, s\n"
     "  Y[n, k, d, h, w] = bf16(silu(acc[n, k, d, h, w]))\n}\n",
     {{"N", 1}, {"C", 5}, {"D", 3}, {"H", 4}, {"W", 5}, {"K", 24}, {"T", 2}, {"R", 3}, {"S", 3}, {"O", 3}, {"P", 4}, {"Q", 5}}},
    {"conv_transpose1d_dilated_tf32",
     "kernel convt1d_tf32(X: f32[N, C, L] outside 0, F: f32[C, K, S]) -> (Y: f32[N, K, Q]) {\n"
     "  Y[n, k, w] = sum(tf32(X[n, c, (w-s*2+1)/2]) * tf32(F[c, k, s])) over c, s\n}\n",
     {{"N", 2}, {"C", 6}, {"L", 5}, {"K", 18}, {"S", 3}, {"Q", 11}}},
    {"conv_transpose3d_tf32",
     "kernel convt3d_tf32(X: f32[N, C, D, H, W] outside 0, F: f32[C, K, T, R, S]) -> (Y: f32[N, K, O, P, Q]) {\n"
     "  Y[n, k, d, h, w] = sum(tf32(X[n, c, (d-t+1)/2, (h-r+1)/2, (w-s)/3]) * tf32(F[c, k, t, r, s])) over c, t, r, s\n}\n",
     {{"N", 1}, {"C", 3}, {"D", 3}, {"H", 4}, {"W", 3}, {"K", 16}, {"T", 3}, {"R", 3}, {"S", 4}, {"O", 5}, {"P", 8}, {"Q", 9}}},
    {"conv1d_tf32",
     "kernel conv1d_tf32(X: f32[N, C, L] outside 0, F: f32[K, C, S]) -> (Y: f32[N, K, Q]) {\n"
     "  Y[n, k, w] = sum(tf32(X[n, c, w*2+s*2-1]) * tf32(F[k, c, s])) over c, s\n}\n",
     {{"N", 3}, {"C", 7}, {"L", 40}, {"K", 33}, {"S", 3}, {"Q", 19}}},
};

// Each case in `schedules`, on the CPU against the interpreter (bytes in the parameters' types),
// at its sizes and, with `small_k`, at K = 5 too (fewer than 16 columns: the thread-per-output
// kernel of the same source runs).
void mma_on_host(const Case& c, const std::vector<codegen::Schedule>& schedules, bool small_k) {
  const dsl::Program base = parse(c.program);
  ASSERT_EQ(base.family, "direct") << c.name;
  std::vector<std::map<std::string, int64_t>> sizes = {c.dims};
  if (small_k) {
    sizes.push_back(c.dims);
    sizes.back()["K"] = 5;
  }
  for (const auto& dims : sizes) {
    auto numel = [&](const dsl::Param& prm) {
      int64_t n = 1;
      for (const std::string& e : prm.extents) n *= dsl::extent_is_number(e) ? std::stoll(e) : dims.at(e);
      return n;
    };
    auto dtype = [](const dsl::Param& prm) { return *parse_dtype(dsl::type_name(prm.type)); };
    uint64_t state = 11;
    auto next = [&] {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<double>(static_cast<int64_t>(state >> 11) % 2000001 - 1000000) / 500000.0;
    };
    codegen::HostArrays in;
    std::vector<HostVec<uint8_t>> inputs;
    for (const dsl::Param& prm : base.inputs) {
      HostVec<uint8_t> bytes(numel(prm) * dtype_size(dtype(prm)));
      for (int64_t i = 0; i < numel(prm); ++i) {
        store_from_double(dtype(prm), bytes.data(), i, next());
        in[prm.name].push_back(load_as_double(dtype(prm), bytes.data(), i));
      }
      inputs.push_back(bytes);
    }
    codegen::HostArrays want = codegen::interpret(base, dims, in);
    codegen::HostArrays abs_in = in;
    for (auto& [name, v] : abs_in)
      for (double& x : v) x = std::fabs(x);
    codegen::HostArrays mag = codegen::interpret(base, dims, abs_in);
    const dsl::Param& out = base.outputs[0];
    std::vector<int64_t> dv;
    for (const std::string& d : base.dims) dv.push_back(dims.at(d));
    for (const codegen::Schedule& sch : schedules) {
      const dsl::Program p = sch.empty() ? base : codegen::with_schedule(base, sch);
      ASSERT_EQ(refusal(p), "(accepted)") << c.name;
      const std::string name = codegen::kernel_name(p);
      ASSERT_NE(name.find("_mma_"), std::string::npos) << name;
      codegen::HostBuild build = codegen::build_for_host(codegen::generate_cuda(p, {}));
      ASSERT_TRUE(build.ok) << name << "\n" << build.message;
      std::vector<HostVec<uint8_t>> buffers = inputs;
      buffers.emplace_back(numel(out) * dtype_size(dtype(out)), 0xFF);
      codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dv);
      ASSERT_TRUE(r.ok) << name << ": " << r.message;
      ASSERT_EQ(r.rc, 0) << name;
      const std::vector<double>& w = want.at(out.name);
      Tolerance tol;
      tol.u_out = dtype_unit_roundoff(dtype(out));
      tol.u_acc = std::ldexp(1.0, -24);
      tol.growth = 8 + 2 * std::sqrt(128.0);
      std::vector<double> m(w.size());
      for (size_t i = 0; i < w.size(); ++i) m[i] = std::max(std::fabs(w[i]), std::fabs(mag.at(out.name)[i]));
      CompareResult cr = compare_output(tol, dtype(out), buffers.back().data(), w.data(), m.data(), static_cast<int64_t>(w.size()));
      EXPECT_TRUE(cr.ok) << name << " K=" << dims.at("K") << ": " << cr.message;
    }
  }
}

}  // namespace

// The tensor-core kernel against the interpreter on the CPU (the host emulation's WMMA checks the
// fragments' alignment and leading dimensions): partial tiles everywhere, one to four warps a
// block, and the thread-per-output fallback at K = 5.
TEST(CodegenDirect, TensorCoreContractionsOnTheHostMatchTheInterpreter) {
  const codegen::Schedule one_warp = {{"tile", "[32, 32, 16]"}, {"thread_tile", "[2, 2]"}};
  const codegen::Schedule four_warps = {{"mainloop", "mma"}, {"tile", "[64, 32, 32]"}, {"thread_tile", "[1, 2]"}};
  mma_on_host(kMmaCases[0], {one_warp, four_warps}, true);
  mma_on_host(kMmaCases[1], {one_warp}, true);
  mma_on_host(kMmaCases[2], {four_warps}, false);
  mma_on_host(kMmaCases[3], {{{"tile", "[32, 32, 32]"}, {"thread_tile", "[1, 1]"}}}, false);
  mma_on_host(kMmaCases[4], {one_warp}, true);
  mma_on_host(kMmaCases[5], {four_warps}, false);
  mma_on_host(kMmaCases[6], {one_warp}, true);
}

// The cp.async pipeline (stages 2 and 3) against the interpreter: TF32 3-D, transposed with
// phases, grouped, strided 1-D; the host emulation defers each group's copies until a wait asks
// for it, so a slice read early reads the buffer's old contents.
TEST(CodegenDirect, TensorCorePipelineOnTheHostMatchesTheInterpreter) {
  const codegen::Schedule two = {{"tile", "[32, 32, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "2"}};
  const codegen::Schedule three = {{"mainloop", "mma"}, {"tile", "[64, 32, 16]"}, {"thread_tile", "[1, 2]"}, {"stages", "3"}};
  mma_on_host(kMmaCases[0], {two, three}, true);
  mma_on_host(kMmaCases[1], {three}, true);
  mma_on_host(kMmaCases[2], {two}, false);
  mma_on_host(kMmaCases[5], {three}, false);
  mma_on_host(kMmaCases[6], {two}, true);
  // fragments = slice: a slice's operands loaded after its barrier, staged and pipelined.
  codegen::Schedule two_sliced = two, one_sliced = {{"tile", "[32, 32, 16]"}, {"thread_tile", "[2, 2]"}, {"fragments", "slice"}};
  two_sliced.push_back({"fragments", "slice"});
  mma_on_host(kMmaCases[0], {two_sliced, one_sliced}, true);
  const dsl::Program c3 = parse(kMmaCases[0].program);
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(c3, one_sliced)), "direct_conv3d_tf32_f32_mma_32x32x16_w2x2_fs_fbt256");
  EXPECT_EQ(refusal(codegen::with_schedule(c3, {{"mainloop", "loop"}, {"fragments", "slice"}})),
            "fragments = slice: the mma kernel's; mainloop = loop has no fragments to load (fragments = auto)");
  EXPECT_EQ(refusal(codegen::with_schedule(parse(kMmaCases[3].program), {{"fragments", "slice"}})),
            "fragments = slice: the TF32 mma.sync kernel's; WMMA's bf16 fragments load a k-step at a time (fragments = auto) "
            "(mainloop = auto takes mma for this program; mainloop = loop runs a thread per output)");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(c3, {{"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "3"}})),
            "direct_conv3d_tf32_f32_mma_128x64x16_w2x2_s3_fbt256");
  EXPECT_EQ(refusal(codegen::with_schedule(c3, {{"mainloop", "loop"}, {"stages", "2"}})),
            "stages = 2: the mma kernel's; mainloop = loop runs a thread per output (leave stages auto)");
  EXPECT_EQ(refusal(codegen::with_schedule(parse(kMmaCases[3].program), {{"stages", "2"}})),
            "stages = 2: mainloop = mma pipelines slices of 32-bit elements only (cp.async copies 4 bytes at least, and the "
            "gather reads one bf16 element at a time); stages = 1 stages them in registers (mainloop = auto takes mma for this "
            "program; mainloop = loop runs a thread per output)");
  // Through nvcc (sm_90) with the cp.async helpers.
  std::vector<CompileJob> jobs;
  for (size_t i : {0, 1, 5}) {
    const dsl::Program p = codegen::with_schedule(parse(kMmaCases[i].program), {{"tile", "[128, 64, 16]"}, {"thread_tile", "[2, 2]"}, {"stages", "3"}});
    CompileJob j;
    j.source_path = codegen::kernel_name(p) + ".cu";
    j.source_text = codegen::generate_cuda(p, {});
    j.arch = codegen::compile_needs(p).arch;
    EXPECT_NE(j.source_text.find("cp.async.ca.shared.global"), std::string::npos);
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

// What the contraction analysis takes and refuses, and the names.
TEST(CodegenDirect, TensorCoreContractionsNamesAndRefusals) {
  const dsl::Program c3 = parse(kMmaCases[0].program);
  EXPECT_EQ(codegen::kernel_name(c3), "direct_conv3d_tf32_f32_mma_128x128x16_w4x2_fbt256");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(c3, {{"mainloop", "loop"}})), "direct_conv3d_tf32_f32_t256");
  EXPECT_EQ(refusal(codegen::with_schedule(c3, {{"threads", "128"}})),
            "threads = 128: the loop kernel's; mainloop = mma falls back to it at 256 threads (leave threads 256) (mainloop = "
            "auto takes mma for this program; mainloop = loop runs a thread per output)");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(c3, {{"threads", "128"}, {"mainloop", "loop"}})), "direct_conv3d_tf32_f32_t128");
  EXPECT_EQ(refusal(codegen::with_schedule(c3, {{"items", "4"}})),
            "items = 4: the loop kernel's; mainloop = mma falls back to it with one output per thread (leave items 1) (mainloop = "
            "auto takes mma for this program; mainloop = loop runs a thread per output)");
  EXPECT_EQ(codegen::kernel_name(codegen::with_schedule(c3, {{"items", "4"}, {"mainloop", "loop"}})), "direct_conv3d_tf32_f32_t256_i4");
  EXPECT_EQ(refusal(codegen::with_schedule(c3, {{"tile", "[64, 48, 32]"}})),
            "tile = [64, 48, 32] is not whole warps of thread_tile = [4, 2] (64 rows x 32 columns each, in mainloop = mma) "
            "(mainloop = auto takes mma for this program; mainloop = loop runs a thread per output)");
  EXPECT_EQ(refusal(codegen::with_schedule(parse(kMmaCases[3].program), {{"mainloop", "mma"}, {"tile", "[64, 64, 8]"}, {"thread_tile", "[2, 2]"}})),
            "tile = [64, 64, 8]: mainloop = mma takes a slice that is a multiple of 16 (bf16 fragments are 16 x 16 x 16)");
  // Not contractions the tensor cores take: a max, a pool, a filter read at a compound index.
  EXPECT_EQ(refusal(codegen::with_schedule(parse(kCases[4].program), {{"mainloop", "mma"}})),
            "mainloop = mma: the reduction is not a sum; use mainloop = loop");
  const dsl::Program shifted = parse(
      "kernel s(X: f32[N, C, L] outside 0, F: f32[K, C, L] outside 0) -> (Y: f32[N, K, L]) {\n"
      "  Y[n, k, w] = sum(tf32(X[n, c, w+s-1]) * tf32(F[k, c, s+w-1])) over c, s:3\n}\n");
  EXPECT_EQ(refusal(codegen::with_schedule(shifted, {{"mainloop", "mma"}})),
            "mainloop = mma: no factor is a filter read at plain indices of output and reduced indices, with an output index "
            "of its own; use mainloop = loop");
  EXPECT_EQ(codegen::kernel_name(shifted), "direct_s_f32_t256");  // auto: the thread-per-output kernel
  // An image read as -inf outside it is not a contraction: its products carry -inf into the sum.
  const dsl::Program lowest = parse(
      "kernel lo(X: f32[N, C, L] outside -inf, F: f32[C, K, S]) -> (Y: f32[N, K, Q]) {\n"
      "  Y[n, k, w] = sum(tf32(X[n, c, (w-s+1)/2]) * tf32(F[c, k, s])) over c, s\n}\n");
  EXPECT_EQ(refusal(codegen::with_schedule(lowest, {{"mainloop", "mma"}})),
            "mainloop = mma: the image 'X' reads -inf outside it, which a product carries into the sum; use mainloop = loop");
  // The generated sources through nvcc (sm_90, mma.h), with a program whose names are the
  // generated code's own (a tensor `grid`, dims `layers` and `depth_all`): they are renamed.
  std::vector<Case> cases = kMmaCases;
  cases.push_back({"clashing_names",
                   "kernel nm(grid: f32[N, C, layers] outside 0, F: f32[depth_all, C, 3]) -> (Y: f32[N, depth_all, layers]) {\n"
                   "  Y[n, k, w] = sum(tf32(grid[n, c, w+s-1]) * tf32(F[k, c, s])) over c, s\n}\n",
                   {}});
  std::vector<CompileJob> jobs;
  for (const Case& c : cases) {
    CompileJob j;
    const dsl::Program p = parse(c.program);
    j.source_path = codegen::kernel_name(p) + ".cu";
    j.source_text = codegen::generate_cuda(p, {});
    j.arch = codegen::compile_needs(p).arch;
    const bool tf32 = std::string(c.program).find("tf32(") != std::string::npos;
    EXPECT_NE(j.source_text.find(tf32 ? "ksol_mma_tf32(c_acc[i][j], a_frag[i], b_frag[j]);" : "nvcuda::wmma::mma_sync("),
              std::string::npos) << c.name;
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}
