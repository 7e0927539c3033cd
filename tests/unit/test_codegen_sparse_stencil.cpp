// The sparse (CSR SpMV) and stencil code generators (src/codegen/sparse.cpp, stencil.cpp),
// called directly until codegen.cpp lists them: refusals with exact reasons, the task binding
// (row_ptr / col_idx / values or A_row_ptr / ...), kernel names, schedule spaces, generated
// sources through nvcc and the static gate, and the generated CUDA run on the CPU by the host
// emulation against the tasks' float64 references through the correctness gate's comparator.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

#include "codegen/codegen.h"
#include "codegen/emulate.h"
#include "codegen/interpret.h"
#include "codegen/sparse_stencil.h"
#include "compile/compiler.h"
#include "core/util.h"
#include "dsl/ir.h"
#include "task/inputs.h"
#include "task/task.h"
#include "host_reference.h"

using namespace ksol;
using codegen::Binding;
using codegen::Schedule;
namespace cd = ksol::codegen::detail;

using namespace ksol::test_support;

namespace {

const char* const kSpmv = R"(
kernel spmv_csr(A: csr f32[M, N], x: f32[N]) -> (y: f32[M]) {
  y[m] = sum(A[m, j] * x[j]) over j
}
schedule {
  strategy = vector_per_row
  vector = 4
  threads = 256
}
)";

// tasks/sparse/spmm_csr_f32's tensors: row_ptr, col_idx, values, X, Y; dims M, K, N, NNZ.
const char* const kSpmm = R"(
kernel spmm_csr(A: csr f32[M, K], X: f32[K, N]) -> (Y: f32[M, N]) {
  Y[m, n] = sum(A[m, j] * X[j, n]) over j
}
schedule {
  strategy = row_per_thread
  vector = 4
  threads = 256
}
)";

const std::string kEllText = read_file(std::string(KSOL_SOURCE_DIR) + "/tasks/sparse/spmv_ell_f32/program.ksol");
const std::string kCooText = read_file(std::string(KSOL_SOURCE_DIR) + "/tasks/sparse/spmv_coo_f32/program.ksol");
const char* const kEll = kEllText.c_str();
const char* const kCoo = kCooText.c_str();

const char* const kStencil = R"(
kernel stencil2d(U: f32[H, W]) -> (V: f32[H, W]) {
  V[i, j] = 0.2 * (U[i, j] + U[i-1, j] + U[i+1, j] + U[i, j-1] + U[i, j+1])
}
schedule {
  tile = [16, 64]
  halo = shared
}
)";

const char* const kStencil3d = R"(
kernel stencil3d(U: f32[D, H, W]) -> (V: f32[D, H, W]) {
  V[z, i, j] = 0.25 * U[z, i, j] + 0.125 * (U[z-1, i, j] + U[z+1, i, j] + U[z, i-1, j] + U[z, i+1, j] + U[z, i, j-1] + U[z, i, j+1])
}
schedule {
  tile = [4, 8, 32]
  halo = registers
  register_block = 4
}
)";

dsl::Program parse(const std::string& t) { return dsl::parse_program(t, "test.ksol"); }

const cd::FamilyGenerator& family(const dsl::Program& p) {
  return p.family == "sparse" ? cd::sparse_family() : cd::stencil_family();
}

std::string refusal(const dsl::Program& p, const Binding& b = {}) {
  try {
    family(p).check(p, b);
  } catch (const cd::Refused& r) {
    return r.what();
  }
  return "(accepted)";
}

dsl::Program scheduled(const dsl::Program& p, const Schedule& changes) {
  Schedule s;
  for (const auto& [k, v] : p.schedule) {
    std::string text = v.kind == dsl::ScheduleValue::Kind::integer ? std::to_string(v.integer) : v.ident;
    if (v.kind == dsl::ScheduleValue::Kind::list) {
      text = "[";
      for (size_t i = 0; i < v.list.size(); ++i) text += (i ? ", " : "") + std::to_string(v.list[i]);
      text += "]";
    }
    s.emplace_back(k, text);
  }
  for (const auto& [k, v] : changes) {
    bool found = false;
    for (auto& [k2, v2] : s)
      if (k2 == k) v2 = v, found = true;
    if (!found) s.emplace_back(k, v);
  }
  return codegen::with_schedule(p, s);
}

Binding binding_of(const Task& t) {
  Binding b;
  for (const TensorSpec& ts : t.tensors) b.tensor_order.push_back(ts.name);
  b.dim_order = t.dims;
  return b;
}

}  // namespace

