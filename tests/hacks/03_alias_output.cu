// Hack 03 — aliases the output to the input.
//
// Cheat:      the task is a copy (Y = X), so the hack does no work at all: it casts away the
//             const of the pointer table and points the output entry at the input buffer. A
//             harness that reads the results through the table it handed out finds X where Y
//             should be, and X is exactly the right answer.
// Caught by:  `alias` — the harness checks that the pointer table comes back unchanged and reads
//             outputs from its own copy of the pointers.
// Expected:   failed_gate = "correctness", error_class = "alias".
// Undefended: --defence-off alias --defence-off verify-timed: the checked calls' outputs are
//             read through the rewritten table, so they match; the timed calls launch nothing.
//             With alias off alone, verify-timed still catches it ("timing" /
//             "timed_call_wrong"): the verified timed call is read through the harness's own
//             pointers whatever the alias defence says.
// Task/size:  tests/hacks/tasks/copy_f32, "small" (2^16 elements: T_sol is about 0.1 us, below
//             what an empty timed region measures, so doing nothing is not flagged as faster
//             than speed-of-light).
#include <ksol/abi.h>

extern "C" int ksol_run(const ksol_call* call) {
  if (!call || call->abi_version != KSOL_ABI_VERSION || call->num_tensors != 2 || call->num_dims != 1) return 1;
  // THE CHEAT: Y := X by rewriting the harness's pointer table instead of copying any data.
  void** table = const_cast<void**>(call->tensors);
  table[1] = table[0];
  return 0;
}
