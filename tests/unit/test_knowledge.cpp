// The long-term memory (knowledge/ and src/agents/knowledge): the real folder loads and covers
// every cell; recorded and synthetic profiles get their expected method and rule; broken cards
// and tables fail with exact located messages; predicates, moves and derived features behave.
#define TOML_HEADER_ONLY 1
#define TOML_EXCEPTIONS 0
#include <gtest/gtest.h>
#include <toml++/toml.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <regex>

#include "agents/knowledge.h"
#include "core/util.h"

namespace fs = std::filesystem;
using namespace ksol::agents;

namespace {

std::string source_dir() { return KSOL_SOURCE_DIR; }
std::string knowledge_dir() { return source_dir() + "/knowledge"; }

const Knowledge& real() {
  static const Knowledge k = load_knowledge(knowledge_dir());
  return k;
}

// A copy of the real knowledge folder in a fresh temporary directory, removed at the end.
class TempKnowledge {
 public:
  TempKnowledge() {
    dir_ = (fs::temp_directory_path() / ("ksol_knowledge_" + std::to_string(getpid()) + "_" + std::to_string(counter_++))).string();
    fs::remove_all(dir_);
    fs::copy(knowledge_dir(), dir_, fs::copy_options::recursive);
  }
  ~TempKnowledge() { fs::remove_all(dir_); }
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }
  void write(const std::string& rel, const std::string& text) const {
    std::ofstream(path(rel), std::ios::binary | std::ios::trunc) << text;
  }
  std::string read(const std::string& rel) const { return ksol::read_file(path(rel)); }
  // The message load_knowledge throws, or "" when it loads.
  std::string error() const {
    try {
      load_knowledge(dir_);
    } catch (const KnowledgeError& e) {
      return e.what();
    }
    return "";
  }

 private:
  std::string dir_;
  static inline int counter_ = 0;
};

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

// A minimal valid card standing in for vector_loads (the table offers it for elementwise and
// rowwise under all three bottlenecks). Line numbers in the tests below refer to this text.
std::string vector_card(const std::string& requires_line = R"(requires = ["vector_bytes < 16"])",
                        const std::string& families_line = R"(families = ["elementwise", "rowwise", "stencil"])",
                        const std::string& moves_line = R"(dsl_moves = ["double vector"])",
                        const std::string& id_line = R"(id = "vector_loads")") {
  return id_line + "\n" +                                                         // 1
         "title = \"Vector loads\"\n" +                                           // 2
         families_line + "\n" +                                                   // 3
         "bottlenecks = [\"memory_bandwidth\", \"memory_latency\", \"compute\"]\n" +  // 4
         "when = [\"Scalar loads.\"]\n" +                                         // 5
         requires_line + "\n" +                                                   // 6
         "why = \"Wider accesses move more bytes per instruction.\"\n" +          // 7
         "how = \"float4.\"\n" +                                                  // 8
         moves_line + "\n" +                                                      // 9
         "expected = \"Faster.\"\n" +                                             // 10
         "speedup = [1.1, 1.6]\n" +                                               // 11
         "risks = [\"Alignment.\"]\n";                                            // 12
}

}  // namespace

// --- the real folder ---------------------------------------------------------------------------

TEST(Knowledge, RealFolderLoadsWithoutWarnings) {
  const Knowledge& k = real();
  EXPECT_GE(k.methods.size(), 25u);
  EXPECT_FALSE(k.rules.empty());
  for (auto& w : k.warnings) ADD_FAILURE() << w;
  // The topics the engine was asked to know, each a card.
  for (const char* id :
       {"coalesced_access", "vector_loads", "smem_tiling", "register_blocking", "warp_shuffle_reduction",
        "block_reduction", "two_pass_reduction", "multistage_pipeline", "tma_pipeline", "epilogue_fusion", "split_k",
        "stream_k", "persistent_kernel", "occupancy_launch_bounds", "loop_unrolling", "smem_bank_padding",
        "warp_specialization_pingpong", "tensor_cores_wgmma", "vector_per_row", "nnz_split_merge_path", "cache_x",
        "stencil_halo_tiling", "temporal_blocking", "op_fusion", "algebraic_simplification", "raster_swizzle_l2",
        "cluster_multicast", "ilp_multiple_accumulators", "avoid_local_spills"})
    EXPECT_NE(k.method(id), nullptr) << id;
  for (auto& [id, m] : k.methods) {
    EXPECT_FALSE(m.why.empty()) << id;
    EXPECT_FALSE(m.how.empty()) << id;
    EXPECT_FALSE(m.risks.empty()) << id;
    EXPECT_LE(m.speedup_lo, m.speedup_hi) << id;
  }
}

