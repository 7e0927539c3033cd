// Text to tokens (docs/DSL.md, "Lexical rules"), and the Source that every stage reports through.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "dsl/front.h"

namespace ksol::dsl::detail {

Source::Source(std::string file, const std::string& text) : file_(std::move(file)), text_(text) {
  std::string line;
  for (char c : text) {
    if (c != '\n') {
      line += c;
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines_.push_back(line);
    line.clear();
  }
  lines_.push_back(line);
}

void Source::fail(Loc at, const std::string& message) const {
  std::string line = (at.line >= 1 && at.line <= static_cast<int>(lines_.size())) ? lines_[at.line - 1] : "";
  throw DslError(file_, at, message, line);
}

bool is_keyword(const std::string& w) {
  for (const char* k : {"kernel", "schedule", "over", "sum", "max", "min", "mean", "argmax", "scan", "prodscan"})
    if (w == k) return true;
  return false;
}

namespace {

bool ident_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool digit(char c) { return std::isdigit(static_cast<unsigned char>(c)); }

std::string unexpected(char c) {
  auto u = static_cast<unsigned char>(c);
  if (u >= 0x21 && u < 0x7f) return std::string("unexpected character '") + c + "'";
  char buf[80];
  std::snprintf(buf, sizeof buf, "unexpected byte 0x%02X; outside comments a program is plain ASCII", u);
  return buf;
}

}  // namespace

std::vector<Token> lex(const Source& src) {
  const std::string& text = src.text();
  std::vector<Token> out;
  int line = 1;
  size_t line_start = 0, i = 0;
  int depth = 0;  // open ( and [: newlines inside them do not end a statement
  auto loc_of = [&](size_t pos) { return Loc{line, static_cast<int>(pos - line_start) + 1}; };
  auto peek = [&](size_t pos) { return pos < text.size() ? text[pos] : '\0'; };

  while (i < text.size()) {
    char c = text[i];
    if (c == '\n') {
      if (depth == 0) out.push_back({Tok::newline, "\n", loc_of(i)});
      ++line;
      line_start = ++i;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
      continue;
    }
    Loc at = loc_of(i);
    if (ident_start(c)) {
      size_t j = i;
      while (j < text.size() && ident_char(text[j])) ++j;
      std::string word = text.substr(i, j - i);
      out.push_back({is_keyword(word) ? Tok::keyword : Tok::ident, word, at});
      i = j;
      continue;
    }
    if (digit(c)) {
      size_t j = i;
      bool integer = true, ok = true;
      while (digit(peek(j))) ++j;
      if (peek(j) == '.') {
        integer = false;
        ++j;
        ok = digit(peek(j));
        while (digit(peek(j))) ++j;
      }
      if (ok && (peek(j) == 'e' || peek(j) == 'E')) {
        integer = false;
        ++j;
        if (peek(j) == '+' || peek(j) == '-') ++j;
        ok = digit(peek(j));
        while (digit(peek(j))) ++j;
      }
      if (!ok || ident_char(peek(j)) || peek(j) == '.') {
        while (ident_char(peek(j)) || peek(j) == '.') ++j;
        src.fail(at, "malformed number '" + text.substr(i, j - i) + "'");
      }
      std::string num = text.substr(i, j - i);
      double value = std::strtod(num.c_str(), nullptr);
      if (!std::isfinite(value)) src.fail(at, "the number " + num + " is out of range");
      out.push_back({Tok::number, num, at, value, integer});
      i = j;
      continue;
    }
    std::string two = text.substr(i, 2);
    if (two == "->" || two == "<=" || two == ">=" || two == "==" || two == "!=") {
      out.push_back({Tok::punct, two, at});
      i += 2;
      continue;
    }
    if (std::string("()[]{},:;=+-*/<>%").find(c) != std::string::npos) {
      if (c == '(' || c == '[') ++depth;
      if ((c == ')' || c == ']') && depth > 0) --depth;
      out.push_back({Tok::punct, std::string(1, c), at});
      ++i;
      continue;
    }
    src.fail(at, unexpected(c));
  }
  // End of file sits just after the last token, where the reader's eye is, not on a blank line.
  Loc end{1, 1};
  for (auto it = out.rbegin(); it != out.rend(); ++it) {
    if (it->kind == Tok::newline) continue;
    end = {it->loc.line, it->loc.col + static_cast<int>(it->text.size())};
    break;
  }
  out.push_back({Tok::end, "", end});
  return out;
}

}  // namespace ksol::dsl::detail
