// Gate 1's binary half: what a built candidate library may do, read from the library itself
// (its undefined dynamic symbols, its static constructors, its machine code), which no source
// trick (macros, aliases, asm labels, inline assembly) can hide. docs/HARNESS.md argues the rules.
#pragma once
#include <string>
#include <vector>

namespace ksol {

struct LibraryFindings {
  std::vector<std::string> imports;       // undefined symbols outside the allowlist
  std::vector<std::string> constructors;  // load-time code other than nvcc's registration and <iostream>'s init
  std::vector<std::string> syscalls;      // functions holding a system-call instruction
  std::string error;                      // the library could not be read (refused too)
  bool clean() const { return imports.empty() && constructors.empty() && syscalls.empty() && error.empty(); }
};

// Who the library belongs to decides what it may import: a candidate may call its task's vendor
// libraries (`libs`, as linked: cublas, cublasLt, cusparse, cudnn, cufft, curand) and nothing of
// another; a task's own baseline (`trusted`) may also import what device-wide CUB brings in.
struct ImportPolicy {
  std::vector<std::string> libs;
  bool trusted = false;
};

// Whether one undefined dynamic symbol (without its @version) is on the allowlist.
bool import_allowed(const std::string& symbol, const ImportPolicy& policy);
// Inspects a built library (readelf and objdump from binutils).
LibraryFindings inspect_library(const std::string& so_path, const ImportPolicy& policy);
// Gate 1's message for a library that is not clean, one line per kind of finding.
std::string format_library_findings(const std::string& file, const LibraryFindings& f);

}  // namespace ksol