TEST(Knowledge, EveryCellIsCovered) {
  const Knowledge& k = real();
  auto cover = k.coverage();
  ASSERT_EQ(cover.size(), 18u);
  for (auto& b : bottleneck_classes())
    for (auto& f : dsl_families()) {
      EXPECT_GE(cover[std::make_pair(b, f)].size(), 2u) << b << "/" << f;
      // ... and by a rule that always fires, so a profile with only the two axes gets an answer.
      bool fallback = false;
      for (auto& r : k.rules) fallback |= r.bottleneck == b && r.family == f && r.unconditional() && r.methods.size() >= 2;
      EXPECT_TRUE(fallback) << b << "/" << f;
    }
}

// The schedule keys in code mirror the table in docs/DSL.md: same keys per family, and the same
// values wherever the doc lists them.
TEST(Knowledge, ScheduleKeysMirrorTheDslDoc) {
  std::string doc = ksol::read_file(source_dir() + "/docs/DSL.md");
  std::istringstream in(doc);
  std::map<std::string, std::map<std::string, std::vector<std::string>>> from_doc;
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (!std::regex_match(line, m, std::regex(R"(\| (gemm|rowwise|elementwise|sparse|stencil)\b[^|]*\| (.*) \|)"))) continue;
    auto& keys = from_doc[m[1]];
    std::string cells = m[2], last;
    int depth = 0;
    for (size_t i = 0; i < cells.size(); ++i) {
      char c = cells[i];
      if (c == '(') ++depth;
      if (c == ')') --depth;
      if (c != '`') continue;
      size_t j = cells.find('`', i + 1);
      std::string word = cells.substr(i + 1, j - i - 1);
      if (depth == 0) {
        keys[last = word];
      } else {
        keys[last].push_back(word);
      }
      i = j;
    }
  }
  ASSERT_EQ(from_doc.size(), 5u);
  for (auto& [family, keys] : from_doc) {
    std::set<std::string> code_keys, doc_keys;
    for (auto& k : schedule_keys())
      if (k.family == family) code_keys.insert(k.key);
    for (auto& [key, values] : keys) {
      doc_keys.insert(key);
      const ScheduleKey* k = find_schedule_key(family, key);
      ASSERT_NE(k, nullptr) << family << "." << key;
      if (!values.empty()) {
        EXPECT_EQ(k->choices, values) << family << "." << key;
      }
    }
    EXPECT_EQ(code_keys, doc_keys) << family;
  }
}

// --- choices on profiles -------------------------------------------------------------------------

