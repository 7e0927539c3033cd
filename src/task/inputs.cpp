#include "task/inputs.h"

#include "core/parallel.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace ksol {
namespace {

// Counter-based generator: every element's value depends only on (seed, stream, index), so
// generation parallelises and is reproducible.
inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
inline double unit(uint64_t x) { return (static_cast<double>(mix(x) >> 11) + 0.5) * 0x1.0p-53; }
// Standard normal deviates for the elements 2p and 2p+1 of a stream: one Box-Muller draw gives
// both (cos and sin), so generation pays one log, sqrt and sincos per two values. Element i's
// value depends only on (stream, i), whichever thread computes it.
inline void normal_pair(uint64_t stream, int64_t pair, double* z0, double* z1) {
  uint64_t key = mix(stream ^ 0x7f4a7c159e3779b9ull) ^ (static_cast<uint64_t>(pair) * 0xd6e8feb86659fd93ull);
  double r = std::sqrt(-2.0 * std::log(unit(key)));
  double s, c;
  ::sincos(6.283185307179586 * unit(key ^ 0x5851f42d4c957f2dull), &s, &c);
  *z0 = r * c;
  *z1 = r * s;
}

// One value of distribution d from the element's key and its standard normal deviate z.
double draw(Distribution d, uint64_t key, double z) {
  switch (d) {
    case Distribution::normal: return z;
    case Distribution::heavy: {
      // Symmetric Pareto (Lomax) tails of index 3, like a Student-t with 3 degrees of freedom:
      // P(|x| > t) = (1 + t)^-3, finite variance, rare values in the hundreds. One uniform and
      // one power per value, so large tensors generate quickly.
      double u = unit(key);
      double mag = std::pow(u, -1.0 / 3.0) - 1.0;
      return unit(key ^ 0x2545f4914f6cdd1dull) < 0.5 ? -mag : mag;
    }
    case Distribution::spiky: {
      double u = unit(key ^ 0xd1b54a32d192ed03ull);
      if (u < 0.02) return 0.0;
      if (u < 0.03) {
        double mag = 10.0 * std::pow(100.0, unit(key ^ 0x8cb92ba72f3d8dd7ull));
        return unit(key ^ 0x2545f4914f6cdd1dull) < 0.5 ? -mag : mag;
      }
      return 0.1 * z;
    }
    case Distribution::special: {
      double u = unit(key ^ 0xd1b54a32d192ed03ull);
      if (u < 0.004) return std::numeric_limits<double>::infinity();
      if (u < 0.008) return -std::numeric_limits<double>::infinity();
      if (u < 0.010) return std::numeric_limits<double>::quiet_NaN();
      return z;
    }
  }
  return 0;
}

struct SparseStructure {
  std::vector<int64_t> row_ptr;  // rows + 1
  std::vector<int64_t> col;      // nnz
};

// Row lengths for a sparse pattern, summing exactly to nnz with none above cols.
std::vector<int64_t> row_lengths(const std::string& pattern, int64_t rows, int64_t cols, int64_t nnz, uint64_t seed) {
  std::vector<int64_t> len(rows, 0);
  if (pattern == "powerlaw") {
    // Zipf-like weights over a random permutation of ranks; heavy rows are capped at cols and
    // what they cannot hold goes to the others.
    std::vector<double> w(rows);
    std::vector<int64_t> rank(rows);
    std::iota(rank.begin(), rank.end(), 0);
    for (int64_t i = rows - 1; i > 0; --i) std::swap(rank[i], rank[mix(seed ^ (uint64_t)i) % (uint64_t)(i + 1)]);
    double total = 0;
    for (int64_t i = 0; i < rows; ++i) total += (w[i] = std::pow(static_cast<double>(rank[i] + 1), -0.85));
    int64_t assigned = 0;
    for (int64_t i = 0; i < rows; ++i) {
      len[i] = std::min<int64_t>(cols, static_cast<int64_t>(std::floor(w[i] / total * static_cast<double>(nnz))));
      assigned += len[i];
    }
    for (int64_t i = 0; assigned < nnz; i = (i + 1) % rows)
      if (len[i] < cols) ++len[i], ++assigned;
    return len;
  }
  for (int64_t i = 0; i < rows; ++i) len[i] = (i + 1) * nnz / rows - i * nnz / rows;
  return len;
}

struct MatrixFile {
  int64_t rows = 0, cols = 0;
  SparseStructure m;
};

// Reads a Matrix Market coordinate file into sorted, de-duplicated CSR.
MatrixFile read_matrix_market(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::string line;
  int lineno = 0;
  auto fail = [&](const std::string& m) { throw std::runtime_error(path + ":" + std::to_string(lineno) + ": " + m); };
  std::getline(in, line);
  ++lineno;
  std::string banner = line;
  for (auto& ch : banner) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (banner.rfind("%%matrixmarket", 0) != 0) fail("not a Matrix Market file (no %%MatrixMarket banner)");
  if (banner.find("coordinate") == std::string::npos) fail("only coordinate (sparse) matrices are supported");
  if (banner.find("complex") != std::string::npos) fail("complex matrices are not supported");
  bool symmetric = banner.find("symmetric") != std::string::npos || banner.find("hermitian") != std::string::npos;
  if (banner.find("skew-symmetric") != std::string::npos) symmetric = true;
  MatrixFile f;
  int64_t entries = -1;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty() || line[0] == '%') continue;
    std::istringstream ls(line);
    if (!(ls >> f.rows >> f.cols >> entries) || f.rows < 0 || f.cols < 0 || entries < 0) fail("expected 'rows cols entries'");
    break;
  }
  if (entries < 0) fail("no size line");
  std::vector<std::pair<int64_t, int64_t>> coords;
  coords.reserve(static_cast<size_t>(symmetric ? 2 * entries : entries));
  for (int64_t e = 0; e < entries;) {
    if (!std::getline(in, line)) fail("file ends after " + std::to_string(e) + " of " + std::to_string(entries) + " entries");
    ++lineno;
    if (line.empty() || line[0] == '%') continue;
    std::istringstream ls(line);
    int64_t i, j;
    if (!(ls >> i >> j)) fail("expected 'row col [value]'");
    if (i < 1 || i > f.rows || j < 1 || j > f.cols) fail("entry (" + std::to_string(i) + ", " + std::to_string(j) + ") outside the matrix");
    coords.push_back({i - 1, j - 1});
    if (symmetric && i != j) coords.push_back({j - 1, i - 1});
    ++e;
  }
  std::sort(coords.begin(), coords.end());
  coords.erase(std::unique(coords.begin(), coords.end()), coords.end());
  f.m.row_ptr.assign(f.rows + 1, 0);
  f.m.col.reserve(coords.size());
  for (auto& [r, c] : coords) {
    ++f.m.row_ptr[r + 1];
    f.m.col.push_back(c);
  }
  for (int64_t r = 0; r < f.rows; ++r) f.m.row_ptr[r + 1] += f.m.row_ptr[r];
  return f;
}