TEST(CodegenSparse, AcceptsAndNames) {
  dsl::Program p = parse(kSpmv);
  ASSERT_EQ(p.family, "sparse");
  EXPECT_EQ(refusal(p), "(accepted)");
  EXPECT_EQ(cd::sparse_family().kernel_name(p), "sparse_spmv_csr_f32_vec4_t256");
  EXPECT_EQ(cd::sparse_family().kernel_name(scheduled(p, {{"strategy", "row_per_thread"}, {"vector", "1"},
                                                           {"cache_x", "readonly"}})),
            "sparse_spmv_csr_f32_row_t256_ldg");
  EXPECT_EQ(cd::sparse_family().kernel_name(scheduled(p, {{"strategy", "nnz_split"}, {"vector", "8"},
                                                           {"cache_x", "shared"}, {"threads", "128"}})),
            "sparse_spmv_csr_f32_nnz8_t128_smemx");
  // codegen::kernel_name checks no binding: nnz_split (legal only for a task with an NNZ dim)
  // has a name, as ksol eval and the search ask for it after binding to such a task.
  EXPECT_EQ(codegen::kernel_name(scheduled(p, {{"strategy", "nnz_split"}, {"vector", "4"}, {"threads", "64"}})),
            "sparse_spmv_csr_f32_nnz4_t64");
  // Both namings of the csr tensors bind; the task's order decides the ABI.
  EXPECT_EQ(refusal(p, Binding{{"row_ptr", "col_idx", "values", "x", "y"}, {"M", "N", "NNZ"}}), "(accepted)");
  EXPECT_EQ(refusal(p, Binding{{"A_row_ptr", "A_col_idx", "A_values", "x", "y"}, {"M", "N"}}), "(accepted)");
  std::string src = cd::sparse_family().generate(p, Binding{{"x", "values", "row_ptr", "col_idx", "y"}, {"N", "M", "NNZ"}});
  EXPECT_NE(src.find("const float* A_values = static_cast<const float*>(call->tensors[1]);"), std::string::npos) << src;
  EXPECT_NE(src.find("const int32_t* A_row_ptr = static_cast<const int32_t*>(call->tensors[2]);"), std::string::npos);
  EXPECT_NE(src.find("const int64_t M = call->dims[1];"), std::string::npos);
}

TEST(CodegenSparse, RefusesWithExactReasons) {
  dsl::Program p = parse(kSpmv);
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "4"}})),
            "unknown schedule key 'tile' for the sparse family; it accepts strategy, vector, threads, cache_x");
  EXPECT_EQ(refusal(scheduled(p, {{"strategy", "row_per_thread"}})),
            "strategy = row_per_thread gives each row one thread, so vector must be 1, not 4");
  EXPECT_EQ(refusal(scheduled(p, {{"vector", "1"}})),
            "strategy = vector_per_row needs vector = 2 to 32 lanes per row; vector = 1 is row_per_thread");
  EXPECT_EQ(refusal(scheduled(p, {{"vector", "64"}})), "vector = 64 must be one of 1, 2, 4, 8, 16, 32");
  EXPECT_EQ(refusal(scheduled(p, {{"strategy", "merge"}})),
            "strategy = merge must be one of row_per_thread, vector_per_row, nnz_split");
  EXPECT_EQ(refusal(scheduled(p, {{"cache_x", "texture"}})), "cache_x = texture must be one of none, readonly, shared");
  EXPECT_EQ(refusal(scheduled(p, {{"threads", "100"}})), "threads = 100 must be a multiple of 32 between 32 and 1024");
  EXPECT_EQ(refusal(scheduled(p, {{"strategy", "nnz_split"}})),
            "strategy = nnz_split sizes its grid by the number of stored entries, and the task has no dim NNZ (its "
            "dims: M, N)");
  EXPECT_EQ(refusal(p, Binding{{"row_ptr", "col_idx", "vals", "x", "y"}, {"M", "N", "NNZ"}}),
            "task tensor 'vals' is not a parameter of the program (its tensors: A_row_ptr, A_col_idx, A_values, x, y)");
  EXPECT_EQ(refusal(p, Binding{{"row_ptr", "col_idx", "x", "y"}, {"M", "N", "NNZ"}}),
            "parameter 'A_values' is not a tensor of the task (its tensors: row_ptr, col_idx, x, y)");
  EXPECT_EQ(refusal(p, Binding{{"row_ptr", "col_idx", "values", "x", "y"}, {"M"}}),
            "dim 'N' is not a dim of the task (its dims: M)");
  dsl::Program half = parse("kernel h(A: csr bf16[M, N], x: bf16[N]) -> (y: bf16[M]) {\n  y[m] = sum(A[m, j] * x[j]) over j\n}\n");
  EXPECT_EQ(refusal(half), "'y' accumulates bf16 values; accumulate in f32 instead, e.g. sum(f32(...))");
  dsl::Program three = parse(
      "kernel mm(A: csr f32[M, K], B: f32[K, N, L]) -> (C: f32[M, N, L]) {\n  C[m, n, l] = sum(A[m, k] * B[k, n, l]) over k\n}\n");
  EXPECT_EQ(refusal(three),
            "'C' has 3 indices; the sparse family generates SpMV (one output index, the csr row) and SpMM (two: the row "
            "and the dense matrix's column)");
  dsl::Program two = parse(
      "kernel t(A: csr f32[M, N], x: f32[N], w: f32[N]) -> (y: f32[M]) {\n  y[m] = sum(A[m, j] * x[j] * w[j]) over j\n}\n");
  EXPECT_EQ(refusal(two), "(accepted)");
  EXPECT_EQ(refusal(scheduled(two, {{"cache_x", "shared"}})),
            "cache_x = shared holds one vector read at the column index; the program reads 2");
}

