// The MPI job: one thread per process makes every MPI call (the link), the others hand it
// messages. A message is one JSON object, sent as MPI_CHAR with tag 0; its "type" says what it is
// (docs/PROTOCOL.md, "Over MPI"). Every send is nonblocking and never waited on, so a rank that
// died cannot block the one sending to it; a rank is lost when nothing came from it for
// KSOL_MPI_LOST_AFTER seconds (the relays send a heartbeat every second), and its call in flight
// goes to another worker.
#include <mpi.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <iostream>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/util.h"
#include "coord/worker_pool.h"
#include "mpi/cluster.h"

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace ksol::mpi {

namespace {

double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

double env_seconds(const char* name, double def) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  double x = std::strtod(v, nullptr);
  return x > 0 ? x : def;
}

std::string host_name() {
  char h[256] = {0};
  gethostname(h, sizeof h - 1);
  return h;
}

// Every MPI call of the process, made by whichever one thread calls pump().
class Link {
 public:
  void post(int to, const json& j) {
    std::lock_guard<std::mutex> g(mu_);
    out_.emplace_back(to, j.dump(-1, ' ', false, json::error_handler_t::replace));
  }
  // Starts the queued sends, retires finished ones, and receives whatever has arrived. True when
  // anything moved.
  bool pump(std::vector<std::pair<int, json>>* in) {
    bool moved = false;
    std::deque<std::pair<int, std::string>> out;
    {
      std::lock_guard<std::mutex> g(mu_);
      out.swap(out_);
    }
    for (auto& [to, body] : out) {
      if (dead_.count(to)) continue;
      pending_.push_back(Pending{MPI_REQUEST_NULL, std::make_unique<std::string>(std::move(body))});
      Pending& p = pending_.back();
      if (MPI_Isend(p.buf->data(), static_cast<int>(p.buf->size()), MPI_CHAR, to, 0, MPI_COMM_WORLD, &p.req) != MPI_SUCCESS)
        pending_.pop_back();
      moved = true;
    }
    for (auto it = pending_.begin(); it != pending_.end();) {
      int done = 0;
      if (MPI_Test(&it->req, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) it = pending_.erase(it);
      else ++it;
    }
    for (;;) {
      int flag = 0;
      MPI_Status st;
      if (MPI_Iprobe(MPI_ANY_SOURCE, 0, MPI_COMM_WORLD, &flag, &st) != MPI_SUCCESS || !flag) break;
      int n = 0;
      MPI_Get_count(&st, MPI_CHAR, &n);
      std::string buf(static_cast<size_t>(std::max(n, 0)), '\0');
      if (MPI_Recv(buf.data(), n, MPI_CHAR, st.MPI_SOURCE, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE) != MPI_SUCCESS) break;
      moved = true;
      try {
        in->emplace_back(st.MPI_SOURCE, json::parse(buf));
      } catch (const std::exception&) {
        std::cerr << "ksol-mpi: rank " << st.MPI_SOURCE << " sent a message that is not JSON; ignored\n";
      }
    }
    return moved;
  }
  // Sends to a lost rank are dropped: their buffers would wait forever.
  void forget(int rank) { dead_.insert(rank); }
  // Whether every send has left (for a clean end).
  bool drained() {
    std::lock_guard<std::mutex> g(mu_);
    return out_.empty() && pending_.empty();
  }

 private:
  struct Pending {
    MPI_Request req;
    std::unique_ptr<std::string> buf;
  };
  std::mutex mu_;
  std::deque<std::pair<int, std::string>> out_;
  std::list<Pending> pending_;
  std::set<int> dead_;
};

// Sleeps a little when nothing moved, less when things are moving: a relay idles at a few hundred
// wake-ups a second, and a busy rank 0 answers within a millisecond.
void idle(bool moved, int* backoff_us) {
  *backoff_us = moved ? 50 : std::min(*backoff_us * 2, 4000);
  usleep(static_cast<useconds_t>(*backoff_us));
}

// Rank 0's side of every relay.
struct Hub {
  Link link;
  std::mutex mu;
  std::condition_variable cv;
  struct Rank {
    bool ready = false, checked = false, lost = false;
    std::string host, why_lost;
    json ready_msg, checked_msg;
    Clock::time_point heard = Clock::now();
  };
  std::vector<Rank> ranks;
  std::map<int64_t, json> replies;
  int64_t next_seq = 1;
  double lost_after = 10, heartbeat = 1;
  std::atomic<bool> stop{false};
  std::thread thread;

  void lose(int r, const std::string& why) {  // under mu
    if (ranks[r].lost) return;
    ranks[r].lost = true;
    ranks[r].why_lost = why;
    link.forget(r);
    cv.notify_all();
  }
  size_t lost_count() {
    std::lock_guard<std::mutex> g(mu);
    size_t n = 0;
    for (size_t r = 1; r < ranks.size(); ++r) n += ranks[r].lost;
    return n;
  }

  void run() {
    auto beat = Clock::now();
    int backoff = 50;
    std::vector<std::pair<int, json>> in;
    while (!stop) {
      in.clear();
      bool moved = link.pump(&in);
      {
        std::lock_guard<std::mutex> g(mu);
        for (auto& [from, m] : in) {
          if (from <= 0 || from >= static_cast<int>(ranks.size()) || ranks[from].lost) continue;
          Rank& rk = ranks[from];
          rk.heard = Clock::now();
          std::string type = m.value("type", "");
          if (type == "ready") rk.ready = true, rk.ready_msg = m, rk.host = m.value("host", "");
          else if (type == "checked") rk.checked = true, rk.checked_msg = m;
          else if (type == "reply") {
            int64_t seq = m.value("seq", int64_t{0});  // read before the move: `=` evaluates its right side first
            replies[seq] = std::move(m);
          }
        }
        if (!in.empty()) cv.notify_all();
        // A relay that has said nothing for lost_after seconds (its heartbeat included) is lost;
        // before its first word it gets as long as a slow node needs to start ksol (a minute more).
        for (size_t r = 1; r < ranks.size(); ++r) {
          Rank& rk = ranks[r];
          double limit = rk.ready ? lost_after : lost_after + 60;
          if (!rk.lost && since(rk.heard) > limit)
            lose(static_cast<int>(r), "nothing from rank " + std::to_string(r) + (rk.host.empty() ? "" : " on " + rk.host) + " for " +
                                          std::to_string(static_cast<int>(limit)) + " s");
        }
      }
      if (since(beat) >= heartbeat) {
        beat = Clock::now();
        std::lock_guard<std::mutex> g(mu);
        for (size_t r = 1; r < ranks.size(); ++r)
          if (!ranks[r].lost) link.post(static_cast<int>(r), {{"type", "heartbeat"}});
      }
      idle(moved, &backoff);
    }
  }
};

// A worker on another rank, as rank 0 sees it.
class RemoteWorker : public Worker {
 public:
  RemoteWorker(Hub& hub, int rank, int slot) : hub_(hub), rank_(rank), slot_(slot) {}
  WorkerReply call(json request, double timeout_s) override {
    WorkerReply r;
    auto t0 = Clock::now();
    int64_t seq;
    {
      std::lock_guard<std::mutex> g(hub_.mu);
      seq = hub_.next_seq++;
      if (!hub_.ranks[rank_].lost)
        hub_.link.post(rank_, {{"type", "call"}, {"slot", slot_}, {"seq", seq}, {"request", std::move(request)}, {"timeout_s", timeout_s}});
    }
    std::unique_lock<std::mutex> g(hub_.mu);
    // The relay enforces the call's timeout itself; past it and the heartbeat's grace, the rank
    // is as good as lost (alive, perhaps, but not answering).
    auto deadline = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s + hub_.lost_after + 5));
    bool got = hub_.cv.wait_until(g, deadline, [&] { return hub_.replies.count(seq) || hub_.ranks[rank_].lost; });
    if (!hub_.replies.count(seq)) {
      if (!got) hub_.lose(rank_, "no reply within " + std::to_string(static_cast<int>(timeout_s)) + " s and its grace");
      r.failure = "lost";
      r.message = hub_.ranks[rank_].why_lost;
      r.seconds = since(t0);
      return r;
    }
    json m = std::move(hub_.replies[seq]);
    hub_.replies.erase(seq);
    g.unlock();
    const json& rep = m["reply"];
    r.ok = rep.value("ok", false);
    r.body = rep.contains("body") ? rep["body"] : json();
    r.failure = rep.value("failure", "");
    r.message = rep.value("message", "");
    r.seconds = rep.value("seconds", since(t0));
    restarts_ = m.value("restarts", restarts_);
    return r;
  }
  int restarts() const override { return restarts_; }
  void stop() override {
    std::lock_guard<std::mutex> g(hub_.mu);
    if (!hub_.ranks[rank_].lost) hub_.link.post(rank_, {{"type", "stop"}, {"slot", slot_}});
  }

 private:
  Hub& hub_;
  int rank_, slot_;
  int restarts_ = 0;
};