SparseStructure make_sparse(const Task& t, const SizeSet& s, uint64_t seed) {
  if (auto it = s.options.find("matrix"); it != s.options.end()) {
    MatrixFile f = read_matrix_market(it->second);
    if (s.options.count("transposed")) {
      // CSC of the file's matrix = CSR of its transpose.
      MatrixFile tr;
      tr.rows = f.cols;
      tr.cols = f.rows;
      tr.m.row_ptr.assign(tr.rows + 1, 0);
      for (int64_t c : f.m.col) ++tr.m.row_ptr[c + 1];
      for (int64_t r = 0; r < tr.rows; ++r) tr.m.row_ptr[r + 1] += tr.m.row_ptr[r];
      tr.m.col.resize(f.m.col.size());
      std::vector<int64_t> fill(tr.m.row_ptr.begin(), tr.m.row_ptr.end() - 1);
      for (int64_t r = 0; r < f.rows; ++r)
        for (int64_t j = f.m.row_ptr[r]; j < f.m.row_ptr[r + 1]; ++j) tr.m.col[fill[f.m.col[j]]++] = r;
      f = std::move(tr);
    }
    int64_t rows = std::llround(t.eval(t.sparse->rows, s)), cols = std::llround(t.eval(t.sparse->cols, s));
    if (rows != f.rows || cols != f.cols)
      throw std::runtime_error("size '" + s.name + "' says " + std::to_string(rows) + "x" + std::to_string(cols) + " but " +
                               it->second + " is " + std::to_string(f.rows) + "x" + std::to_string(f.cols));
    return f.m;
  }
  int64_t rows = std::llround(t.eval(t.sparse->rows, s)), cols = std::llround(t.eval(t.sparse->cols, s));
  int64_t nnz = std::llround(t.eval(t.sparse->nnz, s));
  std::string pattern = t.sparse->pattern;
  if (auto it = s.options.find("pattern"); it != s.options.end()) pattern = it->second;
  if (pattern != "uniform" && pattern != "powerlaw" && pattern != "banded")
    throw std::runtime_error("unknown sparse pattern '" + pattern + "' (uniform, powerlaw, banded)");
  if (nnz > rows * cols) throw std::runtime_error("nnz exceeds rows*cols in size '" + s.name + "'");
  if (rows == 0) return {{0}, {}};
  std::vector<int64_t> len = row_lengths(pattern, rows, cols, nnz, seed);
  SparseStructure m;
  m.row_ptr.assign(rows + 1, 0);
  for (int64_t i = 0; i < rows; ++i) m.row_ptr[i + 1] = m.row_ptr[i] + len[i];
  m.col.resize(nnz);
  parallel_for(rows, [&](int64_t r0, int64_t r1, int64_t) {
    std::vector<int64_t> pick;
    for (int64_t i = r0; i < r1; ++i) {
      int64_t L = len[i], base = m.row_ptr[i];
      if (pattern == "banded") {
        int64_t center = cols > 1 ? i * (cols - 1) / std::max<int64_t>(1, rows - 1) : 0;
        int64_t start = std::clamp<int64_t>(center - L / 2, 0, cols - L);
        for (int64_t k = 0; k < L; ++k) m.col[base + k] = start + k;
        continue;
      }
      pick.clear();
      uint64_t ctr = 0;
      if (L * 2 > cols) {
        // Dense row: keep each column with the right count by a partial shuffle.
        std::vector<int64_t> all(cols);
        std::iota(all.begin(), all.end(), 0);
        for (int64_t k = 0; k < L; ++k) std::swap(all[k], all[k + mix(seed ^ (i * 0x9e37ull) ^ ctr++) % (cols - k)]);
        pick.assign(all.begin(), all.begin() + L);
        std::sort(pick.begin(), pick.end());
      } else {
        while (static_cast<int64_t>(pick.size()) < L) {
          while (static_cast<int64_t>(pick.size()) < L) pick.push_back(mix(seed ^ (uint64_t(i) << 20) ^ ctr++) % cols);
          std::sort(pick.begin(), pick.end());
          pick.erase(std::unique(pick.begin(), pick.end()), pick.end());
        }
      }
      std::copy(pick.begin(), pick.end(), m.col.begin() + base);
    }
  });
  return m;
}