TEST(CodegenSparse, SpmmAcceptsRefusesAndNames) {
  dsl::Program p = parse(kSpmm);
  ASSERT_EQ(p.family, "sparse");
  const Binding b{{"row_ptr", "col_idx", "values", "X", "Y"}, {"M", "K", "N", "NNZ"}};
  EXPECT_EQ(refusal(p, b), "(accepted)");
  EXPECT_EQ(cd::sparse_family().kernel_name(p), "sparse_spmm_csr_f32_row_c4_t256");
  EXPECT_EQ(cd::sparse_family().kernel_name(scheduled(p, {{"strategy", "vector_per_row"}, {"vector", "32"},
                                                           {"cache_x", "readonly"}})),
            "sparse_spmm_csr_f32_vec32_t256_ldg");
  EXPECT_EQ(refusal(scheduled(p, {{"strategy", "nnz_split"}}), b),
            "strategy = nnz_split is SpMV's; SpMM takes row_per_thread (vector = 1 to 8 columns of a row per thread) or "
            "vector_per_row (vector lanes per row)");
  EXPECT_EQ(refusal(scheduled(p, {{"vector", "16"}}), b),
            "strategy = row_per_thread gives each thread vector columns of a row, at most 8 (their sums stay in "
            "registers), not 16");
  EXPECT_EQ(refusal(scheduled(p, {{"cache_x", "shared"}}), b),
            "cache_x = shared holds one vector read at the column index; SpMM reads a matrix there");
  EXPECT_EQ(refusal(scheduled(p, {{"strategy", "vector_per_row"}, {"vector", "1"}}), b),
            "strategy = vector_per_row needs vector = 2 to 32 lanes per row; vector = 1 is row_per_thread");
  // X read transposed is no SpMM read; a per-row scale and a per-column bias are.
  dsl::Program tr = parse(
      "kernel t(A: csr f32[M, K], X: f32[N, K]) -> (Y: f32[M, N]) {\n  Y[m, n] = sum(A[m, j] * X[n, j]) over j\n}\n");
  EXPECT_EQ(refusal(tr),
            "'X[n, j]' is neither a vector read at the column index 'j' nor at the row index 'm', nor at the dense column "
            "'n', nor a matrix read at ['j', 'n']; the sparse family reads only those");
  dsl::Program scaled = parse(
      "kernel s(A: csr f32[M, K], X: f32[K, N], r: f32[M], c: f32[N]) -> (Y: f32[M, N]) {\n"
      "  Y[m, n] = sum(A[m, j] * X[j, n] * r[m] * c[n]) over j\n}\n");
  EXPECT_EQ(refusal(scaled), "(accepted)");
  std::string src = cd::sparse_family().generate(scaled, Binding{});
  EXPECT_NE(src.find("acc[k] += A_value * X[col * N + n] * r_[row] * c[n];"), std::string::npos) << src;  // r is a reserved local
  EXPECT_NE(src.find("Y[row * N + n0 + k] = acc[k];"), std::string::npos) << src;
}