// One worker of a relay and the thread that makes its calls, one at a time, in order.
struct RelaySlot {
  std::unique_ptr<WorkerClient> worker;
  std::mutex mu;
  std::condition_variable cv;
  std::deque<json> queue;
  bool closed = false;
  std::thread thread;

  void run(Link& link, int index) {
    for (;;) {
      json m;
      {
        std::unique_lock<std::mutex> g(mu);
        cv.wait(g, [&] { return closed || !queue.empty(); });
        if (queue.empty()) break;
        m = std::move(queue.front());
        queue.pop_front();
      }
      if (m.value("type", "") == "stop") {
        worker->stop();
        continue;
      }
      WorkerReply r = worker->call(m["request"], m.value("timeout_s", 300.0));
      link.post(0, {{"type", "reply"}, {"slot", index}, {"seq", m.value("seq", int64_t{0})}, {"restarts", worker->restarts()},
                    {"reply", {{"ok", r.ok}, {"body", r.body}, {"failure", r.failure}, {"message", r.message}, {"seconds", r.seconds}}}});
    }
    worker->stop();
  }
  void push(json m) {
    {
      std::lock_guard<std::mutex> g(mu);
      queue.push_back(std::move(m));
    }
    cv.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> g(mu);
      closed = true;
    }
    cv.notify_one();
  }
};