uint64_t digest_of(const SparseStructure& m) {
  uint64_t h = digest_bytes(m.row_ptr.data(), m.row_ptr.size() * sizeof(int64_t), 0);
  return digest_bytes(m.col.data(), m.col.size() * sizeof(int64_t), h);
}

// The structure of one (size, seed), shared by the inputs of every distribution of that seed: the
// correctness gate draws three distributions a seed, each of which made the same structure again.
// The last two structures are kept, each checked against its digest at every use (a candidate
// run in the worker's process could write host memory): a changed one is made again.
std::shared_ptr<const SparseStructure> sparse_for(const Task& t, const SizeSet& s, uint64_t seed) {
  std::string key = std::to_string(std::llround(t.eval(t.sparse->rows, s))) + "x" + std::to_string(std::llround(t.eval(t.sparse->cols, s))) +
                    "|" + std::to_string(std::llround(t.eval(t.sparse->nnz, s))) + "|" + t.sparse->pattern + "|" + std::to_string(seed);
  for (const char* o : {"pattern", "matrix", "transposed"})
    if (auto it = s.options.find(o); it != s.options.end()) key += std::string("|") + o + "=" + it->second;
  struct Entry {
    std::string key;
    std::shared_ptr<const SparseStructure> m;
    uint64_t sum;
  };
  static std::mutex mu;
  static std::vector<Entry> kept;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (size_t i = 0; i < kept.size(); ++i) {
      if (kept[i].key != key) continue;
      Entry e = kept[i];
      kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(i));
      if (digest_of(*e.m) != e.sum) break;  // changed since it was made: made again below
      kept.push_back(e);
      return e.m;
    }
  }
  auto m = std::make_shared<const SparseStructure>(make_sparse(t, s, seed));
  uint64_t sum = digest_of(*m);
  std::lock_guard<std::mutex> lock(mu);
  kept.push_back({key, m, sum});
  if (kept.size() > 2) kept.erase(kept.begin());
  return m;
}

void store_int(DType t, HostTensor& h, int64_t i, int64_t v) {
  if (t == DType::i32) {
    int32_t x = static_cast<int32_t>(v);
    std::memcpy(h.bytes.data() + 4 * i, &x, 4);
  } else {
    std::memcpy(h.bytes.data() + 8 * i, &v, 8);
  }
}

}  // namespace