TEST(CodegenSparse, CooAndEllBindNameAndRefuse) {
  dsl::Program ell = parse(read_file(std::string(KSOL_SOURCE_DIR) + "/tasks/sparse/spmv_ell_f32/program.ksol"));
  dsl::Program coo = parse(read_file(std::string(KSOL_SOURCE_DIR) + "/tasks/sparse/spmv_coo_f32/program.ksol"));
  const Binding ell_b{{"col_idx", "values", "x", "y"}, {"M", "N", "W", "NNZ"}};
  const Binding coo_b{{"row", "col", "values", "x", "y"}, {"M", "N", "NNZ"}};
  EXPECT_EQ(refusal(ell, ell_b), "(accepted)");
  EXPECT_EQ(refusal(coo, coo_b), "(accepted)");
  EXPECT_EQ(refusal(coo, Binding{{"A_row", "A_col", "A_values", "x", "y"}, {"M", "N", "NNZ"}}), "(accepted)");
  EXPECT_EQ(cd::sparse_family().kernel_name(ell), "sparse_spmv_ell_f32_ell_vec4_t256");
  EXPECT_EQ(cd::sparse_family().kernel_name(coo), "sparse_spmv_coo_f32_coo_nnz8_t256");
  EXPECT_EQ(refusal(scheduled(ell, {{"strategy", "nnz_split"}}), ell_b),
            "strategy = nnz_split splits stored entries, and an ell matrix's padding slots are none; it takes "
            "row_per_thread or vector_per_row");
  EXPECT_EQ(refusal(ell, Binding{{"col_idx", "values", "x", "y"}, {"M", "N", "NNZ"}}),
            "an ell matrix's rows have W slots, the task's dim W, and the task has none (its dims: M, N, NNZ)");
  EXPECT_EQ(refusal(scheduled(coo, {{"strategy", "row_per_thread"}, {"vector", "1"}}), Binding{{"row", "col", "values", "x", "y"}, {"M", "N"}}),
            "a coo matrix's entries are counted by the task's dim NNZ, and the task has none (its dims: M, N)");
  EXPECT_EQ(refusal(ell, Binding{{"row_ptr", "col_idx", "values", "x", "y"}, {"M", "N", "W"}}),
            "task tensor 'row_ptr' is not a parameter of the program (its tensors: A_col_idx, A_values, x, y)");
  // The generated code: ELL stops at a row's first -1; COO finds a row's entries by binary search.
  std::string e = cd::sparse_family().generate(scheduled(ell, {{"strategy", "row_per_thread"}, {"vector", "1"}}), ell_b);
  EXPECT_NE(e.find("for (int64_t p = (row) * ell_width, stop = (row + 1) * ell_width; p < stop; p += 1)"), std::string::npos) << e;
  EXPECT_NE(e.find("if (col < 0) break;"), std::string::npos) << e;
  EXPECT_NE(e.find("const int64_t ell_width = call->dims[2];"), std::string::npos) << e;
  std::string c = cd::sparse_family().generate(scheduled(coo, {{"strategy", "row_per_thread"}, {"vector", "1"}}), coo_b);
  EXPECT_NE(c.find("stop = coo_begin(A_row, NNZ, row + 1)"), std::string::npos) << c;
  // The coo chunk kernel's locals (r, q, before, carried, u0, in) are reserved: a row dim named q
  // and a vector named r are renamed, not shadowed (q < q would leave the last rows unwritten).
  dsl::Program named = parse("kernel t(A: coo f32[q, N], r: f32[N]) -> (y: f32[q]) {\n"
                             "  y[m] = sum(A[m, j] * r[j]) over j\n}\nschedule {\n  strategy = nnz_split\n}\n");
  const std::string ns = cd::sparse_family().generate(named, Binding{{"A_row", "A_col", "A_values", "r", "y"}, {"q", "N", "NNZ"}});
  EXPECT_EQ(ns.find("q < q;"), std::string::npos) << ns;
  EXPECT_EQ(ns.find("* r[col]"), std::string::npos) << ns;
  codegen::HostBuild nb = codegen::build_for_host(ns);
  EXPECT_TRUE(nb.ok) << nb.message;
  dsl::Program two = parse("kernel t(A: coo f32[M, N], B: ell f32[M, N], x: f32[N]) -> (y: f32[M]) {\n"
                           "  y[m] = sum(A[m, j] * B[m, j] * x[j]) over j\n}\n");
  EXPECT_EQ(refusal(two), "the sparse family reads one sparse matrix; 'A' and 'B' are both sparse");
}