// What a relay sees of the paths rank 0 will send it: the probe file in the compile cache (with
// its content) and each shared path.
json check_paths(const json& m) {
  json missing = json::array();
  std::string probe = m.value("probe", "");
  try {
    if (read_file(probe) != m.value("token", "")) missing.push_back(probe + " (a different file)");
  } catch (const std::exception&) {
    missing.push_back(probe);
  }
  for (const auto& p : m.value("paths", std::vector<std::string>{}))
    if (!std::filesystem::exists(p)) missing.push_back(p);
  return missing;
}

}  // namespace

struct Cluster::Impl {
  int rank = 0, size = 1;
  std::unique_ptr<Hub> hub;  // rank 0, once sessions are opened
  std::unique_ptr<WorkerPool> pool;
  std::string probe;
  bool finalize = true;  // a relay: rank 0 said every rank is still there
};

Cluster::Cluster(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

std::unique_ptr<Cluster> Cluster::join() {
  int provided = 0;
  int argc = 0;
  char** argv = nullptr;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SERIALIZED, &provided);
  if (provided < MPI_THREAD_SERIALIZED)
    throw std::runtime_error("the MPI library gives thread level " + std::to_string(provided) + "; ksol needs MPI_THREAD_SERIALIZED");
  // Errors come back as values: a lost rank must not end the job (MPI's default handler aborts).
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  auto impl = std::make_unique<Impl>();
  MPI_Comm_rank(MPI_COMM_WORLD, &impl->rank);
  MPI_Comm_size(MPI_COMM_WORLD, &impl->size);
  return std::unique_ptr<Cluster>(new Cluster(std::move(impl)));
}

Cluster::~Cluster() {
  Impl& im = *impl_;
  bool clean = true;
  if (im.rank == 0 && im.hub) {
    if (im.pool) im.pool->stop_all();
    clean = im.hub->lost_count() == 0;
    {
      std::lock_guard<std::mutex> g(im.hub->mu);
      for (size_t r = 1; r < im.hub->ranks.size(); ++r)
        if (!im.hub->ranks[r].lost) im.hub->link.post(static_cast<int>(r), {{"type", "shutdown"}, {"finalize", clean}});
    }
    // The shutdown messages leave before the link stops (a few seconds at most).
    auto t0 = Clock::now();
    while (!im.hub->link.drained() && since(t0) < 5) usleep(2000);
    im.hub->stop = true;
    im.hub->thread.join();
  } else if (im.rank == 0 && im.size > 1) {
    // The command ended before it opened its sessions (a usage error, say): the relays are told
    // by a link of this destructor's own.
    Link link;
    for (int r = 1; r < im.size; ++r) link.post(r, {{"type", "shutdown"}});
    std::vector<std::pair<int, json>> in;
    auto t0 = Clock::now();
    while (!link.drained() && since(t0) < 5) link.pump(&in), usleep(2000);
  }
  if (im.rank > 0) clean = im.finalize;
  if (!im.probe.empty()) std::filesystem::remove(im.probe);
  // MPI_Finalize waits for every rank; after one was lost it would wait for ever.
  if (clean) MPI_Finalize();
}