const char* distribution_name(Distribution d) {
  switch (d) {
    case Distribution::normal: return "normal";
    case Distribution::heavy: return "heavy";
    case Distribution::spiky: return "spiky";
    case Distribution::special: return "special";
  }
  return "?";
}
Distribution parse_distribution(const std::string& s) {
  for (Distribution d : {Distribution::normal, Distribution::heavy, Distribution::spiky, Distribution::special})
    if (s == distribution_name(d)) return d;
  throw std::runtime_error("unknown distribution '" + s + "' (normal, heavy, spiky, special)");
}
std::vector<Distribution> distributions_for(const Task& t) {
  std::vector<Distribution> v = {Distribution::normal, Distribution::heavy, Distribution::spiky};
  if (t.special_values) v.push_back(Distribution::special);
  return v;
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
float bf16_to_f32(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);
  if (ax >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (ax < 0x38800000u) {  // subnormal half or zero
    float a;
    std::memcpy(&a, &ax, 4);
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(a * 16777216.0f)));
  }
  uint32_t mant = ax & 0x7fffffu, exp = (ax >> 23) - 112;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}
float f16_to_f32(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  float out;
  if (exp == 0) {
    out = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -out : out;
  }
  uint32_t u = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  std::memcpy(&out, &u, 4);
  return out;
}

double load_as_double(DType t, const void* p, int64_t i) {
  const auto* b = static_cast<const uint8_t*>(p);
  switch (t) {
    case DType::f64: { double v; std::memcpy(&v, b + 8 * i, 8); return v; }
    case DType::f32: { float v; std::memcpy(&v, b + 4 * i, 4); return v; }
    case DType::bf16: { uint16_t v; std::memcpy(&v, b + 2 * i, 2); return bf16_to_f32(v); }
    case DType::f16: { uint16_t v; std::memcpy(&v, b + 2 * i, 2); return f16_to_f32(v); }
    case DType::i32: { int32_t v; std::memcpy(&v, b + 4 * i, 4); return v; }
    case DType::i64: { int64_t v; std::memcpy(&v, b + 8 * i, 8); return static_cast<double>(v); }
  }
  return 0;
}
void store_from_double(DType t, void* p, int64_t i, double v) {
  auto* b = static_cast<uint8_t*>(p);
  switch (t) {
    case DType::f64: std::memcpy(b + 8 * i, &v, 8); break;
    case DType::f32: { float f = static_cast<float>(v); std::memcpy(b + 4 * i, &f, 4); break; }
    case DType::bf16: { uint16_t h = f32_to_bf16(static_cast<float>(v)); std::memcpy(b + 2 * i, &h, 2); break; }
    case DType::f16: { uint16_t h = f32_to_f16(static_cast<float>(v)); std::memcpy(b + 2 * i, &h, 2); break; }
    case DType::i32: { int32_t x = static_cast<int32_t>(v); std::memcpy(b + 4 * i, &x, 4); break; }
    case DType::i64: { int64_t x = static_cast<int64_t>(v); std::memcpy(b + 8 * i, &x, 8); break; }
  }
}

uint64_t input_stream_key(uint64_t seed, size_t tensor, Distribution d) {
  return mix(seed * 0x100000001b3ull + tensor + 1) ^ (static_cast<uint64_t>(d) << 56);
}