TEST(CodegenStencil, AcceptsRefusesAndNames) {
  dsl::Program p = parse(kStencil);
  ASSERT_EQ(p.family, "stencil");
  EXPECT_EQ(refusal(p), "(accepted)");
  EXPECT_EQ(cd::stencil_family().kernel_name(p), "stencil_stencil2d_f32_16x64_smem");
  EXPECT_EQ(cd::stencil_family().kernel_name(scheduled(p, {{"halo", "registers"}, {"register_block", "4"}})),
            "stencil_stencil2d_f32_16x64_regs_rb4");
  EXPECT_EQ(refusal(scheduled(p, {{"temporal", "2"}})),
            "temporal = 2 fuses 2 sweeps, but the program is one sweep ('V' is computed from its inputs once) and the "
            "DSL cannot say that an output feeds the next sweep; temporal must be 1");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[4, 8, 32]"}})),
            "tile = [4, 8, 32] has 3 entries; a 2-D stencil takes [Y, X]");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[32, 64]"}})),
            "tile = [32, 64] with register_block = 1 makes 2048 threads per block; a block has 32 to 1024");
  EXPECT_EQ(refusal(scheduled(p, {{"tile", "[6, 64]"}, {"register_block", "4"}})),
            "register_block = 4 does not divide the tile's slowest extent 6");
  EXPECT_EQ(refusal(scheduled(p, {{"halo", "global"}})), "halo = global must be one of shared, registers");
  EXPECT_EQ(refusal(scheduled(p, {{"strategy", "x"}})),
            "unknown schedule key 'strategy' for the stencil family; it accepts tile, halo, register_block, vector, "
            "temporal");
  EXPECT_EQ(cd::stencil_family().kernel_name(
                scheduled(p, {{"halo", "registers"}, {"register_block", "4"}, {"vector", "4"}})),
            "stencil_stencil2d_f32_16x64_regs_rb4_v4");
  EXPECT_EQ(refusal(scheduled(p, {{"vector", "4"}})),
            "vector = 4 needs halo = registers (the shared-memory halo is staged cell by cell)");
  EXPECT_EQ(refusal(scheduled(p, {{"halo", "registers"}, {"tile", "[16, 30]"}, {"vector", "4"}})),
            "vector = 4 does not divide the tile's fastest extent 30");
  EXPECT_EQ(refusal(scheduled(p, {{"halo", "registers"}, {"tile", "[8, 32]"}, {"register_block", "4"}, {"vector", "4"}})),
            "tile = [8, 32] with register_block = 4 and vector = 4 makes 16 threads per block; a block has 32 to 1024");
  EXPECT_EQ(refusal(scheduled(p, {{"halo", "registers"}, {"vector", "3"}})), "vector = 3 must be one of 1, 2, 4");
  dsl::Program cross = parse("kernel c(U: f32[N, N]) -> (V: f32[N, N]) {\n  V[i, j] = U[j, i+1]\n}\n");
  EXPECT_EQ(refusal(cross),
            "'U[j, i+1]' reads index 'j' at position 1 where the output has 'i'; a stencil reads each index at its own "
            "position");
  dsl::Program big = parse("kernel b(U: f64[H, W]) -> (V: f64[H, W]) {\n  V[i, j] = U[i-40, j] + U[i+40, j+40]\n}\n");
  EXPECT_EQ(refusal(scheduled(big, {{"tile", "[32, 32]"}})),
            "halo = shared stages 64512 bytes per block (tile [32, 32] plus its halo); static shared memory is at most "
            "49152");
  EXPECT_EQ(refusal(scheduled(big, {{"halo", "registers"}, {"vector", "4"}})),
            "vector = 4 of f64 is 32 bytes; a vector load is at most 16");
}

TEST(CodegenSparseStencil, ScheduleSpaces) {
  for (const char* text : {kSpmv, kSpmm, kStencil}) {
    dsl::Program p = parse(text);
    Binding b = text == kSpmm ? Binding{{"row_ptr", "col_idx", "values", "X", "Y"}, {"M", "K", "N", "NNZ"}}
                : p.family == "sparse" ? Binding{{"row_ptr", "col_idx", "values", "x", "y"}, {"M", "N", "NNZ"}}
                                       : Binding{};
    const cd::FamilyGenerator& f = family(p);
    size_t grid = 1;
    for (const cd::Knob& k : f.knobs) grid *= k.grid.size();
    // The odometer of codegen.cpp's schedule_space, over this family.
    std::vector<size_t> at(f.knobs.size(), 0);
    std::vector<Schedule> legal;
    std::map<std::string, int> refused;
    std::set<std::string> names;
    std::vector<std::string> verdicts;  // every schedule's, checked one by one
    while (true) {
      Schedule s;
      for (size_t k = 0; k < f.knobs.size(); ++k) s.emplace_back(f.knobs[k].key, f.knobs[k].grid[at[k]]);
      dsl::Program q = codegen::with_schedule(p, s);
      std::string r = refusal(q, b);
      verdicts.push_back(r);
      if (r == "(accepted)") {
        legal.push_back(s);
        names.insert(f.kernel_name(q));
      } else {
        ++refused[r.substr(0, r.find_first_of("=0123456789"))];
      }
      size_t k = f.knobs.size();
      while (k > 0 && ++at[k - 1] == f.knobs[k - 1].grid.size()) at[--k] = 0;
      if (k == 0) break;
    }
    size_t n_refused = 0;
    for (const auto& [r, n] : refused) n_refused += n;
    std::cout << "[ schedule space ] " << p.name << " (" << p.family << "): " << legal.size() << " legal, " << n_refused
              << " refused\n";
    for (const auto& [r, n] : refused) std::cout << "    " << n << " x " << r << "...\n";
    EXPECT_EQ(legal.size() + n_refused, grid);
    EXPECT_GT(legal.size(), 20u);
    EXPECT_EQ(names.size(), legal.size()) << "two legal schedules share a kernel name";
    // schedule_space, which skips the rest of a refusal's block of later knobs, agrees everywhere.
    const codegen::Space space = codegen::schedule_space(p, b);
    ASSERT_EQ(space.size(), verdicts.size());
    EXPECT_EQ(space.legal, legal);
    for (size_t i = 0; i < verdicts.size(); ++i)
      EXPECT_EQ(space.verdicts[i] == 0 ? std::string("(accepted)") : space.reasons[space.verdicts[i] - 1], verdicts[i])
          << codegen::schedule_text(space.schedule(i));
  }
}

