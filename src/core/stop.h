// A cooperative stop for long commands (ksol optimize, ksol bench): the first SIGINT or SIGTERM
// asks them to finish the evaluation in flight, skip what is left and still write their table,
// report, JSON and store (resumable with --resume); a second one ends the process at once.
#pragma once

namespace ksol {
// Installs the handlers (ksol's long commands call it once).
void install_stop_handlers();
// True once a stop was asked for.
bool stop_requested();
// The signal that asked (0: none, or asked by request_stop(0)).
int stop_signal();
// Asks for a stop as the first signal would (tests); a second call changes nothing.
void request_stop(int sig);
// Forgets a stop (tests).
void clear_stop();
}  // namespace ksol