std::vector<HostTensor> generate_inputs(const Task& t, const SizeSet& s, Distribution d, uint64_t seed, bool with_f64) {
  std::vector<HostTensor> out(t.tensors.size());
  std::shared_ptr<const SparseStructure> sparse, sparse_t;
  for (size_t k = 0; k < t.tensors.size(); ++k) {
    const TensorSpec& ts = t.tensors[k];
    HostTensor& h = out[k];
    h.dtype = ts.dtype;
    h.numel = t.numel(ts, s);
    if (ts.role == Role::out) continue;
    // Float tensors are written in full below, from all threads; structure tensors are zeroed.
    bool structure = ts.init.rfind("csc.", 0) == 0 || ts.init.rfind("csr.", 0) == 0 || ts.init.rfind("coo.", 0) == 0 || ts.init == "ell.col_idx";
    if (structure || !dtype_is_float(ts.dtype)) parallel_assign<uint8_t>(h.bytes, static_cast<size_t>(h.numel) * dtype_size(ts.dtype), 0);
    else h.bytes.resize(static_cast<size_t>(h.numel) * dtype_size(ts.dtype));
    if (ts.init.rfind("csc.", 0) == 0) {
      // CSC of rows x cols is the CSR of its transpose: the same generator with the roles swapped.
      if (!sparse_t) {
        Task tt = t;
        std::swap(tt.sparse->rows, tt.sparse->cols);
        SizeSet st = s;
        if (st.options.count("matrix")) st.options["transposed"] = "1";
        sparse_t = sparse_for(tt, st, mix(seed ^ 0xc0ffee));
      }
      const auto& m = *sparse_t;
      int64_t want = ts.init == "csc.col_ptr" ? static_cast<int64_t>(m.row_ptr.size()) : static_cast<int64_t>(m.col.size());
      if (want != h.numel)
        throw std::runtime_error("tensor '" + ts.name + "' has " + std::to_string(h.numel) + " elements but its " + ts.init +
                                 " structure has " + std::to_string(want) + " in size '" + s.name + "'");
      const std::vector<int64_t>& from = ts.init == "csc.col_ptr" ? m.row_ptr : m.col;
      parallel_for(h.numel, [&](int64_t a, int64_t b, int64_t) {
        for (int64_t i = a; i < b; ++i) store_int(ts.dtype, h, i, from[i]);
      });
      continue;
    }
    if (ts.init == "ell.col_idx") {
      // ELL: shape [rows, width]; row r's columns first, then -1 padding.
      if (!sparse) sparse = sparse_for(t, s, mix(seed ^ 0xc0ffee));
      const auto& m = *sparse;
      int64_t rows = static_cast<int64_t>(m.row_ptr.size()) - 1;
      int64_t width = rows > 0 ? h.numel / rows : 0;
      if (rows <= 0 || width * rows != h.numel)
        throw std::runtime_error("ELL tensor '" + ts.name + "' must have shape [rows, width] in size '" + s.name + "'");
      for (int64_t r = 0; r < rows; ++r) {
        int64_t len = m.row_ptr[r + 1] - m.row_ptr[r];
        if (len > width)
          throw std::runtime_error("row " + std::to_string(r) + " has " + std::to_string(len) + " nonzeros, more than the ELL width " +
                                   std::to_string(width) + " of size '" + s.name + "'");
      }
      parallel_for(rows, [&](int64_t a, int64_t b, int64_t) {
        for (int64_t r = a; r < b; ++r) {
          int64_t len = m.row_ptr[r + 1] - m.row_ptr[r];
          for (int64_t j = 0; j < width; ++j) store_int(ts.dtype, h, r * width + j, j < len ? m.col[m.row_ptr[r] + j] : -1);
        }
      }, 1 << 12);
      continue;
    }
    if (ts.init.rfind("csr.", 0) == 0 || ts.init.rfind("coo.", 0) == 0) {
      if (!sparse) sparse = sparse_for(t, s, mix(seed ^ 0xc0ffee));
      const auto& m = *sparse;
      int64_t want = ts.init == "csr.row_ptr" ? static_cast<int64_t>(m.row_ptr.size()) : static_cast<int64_t>(m.col.size());
      if (want != h.numel)
        throw std::runtime_error("tensor '" + ts.name + "' has " + std::to_string(h.numel) + " elements but its " + ts.init +
                                 " structure has " + std::to_string(want) + " in size '" + s.name + "'");
      if (ts.init == "csr.row_ptr" || ts.init == "csr.col_idx" || ts.init == "coo.col") {
        const std::vector<int64_t>& from = ts.init == "csr.row_ptr" ? m.row_ptr : m.col;
        parallel_for(h.numel, [&](int64_t a, int64_t b, int64_t) {
          for (int64_t i = a; i < b; ++i) store_int(ts.dtype, h, i, from[i]);
        });
      } else {  // coo.row
        parallel_for(static_cast<int64_t>(m.row_ptr.size()) - 1, [&](int64_t a, int64_t b, int64_t) {
          for (int64_t r = a; r < b; ++r)
            for (int64_t j = m.row_ptr[r]; j < m.row_ptr[r + 1]; ++j) store_int(ts.dtype, h, j, r);
        }, 1 << 12);
      }
      continue;
    }
    if (with_f64) h.f64.resize(h.numel);
    uint64_t stream = input_stream_key(seed, k, d);
    bool uniform = ts.init == "uniform01";
    bool gaussian = !uniform && d != Distribution::heavy;  // the distributions that use a normal deviate
    parallel_for(h.numel, [&](int64_t a, int64_t b, int64_t) {
      double z[2] = {0, 0};
      for (int64_t i = a; i < b; ++i) {
        if (gaussian && (i == a || (i & 1) == 0)) normal_pair(stream, i >> 1, &z[0], &z[1]);
        uint64_t key = stream ^ (static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull);
        double v = uniform ? unit(key) : draw(d, key, z[i & 1]);
        store_from_double(ts.dtype, h.bytes.data(), i, v);
        if (with_f64) h.f64[i] = load_as_double(ts.dtype, h.bytes.data(), i);
      }
    });
  }
  return out;
}

