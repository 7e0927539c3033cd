// Every worker of an MPI job in one pool, so that a call whose worker's rank is lost runs again on
// another worker. Each session has a home worker (its own GPU) and uses it while it lives; after
// its rank is lost, the session borrows whichever live worker is free next.
#pragma once
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "coord/worker_client.h"

namespace ksol {

class WorkerPool {
 public:
  // `note` hears one line each time a worker is lost (progress output).
  explicit WorkerPool(std::function<void(const std::string&)> note = nullptr);
  size_t add(std::unique_ptr<Worker> w, std::string name);
  size_t size() const { return slots_.size(); }
  // The call on `home` while it lives, else on the next free live worker. A reply with failure
  // "lost" marks its worker lost and sends the call again elsewhere; with every worker lost the
  // call fails as a crash (what --resume runs again).
  WorkerReply call(size_t home, const nlohmann::json& request, double timeout_s);
  int restarts(size_t slot) const;
  size_t lost() const;
  void stop_all();
  // A session's handle on the pool: a Worker whose home is one slot.
  std::unique_ptr<Worker> handle(size_t home);

 private:
  struct Slot {
    std::unique_ptr<Worker> worker;
    std::string name;
    bool busy = false, lost = false;
  };
  std::vector<Slot> slots_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::function<void(const std::string&)> note_;
};

}  // namespace ksol
