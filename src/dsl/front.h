// Internal to src/dsl: what the lexer, parser, checker, family recogniser and printer share.
// Nothing outside src/dsl includes this; the public surface is ir.h.
#pragma once
#include <string>
#include <vector>

#include "dsl/ir.h"

namespace ksol::dsl::detail {

// The program's text split into lines, so that every stage can raise a DslError with a caret.
class Source {
 public:
  Source(std::string file, const std::string& text);
  [[noreturn]] void fail(Loc at, const std::string& message) const;
  const std::string& text() const { return text_; }

 private:
  std::string file_;
  std::string text_;
  std::vector<std::string> lines_;
};

enum class Tok { ident, keyword, number, punct, newline, end };

struct Token {
  Tok kind = Tok::end;
  std::string text;
  Loc loc;
  double value = 0;      // numbers
  bool integer = false;  // numbers written without '.' or exponent
};

// Newlines inside () and [] are dropped, so a long parameter list or call may span lines.
std::vector<Token> lex(const Source& src);

// Where the parser saw the parts of a statement that the IR keeps no location for.
struct StmtLocs {
  std::vector<Loc> indices;  // each left-hand index
  Loc over;                  // the reduced index
  std::vector<Loc> over_rest;  // further reduced indices (sum over c, r, s)
  Loc body;                  // the first token of the right-hand side
};

struct Parsed {
  Program program;              // as written: no types, extents, dims or family yet
  std::vector<StmtLocs> stmts;  // parallel to program.defs
};

Parsed parse(const Source& src, const std::vector<Token>& tokens);
// Resolves names, extents and types; fills dims, extents, over_extent, type, is_output.
void check(const Source& src, Parsed& parsed);
// Names the family of a checked program, or fails with why no family fits.
std::string recognise_family(const Source& src, const Parsed& parsed);

bool is_keyword(const std::string& word);
bool is_type_name(const std::string& word);
Type type_from_name(const std::string& word);  // is_type_name(word) must hold
// The shortest text that reads back as the same double (std::to_chars).
std::string format_number(double v);
// An expression in DSL syntax, with the fewest parentheses that keep its meaning.
std::string format_expr(const Expr& e);

}  // namespace ksol::dsl::detail
