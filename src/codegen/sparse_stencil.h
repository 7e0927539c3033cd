// The sparse (CSR SpMV) and stencil families (src/codegen/sparse.cpp, stencil.cpp). Declared
// here until codegen.cpp lists them in its family table; then these move to common.h.
#pragma once
#include "codegen/common.h"

namespace ksol::codegen::detail {

const FamilyGenerator& sparse_family();
const FamilyGenerator& stencil_family();

}  // namespace ksol::codegen::detail