std::vector<HostTensor> make_reference_outputs(const Task& t, const SizeSet& s) {
  std::vector<HostTensor> out(t.tensors.size());
  for (size_t k = 0; k < t.tensors.size(); ++k) {
    const TensorSpec& ts = t.tensors[k];
    out[k].dtype = ts.dtype;
    out[k].numel = t.numel(ts, s);
    if (ts.role != Role::out) continue;
    if (dtype_is_float(ts.dtype)) parallel_assign<double>(out[k].f64, static_cast<size_t>(out[k].numel), 0.0);
    else parallel_assign<uint8_t>(out[k].bytes, static_cast<size_t>(out[k].numel) * dtype_size(ts.dtype), 0);
  }
  return out;
}

Tolerance tolerance_for(const Task& t, const SizeSet& s, const TensorSpec& out, bool loose_precision) {
  Tolerance tol;
  // An exact output allows no difference at all: a bound of zero, which the tolerance
  // comparators (host and device) apply with the same NaN and infinity rules as the exact one.
  if (out.compare == "exact") {
    tol.c_out = tol.u_out = tol.u_acc = tol.growth = tol.floor_frac = 0;
    return tol;
  }
  tol.u_out = dtype_unit_roundoff(out.dtype);
  double L = std::max(1.0, t.eval(t.accumulation, s));
  // The tensor core's rounding toward zero is the hardware's, not the formula's: its term is added
  // after the task's rtol_scale (which scales the formula's conditioning), and only under the task's
  // own policy (the precision defence's loose mode keeps bf16's plain bound).
  tol.growth = (8.0 + 2.0 * std::sqrt(L)) * t.rtol_scale;
  if (t.tensor_core_accumulation() && !loose_precision) tol.growth += L / kTensorCoreKStep;
  tol.u_acc = loose_precision ? std::ldexp(1.0, -8) : t.policy_unit_roundoff();
  tol.floor_frac = t.floor_frac;
  return tol;
}

Tolerance reference_agreement_tolerance(const Task& t, const SizeSet& s, const TensorSpec& out) {
  Tolerance tol = tolerance_for(t, s, out, false);
  tol.c_out *= kReferenceAgreementFraction;  // both terms of the bound scale by the fraction
  tol.u_acc *= kReferenceAgreementFraction;
  return tol;
}

CompareResult compare_output(const Tolerance& tol, DType dt, const void* out, const double* ref, const double* mag,
                             int64_t n, int64_t stride) {
  // Pass 1: the mean magnitude over finite elements (per chunk, then combined).
  std::vector<double> sums(1024, 0.0);
  std::vector<int64_t> counts(1024, 0);
  parallel_for(n, [&](int64_t a, int64_t b, int64_t k) {
    double sum = 0;
    int64_t c = 0;
    for (int64_t i = a; i < b; ++i)
      if (std::isfinite(mag[i])) sum += std::fabs(mag[i]), ++c;
    sums[k] = sum;
    counts[k] = c;
  });
  double total = 0;
  int64_t finite = 0;
  for (size_t k = 0; k < sums.size(); ++k) total += sums[k], finite += counts[k];
  double floor = tol.floor_frac * (finite ? total / static_cast<double>(finite) : 0.0);
  // Pass 2: every stride-th element against its bound; chunks merge into the first failure.
  int64_t slots = (n + stride - 1) / stride;
  std::vector<CompareResult> part(1024);
  parallel_for(slots, [&](int64_t a, int64_t b, int64_t k) {
    CompareResult& r = part[k];
    for (int64_t j = a; j < b; ++j) {
      int64_t i = j * stride;
      ++r.checked;
      double got = load_as_double(dt, out, i), want = ref[i];
      double t = 0, ratio = 0;
      bool bad;
      if (std::isnan(want) || std::isinf(want)) {
        bad = std::isnan(want) ? !std::isnan(got) : got != want;
        ratio = bad ? std::numeric_limits<double>::infinity() : 0;
      } else if (!std::isfinite(got)) {
        bad = true;
        ratio = std::numeric_limits<double>::infinity();
      } else {
        double m = std::isfinite(mag[i]) ? std::fabs(mag[i]) : 0;
        t = tol.c_out * tol.u_out * std::fabs(want) + tol.u_acc * tol.growth * (m + floor);
        double err = std::fabs(got - want);
        ratio = t > 0 ? err / t : (err > 0 ? std::numeric_limits<double>::infinity() : 0);
        bad = err > t;
      }
      r.worst_ratio = std::max(r.worst_ratio, ratio);
      if (bad) {
        if (r.first_bad < 0) {
          r.first_bad = i;
          r.first_got = got;
          r.first_want = want;
          r.first_tol = t;
        }
        ++r.bad;
      }
    }
  });
  CompareResult r;
  for (auto& p : part) {
    r.checked += p.checked;
    r.bad += p.bad;
    r.worst_ratio = std::max(r.worst_ratio, p.worst_ratio);
    if (p.first_bad >= 0 && r.first_bad < 0) {  // chunks are in index order
      r.first_bad = p.first_bad;
      r.first_got = p.first_got;
      r.first_want = p.first_want;
      r.first_tol = p.first_tol;
    }
  }
  if (r.bad) {
    r.ok = false;
    std::ostringstream o;
    o.precision(9);
    o << r.bad << " of " << r.checked << " elements out of tolerance; first at index " << r.first_bad << ": got "
      << r.first_got << ", want " << r.first_want << " (tolerance " << r.first_tol << "); worst error/tolerance "
      << r.worst_ratio;
    r.message = o.str();
  }
  return r;
}

