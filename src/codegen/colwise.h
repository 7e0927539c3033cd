// Column reductions (src/codegen/colwise.cpp), generated for the rowwise family:
// Y[c] = OP(f(X[r, c], v[c], w[r], ...)) over r with OP sum, mean, max or min.
#pragma once

#include <string>

#include "codegen/codegen.h"
#include "dsl/ir.h"

namespace ksol::codegen::detail {

// True when the program is one such reduction (the rowwise family then hands it to the below).
bool is_column_reduction(const dsl::Program& p);
void column_check(const dsl::Program& p, const Binding& b);          // throws Refused with the reason
std::string column_generate(const dsl::Program& p, const Binding& b);
std::string column_kernel_name(const dsl::Program& p);

}  // namespace ksol::codegen::detail