int Cluster::rank() const { return impl_->rank; }
int Cluster::size() const { return impl_->size; }

int Cluster::relay(const std::vector<std::string>& worker_argv, const std::vector<int>& gpus) {
  Link link;
  std::string host = host_name();
  std::vector<int> devices = gpus.empty() ? std::vector<int>{-1} : gpus;
  std::vector<std::unique_ptr<RelaySlot>> slots;
  json names = json::array();
  for (size_t i = 0; i < devices.size(); ++i) {
    std::vector<std::string> argv = worker_argv.empty() ? std::vector<std::string>{default_worker_path()} : worker_argv;
    if (devices[i] >= 0) argv.insert(argv.end(), {"--device", std::to_string(devices[i])});
    auto s = std::make_unique<RelaySlot>();
    // One log per worker: several nodes may share the cache folder, and several workers a process.
    s->worker = std::make_unique<WorkerClient>(argv, cache_dir() + "/worker-" + host + "-" + std::to_string(::getpid()) + "-" +
                                                         std::to_string(i) + ".log");
    std::string name = "rank " + std::to_string(impl_->rank) + (devices[i] >= 0 ? " GPU " + std::to_string(devices[i]) : "");
    names.push_back({{"name", name}, {"device", std::max(devices[i], 0)}});
    slots.push_back(std::move(s));
  }
  for (size_t i = 0; i < slots.size(); ++i) slots[i]->thread = std::thread([&, i] { slots[i]->run(link, static_cast<int>(i)); });
  link.post(0, {{"type", "ready"}, {"host", host}, {"slots", names}});
  const double lost_after = env_seconds("KSOL_MPI_LOST_AFTER", 10);
  auto heard = Clock::now(), beat = Clock::now();
  int backoff = 50;
  std::vector<std::pair<int, json>> in;
  for (bool running = true; running;) {
    in.clear();
    bool moved = link.pump(&in);
    for (auto& [from, m] : in) {
      if (from != 0) continue;
      heard = Clock::now();
      std::string type = m.value("type", "");
      size_t slot = m.value("slot", size_t{0});
      if ((type == "call" || type == "stop") && slot < slots.size()) slots[slot]->push(std::move(m));
      else if (type == "check") link.post(0, {{"type", "checked"}, {"missing", check_paths(m)}, {"host", host}});
      else if (type == "shutdown") running = false, impl_->finalize = m.value("finalize", true);
    }
    // Rank 0 is gone (it sends a heartbeat every second): nothing is left to do for it. The
    // workers read end of input and exit when this process does.
    if (since(heard) > 6 * lost_after) {
      std::cerr << "ksol-mpi: rank " << impl_->rank << " on " << host << ": nothing from rank 0 for " << static_cast<int>(6 * lost_after)
                << " s; leaving\n";
      std::_Exit(1);
    }
    if (since(beat) >= 1) {
      beat = Clock::now();
      link.post(0, {{"type", "heartbeat"}});
    }
    idle(moved, &backoff);
  }
  for (auto& s : slots) s->close();
  for (auto& s : slots) s->thread.join();
  auto t0 = Clock::now();
  while (!link.drained() && since(t0) < 5) link.pump(&in), usleep(2000);
  return 0;
}