TEST(CodegenSparseStencil, GeneratedSourcesCompileAndPassTheStaticGate) {
  const Binding spmv_b{{"row_ptr", "col_idx", "values", "x", "y"}, {"M", "N", "NNZ"}};
  struct Case {
    const char* program;
    Schedule changes;
    int kernels;
  };
  const std::vector<Case> cases = {
      {kSpmv, {}, 1},
      {kSpmv, {{"strategy", "row_per_thread"}, {"vector", "1"}, {"cache_x", "readonly"}}, 1},
      {kSpmv, {{"vector", "32"}, {"cache_x", "shared"}}, 1},
      {kSpmv, {{"strategy", "nnz_split"}, {"vector", "16"}, {"cache_x", "shared"}}, 2},
      {kSpmm, {}, 1},
      {kEll, {}, 1},
      {kEll, {{"strategy", "row_per_thread"}, {"vector", "1"}, {"cache_x", "shared"}}, 1},
      {kCoo, {}, 2},
      {kCoo, {{"strategy", "vector_per_row"}, {"vector", "8"}, {"cache_x", "readonly"}}, 1},
      {kSpmm, {{"strategy", "vector_per_row"}, {"vector", "32"}, {"cache_x", "readonly"}}, 1},
      {kStencil, {}, 1},
      {kStencil, {{"halo", "registers"}, {"register_block", "4"}}, 1},
      {kStencil, {{"tile", "[32, 32]"}, {"register_block", "2"}}, 1},
      // vector > 1: the vector kernel and the scalar one the launcher falls back to.
      {kStencil, {{"halo", "registers"}, {"register_block", "4"}, {"vector", "4"}}, 2},
      {kStencil3d, {{"halo", "registers"}, {"vector", "2"}}, 2},
  };
  std::vector<CompileJob> jobs;
  for (const Case& c : cases) {
    dsl::Program p = scheduled(parse(c.program), c.changes);
    Binding b = c.program == kSpmm ? Binding{{"row_ptr", "col_idx", "values", "X", "Y"}, {"M", "K", "N", "NNZ"}}
                : c.program == kEll ? Binding{{"col_idx", "values", "x", "y"}, {"M", "N", "W", "NNZ"}}
                : c.program == kCoo ? Binding{{"row", "col", "values", "x", "y"}, {"M", "N", "NNZ"}}
                : p.family == "sparse" ? spmv_b
                                       : Binding{};
    ASSERT_EQ(refusal(p, b), "(accepted)");
    const std::string name = family(p).kernel_name(p);
    std::string src = family(p).generate(p, b);
    int n = 0;
    for (size_t at = src.find("__global__"); at != std::string::npos; at = src.find("__global__", at + 1)) ++n;
    EXPECT_EQ(n, c.kernels) << name;
    EXPECT_NE(src.find("// " + name + ": generated by ksol"), std::string::npos) << name;
    EXPECT_TRUE(static_scan(src).empty()) << name;
    CompileJob j;
    j.source_path = name + ".cu";
    j.source_text = src;
    jobs.push_back(j);
  }
  std::vector<CompileResult> res = compile_all(jobs);
  for (size_t i = 0; i < res.size(); ++i) EXPECT_TRUE(res[i].ok) << jobs[i].source_path << "\n" << res[i].message;
}

