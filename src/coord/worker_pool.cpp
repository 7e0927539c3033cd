#include "coord/worker_pool.h"

namespace ksol {

namespace {

class PooledWorker : public Worker {
 public:
  PooledWorker(WorkerPool& pool, size_t home) : pool_(pool), home_(home) {}
  WorkerReply call(nlohmann::json request, double timeout_s) override { return pool_.call(home_, request, timeout_s); }
  int restarts() const override { return pool_.restarts(home_); }
  // Stopping is the pool's: a borrowed worker belongs to another session too.
  void stop() override {}

 private:
  WorkerPool& pool_;
  size_t home_;
};

}  // namespace

WorkerPool::WorkerPool(std::function<void(const std::string&)> note) : note_(std::move(note)) {}

size_t WorkerPool::add(std::unique_ptr<Worker> w, std::string name) {
  std::lock_guard<std::mutex> g(mu_);
  slots_.push_back(Slot{std::move(w), std::move(name)});
  return slots_.size() - 1;
}

std::unique_ptr<Worker> WorkerPool::handle(size_t home) { return std::make_unique<PooledWorker>(*this, home); }

int WorkerPool::restarts(size_t slot) const {
  std::lock_guard<std::mutex> g(mu_);
  return slot < slots_.size() && !slots_[slot].lost ? slots_[slot].worker->restarts() : 0;
}

size_t WorkerPool::lost() const {
  std::lock_guard<std::mutex> g(mu_);
  size_t n = 0;
  for (const Slot& s : slots_) n += s.lost;
  return n;
}

void WorkerPool::stop_all() {
  std::lock_guard<std::mutex> g(mu_);
  for (Slot& s : slots_)
    if (!s.lost) s.worker->stop();
}

WorkerReply WorkerPool::call(size_t home, const nlohmann::json& request, double timeout_s) {
  for (;;) {
    size_t use = slots_.size();
    {
      std::unique_lock<std::mutex> g(mu_);
      // The home worker while it lives (waiting for it if a borrower holds it), else the first
      // free live one.
      cv_.wait(g, [&] {
        if (home < slots_.size() && !slots_[home].lost) {
          if (slots_[home].busy) return false;
          use = home;
          return true;
        }
        bool any_live = false;
        for (size_t i = 0; i < slots_.size(); ++i) {
          if (slots_[i].lost) continue;
          any_live = true;
          if (!slots_[i].busy) {
            use = i;
            return true;
          }
        }
        return !any_live;
      });
      if (use == slots_.size()) {
        WorkerReply r;
        r.failure = "crash";
        r.message = "every worker of the MPI job is lost";
        return r;
      }
      slots_[use].busy = true;
    }
    WorkerReply r = slots_[use].worker->call(request, timeout_s);
    std::string lost_note;
    {
      std::lock_guard<std::mutex> g(mu_);
      slots_[use].busy = false;
      if (r.failure == "lost") {
        slots_[use].lost = true;
        lost_note = slots_[use].name + " lost (" + r.message + "); its call runs again on another worker";
      }
    }
    cv_.notify_all();
    if (lost_note.empty()) return r;
    if (note_) note_(lost_note);
  }
}

}  // namespace ksol