std::vector<std::unique_ptr<Session>> Cluster::open_sessions(const Session::Options& base, const std::vector<int>& gpus,
                                                             const std::vector<std::string>& shared_paths) {
  Impl& im = *impl_;
  im.hub = std::make_unique<Hub>();
  Hub& hub = *im.hub;
  hub.ranks.resize(static_cast<size_t>(im.size));
  hub.lost_after = env_seconds("KSOL_MPI_LOST_AFTER", 10);
  hub.thread = std::thread([&hub] { hub.run(); });

  // Every relay reports its workers, then says whether it sees the files rank 0 will name.
  auto wait_all = [&](bool Hub::Rank::*flag, const char* what) {
    std::unique_lock<std::mutex> g(hub.mu);
    hub.cv.wait(g, [&] {
      for (size_t r = 1; r < hub.ranks.size(); ++r)
        if (!(hub.ranks[r].*flag) && !hub.ranks[r].lost) return false;
      return true;
    });
    for (size_t r = 1; r < hub.ranks.size(); ++r)
      if (hub.ranks[r].lost) throw std::runtime_error("--mpi: rank " + std::to_string(r) + " did not " + what + ": " + hub.ranks[r].why_lost);
  };
  wait_all(&Hub::Rank::ready, "start its workers");
  std::mt19937_64 rng{std::random_device{}()};
  std::string token = std::to_string(rng());
  im.probe = cache_dir() + "/mpi-probe-" + host_name() + "-" + std::to_string(::getpid());
  std::filesystem::create_directories(cache_dir());
  write_file_atomic(im.probe, token);
  std::vector<std::string> paths = shared_paths;
  if (!base.worker_argv.empty() && base.worker_argv[0].find('/') != std::string::npos) paths.push_back(base.worker_argv[0]);
  {
    std::lock_guard<std::mutex> g(hub.mu);
    for (size_t r = 1; r < hub.ranks.size(); ++r)
      hub.link.post(static_cast<int>(r), {{"type", "check"}, {"probe", im.probe}, {"token", token}, {"paths", paths}});
  }
  wait_all(&Hub::Rank::checked, "answer the shared-filesystem check");
  for (size_t r = 1; r < hub.ranks.size(); ++r) {
    const json& missing = hub.ranks[r].checked_msg["missing"];
    if (!missing.empty())
      throw std::runtime_error("--mpi: rank " + std::to_string(r) + " on " + hub.ranks[r].host + " does not see " + missing[0].get<std::string>() +
                               (missing.size() > 1 ? " (and " + std::to_string(missing.size() - 1) + " more)" : "") +
                               ". Every rank reads the compile cache ($KSOL_CACHE_DIR, " + cache_dir() +
                               "), the ksol tree and the task folders at the paths rank 0 uses: put them on a filesystem every node shares");
  }

  im.pool = std::make_unique<WorkerPool>([](const std::string& l) { std::cerr << "ksol-mpi: " << l << "\n"; });
  std::vector<Session::Options> opts;
  std::vector<std::unique_ptr<Worker>> workers;
  // Rank 0's own workers, named as on one host (GPU 0, ...), or "rank 0" when --gpus is not given.
  std::vector<int> own = gpus.empty() ? std::vector<int>{-1} : gpus;
  for (int d : own) {
    Session::Options o = base;
    if (o.worker_argv.empty()) o.worker_argv = {default_worker_path()};
    std::vector<std::string> argv = o.worker_argv;
    if (d >= 0) argv.insert(argv.end(), {"--device", std::to_string(d)});
    o.name = "rank 0" + (d >= 0 ? " GPU " + std::to_string(d) : std::string());
    o.device = std::max(d, 0);
    // A local session's one-shot workers (the profiler's) run on its own device.
    o.worker_argv = argv;
    workers.push_back(std::make_unique<WorkerClient>(argv, cache_dir() + "/worker-" + host_name() + "-" + std::to_string(::getpid()) + "-" +
                                                               std::to_string(opts.size()) + ".log"));
    opts.push_back(o);
  }
  for (size_t r = 1; r < hub.ranks.size(); ++r) {
    const json& slots = hub.ranks[r].ready_msg["slots"];
    for (size_t k = 0; k < slots.size(); ++k) {
      Session::Options o = base;
      o.name = slots[k].value("name", "rank " + std::to_string(r));
      o.device = slots[k].value("device", 0);
      workers.push_back(std::make_unique<RemoteWorker>(hub, static_cast<int>(r), static_cast<int>(k)));
      opts.push_back(o);
    }
  }
  std::vector<std::unique_ptr<Session>> out;
  for (size_t i = 0; i < workers.size(); ++i) {
    size_t slot = im.pool->add(std::move(workers[i]), opts[i].name);
    out.push_back(std::make_unique<Session>(opts[i], im.pool->handle(slot)));
  }
  return out;
}

}  // namespace ksol::mpi