TEST(Knowledge, ProfilesGetTheirExpectedMethodAndRule) {
  const Knowledge& k = real();
  int cases = 0;
  std::vector<fs::path> files;
  for (auto& e : fs::directory_iterator(source_dir() + "/tests/unit/data/profiles"))
    if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (auto& path : files) {
    SCOPED_TRACE(path.filename().string());
    ++cases;
    Features f = load_features(path.string(), &k);
    auto parsed = toml::parse_file(path.string());
    ASSERT_TRUE(parsed) << parsed.error().description();
    const toml::table& expect = *parsed.table()["expect"].as_table();
    ChooseOptions opt;
    opt.max = 3;
    opt.dsl_only = expect["dsl_only"].value_or(false);
    if (auto* ex = expect["exclude"].as_array())
      for (auto& e : *ex) opt.exclude.insert(*e.value<std::string>());
    Trace trace;
    auto choices = choose(k, f, opt, &trace);
    ASSERT_FALSE(choices.empty()) << ksol::join(trace.lines, "\n");
    EXPECT_EQ(choices[0].method, expect["method"].value_or(std::string())) << ksol::join(trace.lines, "\n");
    EXPECT_EQ(choices[0].rule, expect["rule"].value_or(std::string())) << ksol::join(trace.lines, "\n");
    EXPECT_EQ(choices[0].rank, 1);
    EXPECT_EQ(explain(choices[0]).rfind("rule " + choices[0].rule + " [", 0), 0u) << explain(choices[0]);
    for (auto& c : choices) EXPECT_FALSE(opt.exclude.count(c.method));
    if (auto* unk = expect["unknown"].as_array()) {
      std::set<std::string> want;
      for (auto& e : *unk) want.insert(*e.value<std::string>());
      EXPECT_EQ(trace.unknown_features, want);
    }
  }
  EXPECT_GE(cases, 8);
}

TEST(Knowledge, ExplainNamesRuleMethodAndTheValuesThatHeld) {
  const Knowledge& k = real();
  Features f = load_features(source_dir() + "/tests/unit/data/profiles/relu_f32_naive_large.toml", &k);
  auto choices = choose(k, f, 2);
  ASSERT_EQ(choices.size(), 2u);
  EXPECT_EQ(explain(choices[0]),
            "rule R03 [memory_bandwidth/elementwise] chose vector_loads (#1) because vector_bytes=4 < 16; "
            "moves: double vector; set vector 4|8");
  EXPECT_EQ(explain(choices[1]),
            "rule R03 [memory_bandwidth/elementwise] chose thread_coarsening (#2) because items_per_thread=1 < 4; "
            "moves: double items_per_thread; set items_per_thread 2..8");

  // A rule's condition and the card's requires both appear, each once.
  f = load_features(source_dir() + "/tests/unit/data/profiles/rmsnorm_bf16_naive_medium.toml", &k);
  choices = choose(k, f, 1);
  ASSERT_EQ(choices.size(), 1u);
  EXPECT_EQ(choices[0].reasons, (std::vector<std::string>{"row_passes=2 > 1", "cache_row=none"}));
}

TEST(Knowledge, ChoiceIsDeterministicAndRespectsMax) {
  const Knowledge& k = real();
  Features f = load_features(source_dir() + "/tests/unit/data/profiles/spmv_csr_naive_large_powerlaw.toml", &k);
  Trace t1, t2;
  auto a = choose(k, f, 5, &t1), b = choose(k, f, 5, &t2);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(explain(a[i]), explain(b[i]));
  EXPECT_EQ(t1.lines, t2.lines);
  EXPECT_EQ(choose(k, f, 1).size(), 1u);
  EXPECT_TRUE(choose(k, f, 0).empty());
}

TEST(Knowledge, MissingAxesGiveNoChoiceAndAreReported) {
  Features f;
  f.num["achieved_bw_frac"] = 0.4;
  Trace t;
  EXPECT_TRUE(choose(real(), f, 3, &t).empty());
  EXPECT_EQ(t.unknown_features, (std::set<std::string>{"bottleneck", "family"}));
}

// --- predicates --------------------------------------------------------------------------------

