#include "core/defences.h"

namespace ksol {

const std::vector<std::string>& defence_names() {
  static const std::vector<std::string> names = {
      "poison",         // outputs poisoned before every checked call (and the verified timed call)
      "finite-poison",  // a second checked call with a finite poison must agree
      "guards",         // canary zones around every buffer checked after every call
      "input-hash",     // inputs compared byte for byte with what was uploaded, after every call
      "alias",          // the pointer table must come back unchanged; outputs are read from the harness's own pointers
      "escape",         // outputs read after the call's stream alone; work left on the device after it is flagged
      "rewrite-inputs", // new inputs are written into the same buffers between checked calls
      "verify-timed",   // timed calls kept at random after they ran, and the call after the last, are verified
      "fresh-inputs",   // before every timed call a random set receives an input case it does not hold
      "full-compare",   // every output element is compared (off: every 16th)
      "fresh-seeds",    // seeds drawn per evaluation (off: fixed seeds 1, 2, 3)
      "hidden-sizes",   // hidden sizes are evaluated too
      "precision",      // tolerance of the task's precision policy (off: bf16's)
      "static",         // gate 1: the source scan, the import allowlist, the constructor and system-call checks
      "isolation",      // the candidate runs in a launcher process of its own; its times must agree with the harness's clock
  };
  return names;
}

}  // namespace ksol
