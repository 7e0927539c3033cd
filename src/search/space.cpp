#include "search/space.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <semaphore>

namespace ksol::search {

codegen::Schedule LegalSpace::schedule(size_t i) const {
  codegen::Schedule s;
  const size_t n = keys.size();
  for (size_t k = 0; k < n; ++k) s.emplace_back(keys[k], grids[k][legal[i * n + k]]);
  return s;
}

std::shared_future<std::shared_ptr<const LegalSpace>> legal_space(const dsl::Program& p, const codegen::Binding& b) {
  static std::mutex mu;
  static std::map<std::string, std::shared_future<std::shared_ptr<const LegalSpace>>> made;
  std::string key = dsl::print_source(p);
  for (auto& t : b.tensor_order) key += "|t:" + t;
  for (auto& d : b.dim_order) key += "|d:" + d;
  std::lock_guard<std::mutex> g(mu);
  if (auto it = made.find(key); it != made.end()) return it->second;
  auto fut = std::async(std::launch::async, [p, b] {
               // At most two walks at a time: they share the cores with compiles and the worker.
               static std::counting_semaphore<2> slots(2);
               slots.acquire();
               struct Release {
                 ~Release() { slots.release(); }
               } release;
               codegen::Space sp = codegen::schedule_space(p, b);
               auto out = std::make_shared<LegalSpace>();
               out->keys = sp.keys;
               out->grids = sp.grids;
               out->legal.reserve(sp.legal.size() * sp.keys.size());
               for (const codegen::Schedule& s : sp.legal)
                 for (size_t k = 0; k < sp.keys.size(); ++k) {
                   const auto& grid = sp.grids[k];
                   size_t at = 0;
                   for (auto& [key, v] : s)
                     if (key == sp.keys[k]) at = static_cast<size_t>(std::find(grid.begin(), grid.end(), v) - grid.begin());
                   out->legal.push_back(static_cast<uint8_t>(std::min<size_t>(at, 255)));
                 }
               return std::shared_ptr<const LegalSpace>(out);
             }).share();
  made.emplace(key, fut);
  return fut;
}

}  // namespace ksol::search
