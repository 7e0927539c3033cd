// Long-term memory of the optimisation engine: the method cards, the decision table and the
// feature vocabulary in knowledge/ (see knowledge/README.md), loaded and validated as a whole,
// and the deterministic choice of methods for a profile.
//
//   Knowledge k = load_knowledge(default_knowledge_dir());     // throws KnowledgeError
//   Trace trace;
//   for (const Choice& c : choose(k, features, 3, &trace)) log(explain(c));
//
// Plain value types; nothing here touches a GPU.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace ksol::agents {

// The three bottleneck classes of the profile stage and the five DSL families: the two axes of
// the decision table.
const std::vector<std::string>& bottleneck_classes();
const std::vector<std::string>& dsl_families();

// One schedule key of one DSL family, mirroring the table in docs/DSL.md ("The schedule").
struct ScheduleKey {
  enum class Kind {
    integer,  // a positive integer
    list,     // a list of positive integers of one of `lengths`
    choice,   // one identifier of `choices`
  };
  std::string family, key;
  Kind kind = Kind::integer;
  std::vector<std::string> choices;
  std::vector<size_t> lengths;
};
const std::vector<ScheduleKey>& schedule_keys();
const ScheduleKey* find_schedule_key(const std::string& family, const std::string& key);

// A user error in a knowledge file: file:line:col, the message, the line and a caret (the same
// shape as TaskError). line 0 means the error belongs to the file as a whole.
class KnowledgeError : public std::runtime_error {
 public:
  KnowledgeError(std::string file, int line, int column, const std::string& message, const std::string& source_line);
  std::string file;
  int line, column;
};

struct Location {
  std::string file;
  int line = 0, column = 0;
};

// Profile and code features of one kernel: numbers (achieved_bw_frac, vector, row_len, ...)
// and strings (bottleneck, family, reduction, ...). knowledge/features.toml names them.
struct Features {
  std::map<std::string, double> num;
  std::map<std::string, std::string> str;
};

// A machine-checkable condition: `[family:] feature op value`, op one of < <= > >= == != and
// `in [a, b]`, `not in [a, b]`; the value a number or an identifier. A family prefix limits the
// predicate to that family (it is skipped, neither true nor false, for the others).
struct Predicate {
  enum class Op { lt, le, gt, ge, eq, ne, in, not_in };
  std::string text;     // as written
  std::string family;   // empty: every family
  std::string feature;
  Op op = Op::eq;
  bool textual = false;              // compares strings (else numbers)
  std::vector<double> numbers;       // the value, or the list for in / not in
  std::vector<std::string> strings;  // the same for textual predicates
  Location at;
};
// Parses a predicate. On failure returns nullopt with a message and the 0-based column.
std::optional<Predicate> parse_predicate(const std::string& text, std::string* error, int* column);

enum class Truth { yes, no, unknown, skipped };
struct Evaluation {
  Truth truth = Truth::unknown;
  std::string detail;  // "achieved_bw_frac=0.41 < 0.6"; for unknown: "achieved_bw_frac unknown"
};
// Evaluates against `f` for a kernel of `family` (which decides family-prefixed predicates).
// A feature missing from `f` (or given with the other kind) makes the predicate unknown.
Evaluation evaluate(const Predicate& p, const Features& f, const std::string& family);

// One schedule edit of a method card, in the tiny syntax of knowledge/README.md:
//   [family:] set KEY VALUE      VALUE: 4 | 2..8 | pingpong | [128, 256, 64], alternatives a|b
//   [family:] double|halve|increase|decrease KEY
//   [family:] fuse | rewrite | port
struct MoveValue {
  enum class Kind { integer, range, ident, list };
  Kind kind = Kind::integer;
  long long lo = 0, hi = 0;  // integer: lo; range: lo..hi (the search tries powers of two in it)
  std::string ident;
  std::vector<long long> list;
  int column = 0;  // 0-based, in Move::text
};

struct Move {
  enum class Verb { set, double_, halve, increase, decrease, fuse, rewrite, port };
  std::string text;    // as written
  std::string family;  // empty: every family of the card
  Verb verb = Verb::set;
  std::string key;     // empty for fuse, rewrite, port
  int key_column = 0;  // 0-based, in text
  std::string value;   // set only: the alternatives, normalised ("[128, 256, 64]|[128, 128, 64]")
  std::vector<MoveValue> alternatives;
  Location at;
};
std::optional<Move> parse_move(const std::string& text, std::string* error, int* column);
// Checks a move against a family's schedule keys; returns "" when it fits, else the reason.
// `column` receives the 0-based column of the offending token within `m.text`.
std::string check_move(const Move& m, const std::string& family, int* column = nullptr);
const char* verb_name(Move::Verb v);