// The generated CUDA on the CPU against the tasks' float64 references, on small and odd sizes and
// every input distribution, in several schedules.
TEST(CodegenSparseStencil, HostEmulationMatchesTheTasksReferences) {
  struct Case {
    const char* task;
    const char* program;
    std::vector<Schedule> schedules;
    std::vector<std::map<std::string, double>> sizes;
  };
  const std::vector<Case> cases = {
      {"spmv_csr_f32",
       kSpmv,
       {{},
        {{"strategy", "row_per_thread"}, {"vector", "1"}, {"threads", "64"}, {"cache_x", "readonly"}},
        {{"vector", "32"}, {"threads", "64"}, {"cache_x", "shared"}},
        {{"strategy", "nnz_split"}, {"vector", "4"}, {"threads", "64"}},
        {{"strategy", "nnz_split"}, {"vector", "32"}, {"threads", "64"}, {"cache_x", "shared"}}},
       // The last size's rows span about 125 chunks of 4: the carries' warp sum loops several times per lane.
       {{{"M", 37}, {"N", 53}, {"NNZ", 211}}, {{"M", 64}, {"N", 7}, {"NNZ", 300}}, {{"M", 5}, {"N", 9}, {"NNZ", 0}},
        {{"M", 3}, {"N", 700}, {"NNZ", 1500}}}},
      {"spmm_csr_f32",
       kSpmm,
       {{},
        {{"vector", "1"}, {"threads", "64"}, {"cache_x", "readonly"}},
        {{"vector", "8"}, {"threads", "64"}},
        {{"strategy", "vector_per_row"}, {"vector", "4"}, {"threads", "64"}},
        {{"strategy", "vector_per_row"}, {"vector", "32"}, {"threads", "64"}, {"cache_x", "readonly"}}},
       {{{"M", 37}, {"K", 53}, {"N", 13}, {"NNZ", 211}}, {{"M", 64}, {"K", 7}, {"N", 40}, {"NNZ", 300}},
        {{"M", 5}, {"K", 9}, {"N", 3}, {"NNZ", 0}}, {{"M", 3}, {"K", 4}, {"N", 1}, {"NNZ", 7}}}},
      {"spmv_ell_f32",
       kEll,
       {{},
        {{"strategy", "row_per_thread"}, {"vector", "1"}, {"threads", "64"}, {"cache_x", "shared"}},
        {{"vector", "32"}, {"threads", "64"}, {"cache_x", "readonly"}}},
       {{{"M", 37}, {"N", 53}, {"W", 9}, {"NNZ", 211}}, {{"M", 64}, {"N", 7}, {"W", 7}, {"NNZ", 300}},
        {{"M", 5}, {"N", 9}, {"W", 1}, {"NNZ", 0}}}},
      {"spmv_coo_f32",
       kCoo,
       {{{"threads", "64"}},
        {{"vector", "1"}, {"threads", "64"}, {"cache_x", "shared"}},
        {{"strategy", "row_per_thread"}, {"vector", "1"}, {"threads", "64"}},
        {{"strategy", "vector_per_row"}, {"vector", "4"}, {"threads", "64"}, {"cache_x", "readonly"}}},
       // M = 3, NNZ = 300: rows of ~100 entries, runs of carries longer than a warp's 32 chunks.
       {{{"M", 37}, {"N", 53}, {"NNZ", 211}}, {{"M", 64}, {"N", 7}, {"NNZ", 300}}, {{"M", 5}, {"N", 9}, {"NNZ", 0}},
        {{"M", 3}, {"N", 200}, {"NNZ", 300}}}},
      {"stencil2d_f32",
       kStencil,
       {{{"tile", "[8, 32]"}},
        {{"tile", "[8, 32]"}, {"halo", "registers"}, {"register_block", "2"}},
        {{"tile", "[16, 32]"}, {"register_block", "4"}},
        {{"tile", "[16, 32]"}, {"halo", "registers"}, {"register_block", "4"}},
        {{"tile", "[8, 32]"}, {"halo", "registers"}, {"register_block", "8"}},
        {{"tile", "[8, 32]"}, {"halo", "registers"}, {"register_block", "1"}},
        // The vector kernel where W is a multiple of the vector (these buffers start 16-byte aligned:
        // each ends at a page and holds a multiple of 16 bytes), the scalar one elsewhere.
        {{"tile", "[8, 32]"}, {"halo", "registers"}, {"register_block", "2"}, {"vector", "4"}},
        {{"tile", "[16, 64]"}, {"halo", "registers"}, {"register_block", "4"}, {"vector", "2"}},
        {{"tile", "[4, 32]"}, {"halo", "registers"}, {"register_block", "1"}, {"vector", "4"}}},
       {{{"H", 19}, {"W", 37}}, {{"H", 16}, {"W", 32}}, {{"H", 1}, {"W", 5}}, {{"H", 3}, {"W", 2}}, {{"H", 19}, {"W", 36}},
        {{"H", 5}, {"W", 8}}, {{"H", 2}, {"W", 4}}}},
      {"stencil3d_f32",
       kStencil3d,
       {{},
        {{"tile", "[8, 4, 32]"}, {"register_block", "8"}},
        {{"tile", "[4, 8, 32]"}, {"halo", "shared"}, {"register_block", "2"}},
        {{"tile", "[4, 8, 32]"}, {"halo", "registers"}, {"register_block", "2"}, {"vector", "4"}}},
       {{{"D", 9}, {"H", 11}, {"W", 37}}, {{"D", 1}, {"H", 3}, {"W", 5}}, {{"D", 4}, {"H", 2}, {"W", 33}},
        {{"D", 5}, {"H", 6}, {"W", 36}}}},
  };
  for (const Case& c : cases) {
    Task t = load_task(resolve_task_path(c.task));
    Reference ref(t);
    const Binding b = binding_of(t);
    for (const Schedule& changes : c.schedules) {
      dsl::Program p = scheduled(parse(c.program), changes);
      ASSERT_EQ(refusal(p, b), "(accepted)") << c.task;
      const std::string name = family(p).kernel_name(p);
      codegen::HostBuild build = codegen::build_for_host(family(p).generate(p, b));
      ASSERT_TRUE(build.ok) << name << "\n" << build.message;
      for (const auto& dims : c.sizes) {
        SizeSet s;
        s.name = "cpu";
        s.dims = dims;
        for (Distribution d : distributions_for(t)) {
          std::vector<HostTensor> in = generate_inputs(t, s, d, 5);
          std::vector<HostTensor> want = ref.run(t, s, in, false);
          std::vector<HostTensor> mag = t.magnitude == "abs" ? ref.run(t, s, in, true) : want;
          OutputBytes buffers(t.tensors.size());
          for (size_t k = 0; k < t.tensors.size(); ++k)
            buffers[k] = t.tensors[k].role == Role::in
                             ? in[k].bytes
                             : HostVec<uint8_t>(t.numel(t.tensors[k], s) * dtype_size(t.tensors[k].dtype), 0xFF);
          std::vector<int64_t> dv;
          for (const std::string& dn : t.dims) dv.push_back(static_cast<int64_t>(dims.at(dn)));
          codegen::HostRun r = codegen::run_on_host(build.so_path, buffers, dv);
          ASSERT_TRUE(r.ok) << name << ": " << r.message;
          ASSERT_EQ(r.rc, 0) << name;
          for (size_t k = 0; k < t.tensors.size(); ++k) {
            if (t.tensors[k].role != Role::out) continue;
            CompareResult cr = compare_tensor(t, s, k, in, buffers, want, t.magnitude == "abs" ? &mag : nullptr);
            EXPECT_TRUE(cr.ok) << name << " " << distribution_name(d) << " " << dims.begin()->second << ": "
                               << cr.message;
          }
        }
      }
    }
  }
}