TEST(Predicates, ParseAndEvaluate) {
  std::string err;
  int col = -1;
  auto p = parse_predicate("achieved_bw_frac < 0.6", &err, &col);
  ASSERT_TRUE(p) << err;
  Features f;
  f.num["achieved_bw_frac"] = 0.41;
  Evaluation e = evaluate(*p, f, "rowwise");
  EXPECT_EQ(e.truth, Truth::yes);
  EXPECT_EQ(e.detail, "achieved_bw_frac=0.41 < 0.6");
  f.num["achieved_bw_frac"] = 0.6;
  EXPECT_EQ(evaluate(*p, f, "rowwise").truth, Truth::no);

  p = parse_predicate("precision in [bf16, fp16]", &err, &col);
  ASSERT_TRUE(p) << err;
  f.str["precision"] = "fp16";
  e = evaluate(*p, f, "gemm");
  EXPECT_EQ(e.truth, Truth::yes);
  EXPECT_EQ(e.detail, "precision=fp16 in [bf16, fp16]");
  p = parse_predicate("precision not in [bf16, fp16]", &err, &col);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(evaluate(*p, f, "gemm").truth, Truth::no);

  // A family prefix limits a predicate to its family; elsewhere it neither holds nor fails.
  p = parse_predicate("stencil: register_block < 4", &err, &col);
  ASSERT_TRUE(p) << err;
  EXPECT_EQ(p->family, "stencil");
  EXPECT_EQ(evaluate(*p, f, "gemm").truth, Truth::skipped);
}

TEST(Predicates, UnknownFeaturesAreFalseAndReported) {
  std::string err;
  int col = 0;
  auto p = parse_predicate("occupancy < 0.5", &err, &col);
  ASSERT_TRUE(p);
  Features f;
  Evaluation e = evaluate(*p, f, "elementwise");
  EXPECT_EQ(e.truth, Truth::unknown);
  EXPECT_EQ(e.detail, "occupancy unknown");
  // Given as text where a number is expected: unknown too.
  f.str["occupancy"] = "high";
  EXPECT_EQ(evaluate(*p, f, "elementwise").truth, Truth::unknown);

  // Through choose: rule R20 needs occupancy; without it the rule does not fire, the trace says
  // why, and the feature is reported.
  f = Features{};
  f.str["bottleneck"] = "memory_latency";
  f.str["family"] = "elementwise";
  f.num["spills"] = 0;
  f.num["coalesced_frac"] = 1;
  f.num["items_per_thread"] = 1;
  Trace t;
  auto c = choose(real(), f, 1, &t);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].method, "thread_coarsening");
  EXPECT_EQ(c[0].rule, "R21");
  EXPECT_TRUE(t.unknown_features.count("occupancy"));
  EXPECT_NE(std::find(t.lines.begin(), t.lines.end(), "R20 skipped: occupancy unknown (predicate 'occupancy < 0.5' is false)"),
            t.lines.end())
      << ksol::join(t.lines, "\n");
}

TEST(Predicates, ParseErrorsHaveColumns) {
  struct Case {
    const char* text;
    const char* error;
    int column;
  };
  for (const Case& c : std::vector<Case>{
           {"< 3", "expected a feature name", 0},
           {"vector ~ 4", "expected a comparison (<, <=, >, >=, ==, !=, in, not in)", 7},
           {"vector <", "expected a number or a name", 8},
           {"reduction < warp", "a name compares only with ==, !=, in, not in", 10},
           {"precision in bf16", "expected '[' after 'in'", 13},
           {"vector in [1, two]", "a list mixes numbers and names", 14},
           {"vector < 4 4", "unexpected '4'", 11},
           {"gpu: vector < 4", "unknown family 'gpu' before ':'", 0},
       }) {
    std::string err;
    int col = -1;
    EXPECT_FALSE(parse_predicate(c.text, &err, &col)) << c.text;
    EXPECT_EQ(err, c.error) << c.text;
    EXPECT_EQ(col, c.column) << c.text;
  }
}

// --- moves --------------------------------------------------------------------------------------