namespace {

double ref_value(const HostTensor& h, int64_t i) {
  return h.f64.empty() ? load_as_double(h.dtype, h.bytes.data(), i) : h.f64[i];
}

// Elementwise check with a per-element predicate; builds the same report as compare_output.
template <class Bound>
CompareResult check_each(DType dt, const void* out, const HostTensor& ref, int64_t n, int64_t stride, Bound bound) {
  CompareResult r;
  for (int64_t i = 0; i < n; i += stride) {
    ++r.checked;
    double got = load_as_double(dt, out, i), want = ref_value(ref, i);
    bool bad;
    double t = 0;
    if (std::isnan(want) || std::isinf(want) || !std::isfinite(got)) {
      bad = std::isnan(want) ? !std::isnan(got) : got != want;
    } else {
      t = bound(want);
      bad = std::fabs(got - want) > t;
      if (t > 0) r.worst_ratio = std::max(r.worst_ratio, std::fabs(got - want) / t);
    }
    if (bad) {
      if (r.first_bad < 0) r.first_bad = i, r.first_got = got, r.first_want = want, r.first_tol = t;
      ++r.bad;
      r.worst_ratio = std::numeric_limits<double>::infinity();
    }
  }
  if (r.bad) {
    r.ok = false;
    std::ostringstream o;
    o.precision(9);
    o << r.bad << " of " << r.checked << " elements differ; first at index " << r.first_bad << ": got " << r.first_got
      << ", want " << r.first_want << " (allowed difference " << r.first_tol << ")";
    r.message = o.str();
  }
  return r;
}

int64_t last_extent(const Task& t, const TensorSpec& ts, const SizeSet& s) {
  auto shape = t.shape_of(ts, s);
  return shape.empty() ? 1 : shape.back();
}

}  // namespace

