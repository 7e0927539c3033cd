#include "core/stop.h"

#include <signal.h>

#include <atomic>

namespace ksol {
namespace {
std::atomic<int> g_signal{-1};  // -1: no stop; else the signal (0: asked in code)

void on_signal(int sig) {
  int none = -1;
  if (!g_signal.compare_exchange_strong(none, sig)) {
    // The second signal: the default action, now (an async-signal-safe pair of calls).
    signal(sig, SIG_DFL);
    raise(sig);
  }
}
}  // namespace

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and waits in flight carry on; the loops check the flag
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

bool stop_requested() { return g_signal.load() >= 0; }
int stop_signal() { return g_signal.load() > 0 ? g_signal.load() : 0; }
void request_stop(int sig) {
  int none = -1;
  g_signal.compare_exchange_strong(none, sig);  // as the first signal; never the second's default action
}
void clear_stop() { g_signal.store(-1); }
}  // namespace ksol