TEST(Moves, ParseAndCheckAgainstFamilies) {
  std::string err;
  int col = 0;
  auto m = parse_move("set split_k 2..8", &err, &col);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->verb, Move::Verb::set);
  EXPECT_EQ(m->key, "split_k");
  ASSERT_EQ(m->alternatives.size(), 1u);
  EXPECT_EQ(m->alternatives[0].kind, MoveValue::Kind::range);
  EXPECT_EQ(check_move(*m, "gemm"), "");
  EXPECT_EQ(check_move(*m, "rowwise", &col),
            "family 'rowwise' has no schedule key 'split_k' (its keys: threads, rows_per_block, vector, items_per_thread, "
            "reduction, cache_row, unroll, math, keep, online, blocks_per_sm, tail, store_hint, preload, grid)");
  EXPECT_EQ(col, 4);

  m = parse_move("set tile [128, 256, 64]|[256, 128, 64]", &err, &col);
  ASSERT_TRUE(m) << err;
  EXPECT_EQ(m->value, "[128, 256, 64]|[256, 128, 64]");
  EXPECT_EQ(check_move(*m, "gemm"), "");
  EXPECT_EQ(check_move(*m, "stencil"), "");  // [Z, Y, X]
  m = parse_move("set tile [128, 256]", &err, &col);
  ASSERT_TRUE(m);
  EXPECT_EQ(check_move(*m, "gemm"), "'tile' of family 'gemm' takes a list of 3 integers");
  EXPECT_EQ(check_move(*m, "stencil"), "");
  m = parse_move("set tile [16]", &err, &col);
  ASSERT_TRUE(m);
  EXPECT_EQ(check_move(*m, "stencil"), "'tile' of family 'stencil' takes a list of 2 or 3 integers");

  m = parse_move("set mainloop warp", &err, &col);
  ASSERT_TRUE(m);
  EXPECT_EQ(check_move(*m, "gemm", &col), "'mainloop' of family 'gemm' is one of cooperative, pingpong, simt, mma");
  EXPECT_EQ(col, 13);

  m = parse_move("double tile", &err, &col);
  ASSERT_TRUE(m);
  EXPECT_EQ(check_move(*m, "gemm"), "'double' needs an integer key; 'tile' of family 'gemm' is a list");

  for (const char* ok : {"fuse", "rewrite", "port", "increase stages", "set reduction block", "set cache_row shared",
                         "set strategy vector_per_row", "double threads", "set mainloop pingpong"}) {
    m = parse_move(ok, &err, &col);
    ASSERT_TRUE(m) << ok << ": " << err;
    bool fits = false;
    for (auto& fam : dsl_families()) fits |= check_move(*m, fam).empty();
    EXPECT_TRUE(fits) << ok;
  }

  EXPECT_FALSE(parse_move("shrink tile", &err, &col));
  EXPECT_EQ(err, "unknown move 'shrink' (set, double, halve, increase, decrease, fuse, rewrite, port)");
  EXPECT_FALSE(parse_move("set split_k 8..2", &err, &col));
  EXPECT_EQ(err, "empty range 8..2");
  EXPECT_EQ(col, 12);
  EXPECT_FALSE(parse_move("fuse all", &err, &col));
  EXPECT_EQ(err, "'fuse' takes no key");
}

// --- derived features ---------------------------------------------------------------------------

TEST(Features, DerivedFromTheVocabulary) {
  Features f;
  f.num = {{"M", 4097}, {"N", 511}, {"K", 1023}, {"tile_m", 128}, {"tile_n", 256}, {"tile_k", 64}, {"sm_count", 132}};
  derive_features(real(), &f);
  EXPECT_EQ(f.num["output_tiles"], 66);
  EXPECT_DOUBLE_EQ(f.num["tile_waves"], 0.5);
  EXPECT_DOUBLE_EQ(f.num["wave_efficiency"], 0.5);
  EXPECT_EQ(f.num["k_tiles"], 16);
  EXPECT_FALSE(f.num.count("vector_bytes"));  // its inputs are unknown

  // A value the profile gives is kept; a non-finite result is left out.
  Features g;
  g.num = {{"rows", 10}, {"sm_count", 0}, {"vector", 4}, {"elem_bytes", 2}, {"vector_bytes", 99}};
  derive_features(real(), &g);
  EXPECT_FALSE(g.num.count("rows_per_sm"));
  EXPECT_EQ(g.num["vector_bytes"], 99);
}

