// Every tests/golden/dsl/<name>.ksol must print exactly <name>.expected (print_program), and its
// printed source must read back to the same IR. Adding a case needs no C++: drop the .ksol in,
// run once with KSOL_UPDATE_GOLDEN=1 to write its .expected, and review that file.
// The examples of docs/DSL_CARD.md and docs/DSL.md are parsed too, so the docs cannot rot.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "../unit/doc_examples.h"
#include "core/util.h"
#include "dsl/ir.h"

namespace fs = std::filesystem;
using ksol::dsl::DslError;
using ksol::dsl::parse_program;
using ksol::dsl::print_program;
using ksol::dsl::print_source;

namespace {

std::vector<fs::path> golden_programs() {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(fs::path(KSOL_SOURCE_DIR) / "tests/golden/dsl"))
    if (e.path().extension() == ".ksol") out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// The first line that is neither blank nor a comment.
std::string first_code_line(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::string t = ksol::trim(line);
    if (!t.empty() && t[0] != '#') return t;
  }
  return "";
}

}  // namespace

TEST(DslGolden, EveryProgramPrintsItsExpectedIr) {
  bool update = std::getenv("KSOL_UPDATE_GOLDEN") != nullptr;
  int cases = 0;
  for (const fs::path& path : golden_programs()) {
    ++cases;
    std::string name = path.filename().string();
    fs::path expected_path = fs::path(path).replace_extension(".expected");
    std::string got;
    try {
      got = print_program(parse_program(ksol::read_file(path.string()), name));
    } catch (const DslError& e) {
      ADD_FAILURE() << name << " failed to parse:\n" << e.what();
      continue;
    }
    if (update) {
      std::ofstream(expected_path) << got;
      continue;
    }
    ASSERT_TRUE(fs::exists(expected_path)) << "missing " << expected_path << " (run with KSOL_UPDATE_GOLDEN=1)";
    EXPECT_EQ(got, ksol::read_file(expected_path.string())) << "case " << name;
  }
  EXPECT_GE(cases, 10);
}

// print_program's text is not DSL syntax (it shows extents and types), so the round trip goes
// through print_source: parse, print as source, parse again; both IR prints must agree, and
// printing the source again must change nothing.
TEST(DslGolden, PrintedSourceReadsBackToTheSameIr) {
  for (const fs::path& path : golden_programs()) {
    std::string name = path.filename().string();
    try {
      ksol::dsl::Program first = parse_program(ksol::read_file(path.string()), name);
      std::string source = print_source(first);
      ksol::dsl::Program second = parse_program(source, name + " (printed)");
      EXPECT_EQ(print_program(second), print_program(first)) << "case " << name << ", printed source:\n" << source;
      EXPECT_EQ(print_source(second), source) << "case " << name;
    } catch (const DslError& e) {
      ADD_FAILURE() << name << ": " << e.what();
    }
  }
}

TEST(DslGolden, EveryExampleOfTheCardParses) {
  std::vector<std::string> blocks = ksol::test_support::card_examples();
  for (size_t i = 0; i < blocks.size(); ++i) {
    try {
      parse_program(blocks[i], "DSL_CARD.md example " + std::to_string(i + 1));
    } catch (const DslError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(blocks.size(), 4u);
}

// docs/DSL.md marks its blocks with a bare fence; its programs are the ones that start with
// `kernel` once comments are skipped (the grammar and the error sample do not).
TEST(DslGolden, EveryProgramOfTheDesignDocParses) {
  std::string doc = ksol::read_file(std::string(KSOL_SOURCE_DIR) + "/docs/DSL.md");
  int programs = 0;
  for (const std::string& block : ksol::test_support::fenced_blocks(doc, "```")) {
    if (first_code_line(block).rfind("kernel ", 0) != 0) continue;
    ++programs;
    try {
      parse_program(block, "DSL.md example " + std::to_string(programs));
    } catch (const DslError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(programs, 2);
}

// What a code generator reads, field by field, for one program of each shape it cares about.
TEST(DslGolden, CheckedFieldsOfGemmWithEpilogue) {
  auto p = parse_program(ksol::read_file(std::string(KSOL_SOURCE_DIR) + "/tests/golden/dsl/gemm_bias_gelu.ksol"),
                         "gemm_bias_gelu.ksol");
  EXPECT_EQ(p.family, "gemm");
  EXPECT_EQ(p.file, "gemm_bias_gelu.ksol");
  EXPECT_EQ(p.dims, (std::vector<std::string>{"M", "K", "N"}));
  ASSERT_EQ(p.defs.size(), 2u);
  const ksol::dsl::Definition& acc = p.defs[0];
  EXPECT_EQ(acc.extents, (std::vector<std::string>{"M", "N"}));
  EXPECT_EQ(acc.reduce, ksol::dsl::ReduceOp::sum);
  EXPECT_EQ(acc.over, "k");
  EXPECT_EQ(acc.over_extent, "K");
  EXPECT_EQ(acc.type, ksol::dsl::Type::f32);
  EXPECT_FALSE(acc.is_output);
  EXPECT_TRUE(p.defs[1].is_output);
  EXPECT_EQ(p.defs[1].type, ksol::dsl::Type::bf16);
  EXPECT_EQ(p.defs[1].body.kind, ksol::dsl::Expr::Kind::cast);
  ASSERT_NE(p.knob("tile"), nullptr);
  EXPECT_EQ(p.knob("tile")->list, (std::vector<int64_t>{128, 256, 64}));
  EXPECT_EQ(p.knob("mainloop")->ident, "cooperative");
  EXPECT_EQ(p.knob("stages")->integer, 4);
  EXPECT_EQ(p.knob("epilogue"), nullptr);
  EXPECT_EQ(p.schedule_keys.at("stages").line, 9);
  ASSERT_NE(p.param("bias"), nullptr);
  EXPECT_EQ(p.def("acc"), &p.defs[0]);
}

TEST(DslGolden, NumbersAndDimsTakeTheTypeTheyMeet) {
  auto p = parse_program(
      "kernel k(X: f16[N], I: i32[N]) -> (Y: f16[N], J: i32[N]) {\n"
      "  Y[i] = X[i] * 0.5 + N\n"
      "  J[i] = I[i] * 2 + N\n"
      "}\n",
      "k.ksol");
  const ksol::dsl::Expr& y = p.defs[0].body;  // (X[i] * 0.5) + N
  EXPECT_EQ(y.type, ksol::dsl::Type::f16);
  EXPECT_EQ(y.args[0].args[1].type, ksol::dsl::Type::f16);
  EXPECT_EQ(y.args[1].kind, ksol::dsl::Expr::Kind::dim);
  EXPECT_EQ(y.args[1].type, ksol::dsl::Type::f16);
  EXPECT_EQ(p.defs[1].body.args[1].type, ksol::dsl::Type::i32);
  EXPECT_EQ(p.family, "elementwise");
}