CompareResult compare_tensor(const Task& t, const SizeSet& s, size_t k, const std::vector<HostTensor>& inputs,
                             const OutputBytes& got, const std::vector<HostTensor>& ref,
                             const std::vector<HostTensor>* mag, bool loose_precision, int64_t stride) {
  const TensorSpec& ts = t.tensors[k];
  const int64_t n = t.numel(ts, s);
  const void* out = got[k].data();
  if (ts.compare == "tolerance") {
    Tolerance tol = tolerance_for(t, s, ts, loose_precision);
    const double* m = mag ? (*mag)[k].f64.data() : ref[k].f64.data();
    return compare_output(tol, ts.dtype, out, ref[k].f64.data(), m, n, stride);
  }
  if (ts.compare == "exact") {
    // Float outputs through the (parallel) tolerance comparator with a bound of zero, the test
    // the device comparator applies to device cases; integer ones element by element.
    if (dtype_is_float(ts.dtype) && !ref[k].f64.empty())
      return compare_output(tolerance_for(t, s, ts, loose_precision), ts.dtype, out, ref[k].f64.data(), ref[k].f64.data(), n, stride);
    return check_each(ts.dtype, out, ref[k], n, stride, [](double) { return 0.0; });
  }
  if (ts.compare == "relative")
    return check_each(ts.dtype, out, ref[k], n, stride, [&](double w) { return ts.rtol * std::fabs(w) + ts.atol; });
  if (ts.compare == "sorted_rows") {
    // Rows whose order is unspecified: compare each row's sorted values under the tolerance.
    int64_t len = std::max<int64_t>(1, last_extent(t, ts, s));
    std::vector<double> g(n), w(n);
    for (int64_t i = 0; i < n; ++i) g[i] = load_as_double(ts.dtype, out, i), w[i] = ref_value(ref[k], i);
    auto key = [](double a, double b) { return std::isnan(b) ? !std::isnan(a) : (!std::isnan(a) && a < b); };
    for (int64_t r = 0; r * len < n; ++r) {
      std::sort(g.begin() + r * len, g.begin() + std::min(n, (r + 1) * len), key);
      std::sort(w.begin() + r * len, w.begin() + std::min(n, (r + 1) * len), key);
    }
    std::vector<uint8_t> gb(static_cast<size_t>(n) * 8);
    for (int64_t i = 0; i < n; ++i) store_from_double(DType::f64, gb.data(), i, g[i]);
    std::vector<double> m(n);
    for (int64_t i = 0; i < n; ++i) m[i] = std::fabs(w[i]);
    Tolerance tol = tolerance_for(t, s, ts, loose_precision);
    return compare_output(tol, DType::f64, gb.data(), w.data(), m.data(), n, stride);
  }
  // index_of: each row's indices must be distinct, in range, and point at elements of the input
  // equal to the values the candidate returned beside them (ties may pick any of the equals).
  size_t xi = 0, vi = 0;
  for (size_t j = 0; j < t.tensors.size(); ++j) {
    if (t.tensors[j].name == ts.of) xi = j;
    if (t.tensors[j].name == ts.values) vi = j;
  }
  const TensorSpec& xs = t.tensors[xi];
  const TensorSpec& vs = t.tensors[vi];
  int64_t klen = std::max<int64_t>(1, last_extent(t, ts, s)), xlen = std::max<int64_t>(1, last_extent(t, xs, s));
  CompareResult r;
  std::ostringstream why;
  for (int64_t row = 0; row * klen < n && r.bad == 0; ++row) {
    std::vector<int64_t> seen;
    for (int64_t j = 0; j < klen; ++j) {
      int64_t i = row * klen + j;
      ++r.checked;
      int64_t idx = static_cast<int64_t>(load_as_double(ts.dtype, out, i));
      double val = load_as_double(vs.dtype, got[vi].data(), i);
      if (idx < 0 || idx >= xlen) {
        why << "index " << idx << " at position " << i << " is outside [0, " << xlen << ")";
      } else if (std::find(seen.begin(), seen.end(), idx) != seen.end()) {
        why << "index " << idx << " appears twice in row " << row;
      } else {
        double x = load_as_double(xs.dtype, inputs[xi].bytes.data(), row * xlen + idx);
        if (!(x == val || (std::isnan(x) && std::isnan(val))))
          why << "position " << i << " names index " << idx << ", where the input holds " << x << ", not the returned value " << val;
        seen.push_back(idx);
      }
      if (!why.str().empty()) {
        r.bad = 1;
        r.first_bad = i;
        break;
      }
    }
  }
  if (r.bad) {
    r.ok = false;
    r.message = why.str();
  }
  return r;
}

SizeSet matrix_market_size(const Task& t, const std::string& path) {
  if (!t.sparse) throw std::runtime_error("task " + t.name + " has no [sparse] structure for a Matrix Market file");
  MatrixFile f = read_matrix_market(path);
  SizeSet s;
  s.name = "mtx:" + std::filesystem::path(path).stem().string();
  for (auto& sz : t.sizes)
    if (!sz.hidden) {
      s.dims = sz.dims;
      break;
    }
  auto set = [&](const std::string& expr, double v, const char* what) {
    if (std::find(t.dims.begin(), t.dims.end(), expr) == t.dims.end())
      throw std::runtime_error("task " + t.name + ": [sparse] " + what + " is '" + expr + "', not a plain dim, so a Matrix Market file cannot set it");
    s.dims[expr] = v;
  };
  set(t.sparse->rows, static_cast<double>(f.rows), "rows");
  set(t.sparse->cols, static_cast<double>(f.cols), "cols");
  set(t.sparse->nnz, static_cast<double>(f.m.col.size()), "nnz");
  s.options["matrix"] = std::filesystem::absolute(path).string();
  s.weight = 1.0;
  return s;
}

}  // namespace ksol