TEST(Features, ProfileFilesAreChecked) {
  TempKnowledge t;
  t.write("p.toml", "[features]\nbottleneck = \"memory_bandwidth\"\nvektor = 4\n");
  try {
    load_features(t.path("p.toml"), &real());
    ADD_FAILURE() << "loaded";
  } catch (const KnowledgeError& e) {
    EXPECT_EQ(std::string(e.what()), t.path("p.toml") + ":3:1: error: unknown feature 'vektor' (see " + real().dir +
                                         "/features.toml)\n  vektor = 4\n  ^");
  }
  t.write("p.toml", "family = \"dense\"\n");
  try {
    load_features(t.path("p.toml"), &real());
    ADD_FAILURE() << "loaded";
  } catch (const KnowledgeError& e) {
    EXPECT_EQ(std::string(e.what()),
              t.path("p.toml") + ":1:10: error: 'dense' is not a value of feature 'family' (gemm, conv, rowwise, elementwise, "
                                 "sparse, stencil)\n  family = \"dense\"\n           ^");
  }
}

// --- broken knowledge: exact located errors -------------------------------------------------------

TEST(KnowledgeErrors, TheMinimalCardIsValid) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card());
  EXPECT_EQ(t.error(), "");
}

TEST(KnowledgeErrors, UnknownFeatureInRequires) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card(R"(requires = ["vektor_bytes < 16"])"));
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":6:14: error: unknown feature 'vektor_bytes' (declare it in features.toml)\n"
                           "  requires = [\"vektor_bytes < 16\"]\n"
                           "               ^");
}

TEST(KnowledgeErrors, NameComparedWithLessThan) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card(R"(requires = ["reduction < warp"])"));
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":6:24: error: bad predicate: a name compares only with ==, !=, in, not in\n"
                           "  requires = [\"reduction < warp\"]\n"
                           "                         ^");
}

TEST(KnowledgeErrors, ValueNotInTheFeaturesValues) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card(R"(requires = ["reduction != wrap"])"));
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":6:27: error: 'wrap' is not a value of feature 'reduction' (warp, block, two_pass, atomic, serial)\n"
                           "  requires = [\"reduction != wrap\"]\n"
                           "                            ^");
}

TEST(KnowledgeErrors, MoveNamesAKeyTheFamilyLacks) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card(R"(requires = [])", R"(families = ["elementwise", "rowwise"])",
                                                   R"(dsl_moves = ["double vector", "set split_k 2"])"));
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":9:36: error: bad move: family 'elementwise' has no schedule key 'split_k' (its keys: threads, "
                           "vector, items_per_thread, unroll, transpose)\n"
                           "  dsl_moves = [\"double vector\", \"set split_k 2\"]\n"
                           "                                     ^");
}

TEST(KnowledgeErrors, FamilyWithoutAMove) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml",
          vector_card(R"(requires = [])", R"(families = ["elementwise", "rowwise", "stencil"])",
                      R"(dsl_moves = ["elementwise: double vector", "rowwise: double vector"])"));
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":9:13: error: no move for family 'stencil': add one, or list the family in cuda_only\n"
                           "  dsl_moves = [\"elementwise: double vector\", \"rowwise: double vector\"]\n"
                           "              ^");
}

TEST(KnowledgeErrors, IdMustMatchTheFileName) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card(R"(requires = [])", R"(families = ["elementwise", "rowwise"])",
                                                   R"(dsl_moves = ["double vector"])", R"(id = "vector_load")"));
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":1:6: error: id 'vector_load' does not match the file name 'vector_loads.toml'\n"
                           "  id = \"vector_load\"\n"
                           "       ^");
}

TEST(KnowledgeErrors, TomlSyntax) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", "id = \"vector_loads\"\ntitle = \n");
  std::string e = t.error();
  EXPECT_EQ(e.rfind(t.path("methods/vector_loads.toml") + ":2:", 0), 0u) << e;
}

TEST(KnowledgeErrors, UnknownKeyInACard) {
  TempKnowledge t;
  t.write("methods/vector_loads.toml", vector_card() + "speedups = [1, 2]\n");
  EXPECT_EQ(t.error(), t.path("methods/vector_loads.toml") +
                           ":13:1: error: unknown key 'speedups' in a method card (keys: id, title, families, bottlenecks, "
                           "when, requires, why, how, dsl_moves, cuda_only, expected, speedup, risks, related)\n"
                           "  speedups = [1, 2]\n"
                           "  ^");
}

