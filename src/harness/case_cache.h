// The worker's cache of generated inputs and float64 expected outputs across evaluations, and
// the host-memory digest that guards it (see CaseCache).
#pragma once
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/parallel.h"
#include "task/inputs.h"

namespace ksol {

inline uint64_t digest(const std::vector<HostTensor>& v, uint64_t h = 0) {
  for (auto& t : v) {
    h = digest_bytes(t.bytes.data(), t.bytes.size(), h);
    h = digest_bytes(t.f64.data(), t.f64.size() * sizeof(double), h);
  }
  return h;
}
inline size_t bytes_of(const std::vector<HostTensor>& v) {
  size_t n = 0;
  for (auto& t : v) n += t.bytes.size() + t.f64.size() * sizeof(double);
  return n;
}

// Inputs and expected outputs kept by the worker process across evaluations. A search draws its
// seeds once per task (see search/optimize.cpp), so each of its candidates is checked on the same
// cases: they are generated and their float64 references computed once, not once per candidate.
// The cache holds one task (its spec and reference libraries) at a time, and takes an entry only
// while the total stays under its cap (KSOL_WORKER_CACHE_MIB; default an eighth of the host's
// memory over the number of GPUs, one worker each): nothing is evicted mid-task, so a working set larger than the cap still hits on the
// entries that fit. A candidate runs in this process and could write host memory: the entries an
// evaluation used are re-checked against their digests at its end (verify_touched: that
// candidate fails), and every hit is checked too (an entry changed by an evaluation that did not
// use it: the cache starts over and the case is made again, nobody is blamed).
class CaseCache {
 public:
  explicit CaseCache(size_t cap_bytes) : cap_(cap_bytes) {}
  size_t total_bytes() const { return total_; }
  // Re-checks every entry used since the last call (or begin()) against its digest, so that a
  // candidate that wrote to one is caught by its own evaluation, not the next one's hit. On a
  // mismatch the whole cache is dropped and the entry's key is returned in `which`.
  bool verify_touched(std::string* which = nullptr) {
    bool ok = true;
    for (const std::string& k : touched_) {
      auto it = entries_.find(k);
      if (it == entries_.end()) continue;
      if (it->second.check() != it->second.sum) {
        if (which) *which = k;
        ok = false;
        break;
      }
    }
    touched_.clear();
    if (!ok) entries_.clear(), total_ = 0;
    return ok;
  }
  void begin() { touched_.clear(); }
  size_t entries() const { return entries_.size(); }
  size_t discards() const { return discards_; }  // times a changed entry made the cache start over
  // An eighth of the host's memory shared by `workers` workers (one per GPU), or
  // KSOL_WORKER_CACHE_MIB per worker (0 turns the cache off).
  static size_t default_cap(int workers = 1) {
    if (const char* e = std::getenv("KSOL_WORKER_CACHE_MIB")) return static_cast<size_t>(std::strtoull(e, nullptr, 10)) << 20;
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
    size_t phys = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
    return phys / 8 / static_cast<size_t>(workers < 1 ? 1 : workers);
  }
  template <class T, class Make, class Digest, class Bytes>
  std::shared_ptr<const T> get(const std::string& scope, const std::string& key, Make make, Digest dig, Bytes size_of, int* hits, int* misses) {
    if (scope != scope_) {
      entries_.clear();
      total_ = 0;
      scope_ = scope;
    }
    touched_.insert(key);
    if (auto it = entries_.find(key); it != entries_.end()) {
      auto v = std::static_pointer_cast<const T>(it->second.value);
      if (dig(*v) == it->second.sum) {
        ++*hits;
        return v;
      }
      // Changed by an earlier evaluation (one that did not use this entry, so its own check did
      // not see it): nothing cached is trusted any more, and this case is made again.
      entries_.clear(), total_ = 0, ++discards_;
    }
    ++*misses;
    auto v = std::make_shared<const T>(make());
    size_t n = size_of(*v);
    if (cap_ > 0 && total_ + n <= cap_) {
      entries_[key] = Entry{v, dig(*v), [v, dig] { return dig(*v); }};
      total_ += n;
    }
    return v;
  }

 private:
  struct Entry {
    std::shared_ptr<const void> value;
    uint64_t sum = 0;
    std::function<uint64_t()> check;  // the digest now
  };
  std::set<std::string> touched_;
  std::string scope_;
  std::map<std::string, Entry> entries_;
  size_t total_ = 0, cap_ = 0, discards_ = 0;
};

}  // namespace ksol
