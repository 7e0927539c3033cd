// The fenced code blocks of the project's markdown docs, for the tests that parse (golden) and
// compile (codegen) the examples of docs/DSL_CARD.md and docs/DSL.md, so the docs cannot rot.
#pragma once

#include <sstream>
#include <string>
#include <vector>

#include "core/util.h"

namespace ksol::test_support {

// The bodies of the fenced blocks of a markdown file whose opening fence is exactly `fence`.
inline std::vector<std::string> fenced_blocks(const std::string& markdown, const std::string& fence) {
  std::vector<std::string> blocks;
  std::istringstream in(markdown);
  std::string line, block;
  bool inside = false, wanted = false;
  while (std::getline(in, line)) {
    if (line.rfind("```", 0) == 0) {
      if (!inside) {
        inside = true;
        wanted = line == fence;
        block.clear();
      } else {
        inside = false;
        if (wanted) blocks.push_back(block);
      }
      continue;
    }
    if (inside) block += line + "\n";
  }
  return blocks;
}

// The ```ksol examples of docs/DSL_CARD.md, the card an LLM's prompt carries.
inline std::vector<std::string> card_examples() {
  return fenced_blocks(read_file(std::string(KSOL_SOURCE_DIR) + "/docs/DSL_CARD.md"), "```ksol");
}

}  // namespace ksol::test_support