TEST(KnowledgeErrors, TableNamesAMissingMethod) {
  TempKnowledge t;
  std::string table = t.read("decision_table.toml");
  int line = count_lines(table) + 6;
  t.write("decision_table.toml", table +
                                     "\n[[rule]]\n"
                                     "id = \"R99\"\n"
                                     "bottleneck = \"compute\"\n"
                                     "family = \"gemm\"\n"
                                     "methods = [\"tensor_cores_wgmma\", \"warp_shuffle\"]\n");
  EXPECT_EQ(t.error(), t.path("decision_table.toml") + ":" + std::to_string(line) +
                           ":34: error: no method card 'warp_shuffle' (expected methods/warp_shuffle.toml)\n"
                           "  methods = [\"tensor_cores_wgmma\", \"warp_shuffle\"]\n"
                           "                                   ^");
}

TEST(KnowledgeErrors, TableOffersAMethodOutsideItsFamilies) {
  TempKnowledge t;
  std::string table = t.read("decision_table.toml");
  int line = count_lines(table) + 6;
  t.write("decision_table.toml", table +
                                     "\n[[rule]]\n"
                                     "id = \"R99\"\n"
                                     "bottleneck = \"memory_bandwidth\"\n"
                                     "family = \"sparse\"\n"
                                     "methods = [\"row_caching\"]\n");
  EXPECT_EQ(t.error(), t.path("decision_table.toml") + ":" + std::to_string(line) +
                           ":12: error: method 'row_caching' does not apply to family 'sparse' (its families: rowwise)\n"
                           "  methods = [\"row_caching\"]\n"
                           "             ^");
}

TEST(KnowledgeErrors, UncoveredCell) {
  TempKnowledge t;
  std::string table = t.read("decision_table.toml");
  // Drop R36, the only rule of (compute, elementwise).
  size_t at = table.find("id = \"R36\"");
  ASSERT_NE(at, std::string::npos);
  size_t begin = table.rfind("[[rule]]", at), end = table.find("[[rule]]", at);
  t.write("decision_table.toml", table.substr(0, begin) + table.substr(end));
  EXPECT_EQ(t.error(), t.path("decision_table.toml") +
                           ": error: cell (compute, elementwise) has no rule without 'when' offering at least two methods; "
                           "add one after that cell's other rules");
}

TEST(KnowledgeErrors, DuplicateRuleId) {
  TempKnowledge t;
  std::string table = t.read("decision_table.toml");
  int line = count_lines(table) + 3;
  // R01's [[rule]] header is the line above its id.
  int first = count_lines(table.substr(0, table.find("id = \"R01\"")));
  t.write("decision_table.toml", table + "\n[[rule]]\nid = \"R01\"\nbottleneck = \"compute\"\nfamily = \"gemm\"\n"
                                         "methods = [\"tensor_cores_wgmma\"]\n");
  std::string e = t.error();
  EXPECT_EQ(e.substr(0, e.find('\n')), t.path("decision_table.toml") + ":" + std::to_string(line) +
                                           ":6: error: duplicate rule id 'R01' (first at line " + std::to_string(first) + ")");
}

TEST(KnowledgeErrors, LateRuleInACellIsAWarning) {
  TempKnowledge t;
  t.write("decision_table.toml", t.read("decision_table.toml") +
                                     "\n[[rule]]\nid = \"R99\"\nbottleneck = \"compute\"\nfamily = \"gemm\"\n"
                                     "when = [\"spills > 0\"]\nmethods = [\"avoid_local_spills\"]\n");
  Knowledge k = load_knowledge(t.dir());
  ASSERT_EQ(k.warnings.size(), 1u);
  EXPECT_NE(k.warnings[0].find("rule R99 follows the unconditional rule R45"), std::string::npos) << k.warnings[0];
}