// The vector kernel's accesses are vector instructions in nvcc's PTX: one 16-byte load per row of
// the centre column and one 16-byte store per output row, no element stores (nvcc splits a struct
// assignment, and a vector store at &V[e], into element stores; the generator avoids both).
TEST(CodegenStencil, VectorKernelLoadsAndStoresVectors) {
  dsl::Program p = scheduled(parse(kStencil), {{"halo", "registers"}, {"register_block", "4"}, {"vector", "4"}});
  ASSERT_EQ(refusal(p), "(accepted)");
  const std::string dir = (std::filesystem::temp_directory_path() / ("ksol_ptx_" + std::to_string(::getpid()))).string();
  std::filesystem::create_directories(dir);
  ksol::write_file_atomic(dir + "/v.cu", family(p).generate(p, Binding{}));
  ksol::ProcessResult r = ksol::run_process({"nvcc", "-std=c++17", "-arch=sm_90", "-ptx", "-I" + std::string(KSOL_SOURCE_DIR) + "/include",
                                             dir + "/v.cu", "-o", dir + "/v.ptx"},
                                            300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string ptx = ksol::read_file(dir + "/v.ptx");
  std::filesystem::remove_all(dir);
  // The vector kernel's body: from its .entry to the next one (or the end).
  size_t at = ptx.find("regs_rb4_v4EPKfPfll(");
  ASSERT_NE(at, std::string::npos) << "no vector kernel in the PTX";
  size_t end = ptx.find(".entry", at);
  const std::string body = ptx.substr(at, end == std::string::npos ? std::string::npos : end - at);
  auto count = [&](const std::string& what) {
    int n = 0;
    for (size_t i = body.find(what); i != std::string::npos; i = body.find(what, i + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count("ld.global.nc.v4.f32"), 6);  // rows r0 - 1 .. r0 + 4 of the centre column
  EXPECT_EQ(count("st.global.v4"), 4);         // one per output row
  EXPECT_EQ(count("st.global.f32"), 0);
  EXPECT_EQ(ptx.find("regs_rb4_v4_scalarEPKfPfll(") != std::string::npos, true) << "no scalar fallback kernel";
}