struct Method {
  std::string id, title;
  std::vector<std::string> families, bottlenecks;
  std::vector<std::string> when;      // human-readable rules
  std::vector<Predicate> preconditions;  // the card's `requires`: machine-checkable, all must hold
  std::string why, how;
  std::vector<Move> moves;
  std::vector<std::string> cuda_only;  // families where no DSL knob exists: CUDA only
  std::string expected;
  double speedup_lo = 1, speedup_hi = 1;
  std::vector<std::string> risks, related;
  Location at;

  bool applies_to(const std::string& family, const std::string& bottleneck) const;
  bool is_cuda_only(const std::string& family) const;
  // The moves that apply to `family`, in card order.
  std::vector<const Move*> moves_for(const std::string& family) const;
};

struct Rule {
  std::string id, bottleneck, family, note;
  std::vector<Predicate> when;
  std::vector<std::string> methods;  // ranked
  Location at;
  bool unconditional() const { return when.empty(); }
};

struct FeatureSpec {
  std::string name;
  bool textual = false;             // kind = "string"
  std::vector<std::string> values;  // accepted values of a string feature (empty: any)
  std::string derive;               // expression over earlier numeric features
  std::string source, doc;
  Location at;
};

struct Knowledge {
  std::string dir;
  std::vector<FeatureSpec> features;      // in file order (derivations depend on it)
  std::map<std::string, Method> methods;  // by id
  std::vector<Rule> rules;                // in table order
  std::vector<std::string> warnings;      // not errors: e.g. a card no rule offers

  const Method* method(const std::string& id) const;
  const FeatureSpec* feature(const std::string& name) const;
  // For each (bottleneck, family) cell: the distinct methods its rules name, in table order.
  std::map<std::pair<std::string, std::string>, std::vector<std::string>> coverage() const;
};

// Loads dir/features.toml, dir/methods/*.toml and dir/decision_table.toml and validates them
// together. Throws KnowledgeError at the first problem.
Knowledge load_knowledge(const std::string& dir);
// $KSOL_KNOWLEDGE, else <source root>/knowledge.
std::string default_knowledge_dir();

// Reads features from a TOML file: the [features] table (or the top level when there is none),
// numbers and strings. With `k`, every name must be in the vocabulary and of its kind, and
// strings among its values. Throws KnowledgeError.
Features load_features(const std::string& path, const Knowledge* k = nullptr);
// Fills derived features (features.toml `derive`) whose inputs are all known and that `f` does
// not already give. Non-finite results are left out.
void derive_features(const Knowledge& k, Features* f);

struct Choice {
  int rank = 0;        // 1-based
  std::string method;  // card id
  std::string title;
  std::string rule;    // the decision-table rule that offered it
  std::string bottleneck, family;
  std::vector<std::string> reasons;  // the predicates that held, with values
  std::vector<std::string> moves;    // the card's moves for this family ("" when CUDA only)
  bool cuda_only = false;
};

struct ChooseOptions {
  size_t max = 3;
  bool dsl_only = false;             // skip methods with no DSL move for the family
  std::set<std::string> exclude;     // methods to skip (tried already: the short-term memory)
};

// What choose looked at, for logs: every rule and method considered and why it was passed over.
struct Trace {
  std::vector<std::string> lines;              // "R05 skipped: row_len=4096 <= 1024 is false", ...
  std::set<std::string> unknown_features;      // features a predicate needed and `f` lacked
};

// Ranked methods for a kernel: deterministic for the same knowledge and features.
std::vector<Choice> choose(const Knowledge& k, const Features& f, size_t max, Trace* trace = nullptr);
std::vector<Choice> choose(const Knowledge& k, const Features& f, const ChooseOptions& opt, Trace* trace = nullptr);
// "rule R05 chose warp_shuffle_reduction (#1) because bottleneck=memory_bandwidth, ..."
std::string explain(const Choice& c);
// A method card as plain text for an agent's prompt, limited to `family`'s moves.
std::string card_text(const Method& m, const std::string& family);

}  // namespace ksol::agents
