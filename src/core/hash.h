// SHA-256, used for content-addressed caches and for the identity of specs and sources.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace ksol {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  void update(std::string_view s) { update(s.data(), s.size()); }
  std::string hex();  // finishes the hash; the object is spent afterwards

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  uint64_t len_ = 0;
  size_t used_ = 0;
};

std::string sha256_hex(std::string_view s);

}  // namespace ksol
