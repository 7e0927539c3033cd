// Which code generator family a checked program belongs to (docs/DSL.md, "The schedule"), or
// why none does. The tests, in order: any read at a sum of two indices (X[n, c, h+r-1, w+s-1])
// makes it a conv when it is the conv family's 2-D convolution and otherwise direct (a loop nest
// per output element: 3-D, transposed and grouped convolutions, pools), as does a reduction over
// several indices or an argmax over an index other than the last; any csr input sparse, any offset read a stencil, no reduction elementwise, a
// sum of A[m, k] * B[k, n] a gemm, anything else must be row-wise. Fixed extents (F: f32[K, C,
// 3, 3]), `outside 0` and sums over several indices exist for the conv alone.
#include <string>

#include "core/util.h"
#include "dsl/front.h"

namespace ksol::dsl::detail {
namespace {

const char* kNoFamily = " not supported by any family yet";

void collect_reads(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == Expr::Kind::read) out.push_back(&e);
  for (const Expr& a : e.args) collect_reads(a, out);
}

std::vector<const Expr*> reads_of(const Expr& e) {
  std::vector<const Expr*> out;
  collect_reads(e, out);
  return out;
}

bool has_offset(const Expr& read) {
  for (const IndexExpr& ix : read.indices)
    if (ix.offset != 0 || !ix.plus.empty()) return true;
  return false;
}

// The first index of the read that adds two indices (h+r), or nullptr.
const IndexExpr* sum_index(const Expr& read) {
  for (const IndexExpr& ix : read.indices)
    if (!ix.plus.empty()) return &ix;
  return nullptr;
}

// True when the read's indices are exactly `vars`, in order, without offsets.
bool reads_at(const Expr& read, const std::vector<std::string>& vars) {
  if (read.indices.size() != vars.size()) return false;
  for (size_t i = 0; i < vars.size(); ++i)
    if (read.indices[i].var != vars[i] || read.indices[i].offset != 0 || !read.indices[i].plus.empty()) return false;
  return true;
}

// True when the read's indices are some of `vars`, in their order: a row or column broadcast.
bool reads_broadcast(const Expr& read, const std::vector<std::string>& vars) {
  size_t next = 0;
  for (const IndexExpr& ix : read.indices) {
    while (next < vars.size() && vars[next] != ix.var) ++next;
    if (next == vars.size() || ix.offset != 0 || !ix.plus.empty()) return false;
    ++next;
  }
  return true;
}

const Expr* strip_casts(const Expr& e) {
  const Expr* x = &e;
  while (x->kind == Expr::Kind::cast || (x->kind == Expr::Kind::call && x->name == "tf32")) x = &x->args[0];
  return x->kind == Expr::Kind::read ? x : nullptr;
}

std::string list_text(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

class Recogniser {
 public:
  Recogniser(const Source& src, const Parsed& parsed) : src_(src), p_(parsed.program) {}

  std::string run() {
    for (const Definition& d : p_.defs)
      for (const Expr* r : reads_of(d.body))
        if (sum_index(*r)) return conv_shaped(d) ? conv(d, *r) : direct(d);
    for (const Definition& d : p_.defs)
      if (!d.over_rest.empty() || (d.reduce == ReduceOp::argmax && reduces_inner(d))) return direct(d);
    conv_only_features();
    for (const Param& prm : p_.inputs)
      if (prm.format != "dense") return sparse();
    std::vector<size_t> reductions;
    for (size_t i = 0; i < p_.defs.size(); ++i)
      if (p_.defs[i].reduce != ReduceOp::none) reductions.push_back(i);
    for (const Definition& d : p_.defs)
      for (const Expr* r : reads_of(d.body))
        if (has_offset(*r)) return stencil(reductions, *r);
    if (reductions.empty()) return "elementwise";
    for (size_t i : reductions)
      if (is_gemm(p_.defs[i])) return gemm(i, reductions);
    return rowwise(reductions);
  }

 private:
  const Source& src_;
  const Program& p_;

  bool is_input(const std::string& name) const {
    for (const Param& prm : p_.inputs)
      if (prm.name == name) return true;
    return false;
  }

  std::string sparse() const {
    for (const Definition& d : p_.defs) {
      for (const Expr* r : reads_of(d.body)) {
        const Param* prm = p_.param(r->name);
        if (!prm || prm->format == "dense" || !is_input(r->name)) continue;
        bool ok = d.reduce == ReduceOp::sum && r->indices[1].var == d.over && r->indices[0].var != d.over &&
                  !has_offset(*r);
        if (!ok)
          src_.fail(r->loc, std::string(prm->format == "ell" ? "an " : "a ") + prm->format + " matrix can only be read inside sum(...) over its column index, as in "
                            "sum(A[m, j] * x[j]) over j");
      }
    }
    return "sparse";
  }

  // Whether a sum over several indices is the conv family's 2-D convolution: a sum over three
  // indices into four of a product of two input reads of four indices each, at sums of two
  // indices with positive coefficients and no divisor. Any other reduction over a window (3-D, 1-D,
  // grouped through views, transposed, a pool) is the direct family's.
  bool conv_shaped(const Definition& d) const {
    if (d.reduce != ReduceOp::sum || d.over_rest.size() != 2 || d.indices.size() != 4) return false;
    if (d.body.kind != Expr::Kind::binary || d.body.op != "*") return false;
    const Expr* a = strip_casts(d.body.args[0]);
    const Expr* b = strip_casts(d.body.args[1]);
    if (!a || !b || !is_input(a->name) || !is_input(b->name)) return false;
    for (const Expr* x : {a, b}) {
      if (x->indices.size() != 4 || p_.param(x->name)->lowest_outside) return false;
      for (const IndexExpr& ix : x->indices)
        if (ix.divisor != 1 || ix.plus_scale < 1) return false;
    }
    return true;
  }

  // Whether some read of the body has the reduced index before its last position.
  static bool reduces_inner(const Definition& d) {
    for (const Expr* x : reads_of(d.body))
      for (size_t pos = 0; pos + 1 < x->indices.size(); ++pos)
        if (x->indices[pos].var == d.over) return true;
    return false;
  }

  // One reduction (sum, max, min, mean over one or several indices, argmax over one) of an
  // expression of input reads at any indices, the reads that leave a tensor's extents (sums of
  // two indices, divided ones) of tensors declared `outside 0` or `outside -inf`; then at most
  // one elementwise output definition, as a conv's epilogue. One thread computes each output
  // element by looping over the reduced indices (src/codegen/direct.cpp).
  std::string direct(const Definition& d) const {
    const std::string hint = "; a direct reduction is one definition such as Y[n, c, h] = max(X[n, c, h*2+r-1]) over r, "
                             "then at most one elementwise output definition";
    if (d.reduce == ReduceOp::none || d.reduce == ReduceOp::scan)
      src_.fail(d.loc, "'" + d.name + "' reads a tensor at a sum of two indices but is " +
                           (d.reduce == ReduceOp::none ? std::string("no reduction") : std::string("a scan")) + hint);
    for (const Expr* r : reads_of(d.body)) {
      if (!is_input(r->name))
        src_.fail(r->loc, "'" + d.name + "' reads the definition '" + r->name + "'; a direct reduction reads inputs only" + hint);
      const Param* prm = p_.param(r->name);
      for (const IndexExpr& ix : r->indices)
        if (index_is_compound(ix) && !prm->zero_outside && !prm->lowest_outside)
          src_.fail(ix.loc, "'" + r->name + "' is read at " + index_text(ix) +
                                ", which leaves its extents at the edges; say what it holds there: " + r->name + ": " +
                                type_name(prm->type) + list_text(prm->extents) + " outside 0 (or outside -inf)");
    }
    bool before = true;
    const Definition* epi = nullptr;
    for (const Definition& other : p_.defs) {
      if (&other == &d) {
        before = false;
        continue;
      }
      if (before)
        src_.fail(other.loc, "'" + other.name + "' comes before the reduction '" + d.name + "'; a prologue is" + kNoFamily +
                                 " (a direct reduction reads inputs only)");
      if (other.reduce != ReduceOp::none)
        src_.fail(other.loc, "'" + other.name + "' is a reduction besides '" + d.name + "'" + hint);
      if (epi) src_.fail(other.loc, "'" + other.name + "' is a second definition after the reduction '" + d.name + "'" + hint);
      epi = &other;
    }
    if (epi) {
      if (!epi->is_output) src_.fail(epi->loc, "'" + epi->name + "' after the reduction '" + d.name + "' is an intermediate" + hint);
      if (epi->extents != d.extents)
        src_.fail(epi->loc, "the epilogue keeps the output space " + list_text(d.extents) + ", but '" + epi->name +
                                "' ranges over " + list_text(epi->extents));
      for (const Expr* r : reads_of(epi->body)) {
        if (r->name == d.name && !reads_at(*r, epi->indices))
          src_.fail(r->loc, "the epilogue reads '" + d.name + "' at other indices than its own " + list_text(epi->indices));
        if (r->name != d.name && !reads_broadcast(*r, epi->indices))
          src_.fail(r->loc, "the epilogue reads '" + r->name + "' at indices other than " + list_text(epi->indices) +
                                " or some of them in that order");
      }
    }
    for (const Param& prm : p_.outputs)
      for (const std::string& e : prm.extents)
        if (extent_is_number(e))
          src_.fail(prm.loc, "'" + prm.name + "' has the fixed extent " + e + "; only inputs may have one");
    return "direct";
  }

  // The language features that only a conv uses, refused in every other program.
  void conv_only_features() const {
    for (const auto* list : {&p_.inputs, &p_.outputs}) {
      for (const Param& prm : *list) {
        for (const std::string& e : prm.extents)
          if (extent_is_number(e))
            src_.fail(prm.loc, "'" + prm.name + "' has the fixed extent " + e +
                                   "; fixed extents are for a conv's inputs (its filter), and elsewhere" + kNoFamily + " (use a dim name)");
        if (prm.zero_outside || prm.lowest_outside)
          src_.fail(prm.loc, "'" + prm.name + "' is 'outside " + (prm.zero_outside ? "0" : "-inf") +
                                 "' but no read leaves its extents through a sum of two indices (h+r); padding is for "
                                 "a conv's image or a pool's input, and elsewhere" + kNoFamily);
      }
    }
  }

  // Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s: one sum over
  // several indices of a product of two inputs, one of them (the image, `outside 0`) read at sums
  // of output and reduced indices, the other (the filter) at plain indices; then at most an
  // elementwise epilogue (epilogue() below). The exact layout (NCHW, KCRS) is the code
  // generator's to check.
  std::string conv(const Definition& d, const Expr& image_read) const {
    const IndexExpr& at = *sum_index(image_read);
    const std::string hint = "; a conv is Y[n, k, h, w] = sum(X[n, c, h+r-1, w+s-1] * F[k, c, r, s]) over c, r, s";
    if (d.reduce != ReduceOp::sum || d.over_rest.empty())
      src_.fail(at.loc, "'" + image_read.name + "' is read at " + index_text(at) + ", a sum of two indices, "
                        "which only a conv's sum over several indices may do" + hint);
    const Expr* a = d.body.kind == Expr::Kind::binary && d.body.op == "*" ? strip_casts(d.body.args[0]) : nullptr;
    const Expr* b = d.body.kind == Expr::Kind::binary && d.body.op == "*" ? strip_casts(d.body.args[1]) : nullptr;
    if (!a || !b || !is_input(a->name) || !is_input(b->name))
      src_.fail(d.body.loc, "'" + d.name + "' must be the sum of a product of two input reads" + hint);
    const Expr* image = sum_index(*a) ? a : b;
    const Expr* filter = image == a ? b : a;
    if (sum_index(*filter))
      src_.fail(sum_index(*filter)->loc, "both '" + image->name + "' and '" + filter->name +
                                             "' are read at sums of two indices; a conv's filter is read at plain indices" + hint);
    const Param* img = p_.param(image->name);
    if (!img->zero_outside) {
      const IndexExpr& ix = *sum_index(*image);
      src_.fail(ix.loc, "'" + image->name + "' is read at " + index_text(ix) +
                            ", which leaves its extents at the edges; say what it holds there: " + image->name + ": " +
                            type_name(img->type) + list_text(img->extents) + " outside 0");
    }
    for (const Param& prm : p_.inputs)
      if (prm.zero_outside && &prm != img)
        src_.fail(prm.loc, "'" + prm.name + "' is 'outside 0' but only the conv's image ('" + image->name +
                               "') is read outside its extents");
    epilogue(d, *img, *p_.param(filter->name));
    for (const Param& prm : p_.outputs)
      for (const std::string& e : prm.extents)
        if (extent_is_number(e))
          src_.fail(prm.loc, "'" + prm.name + "' has the fixed extent " + e + "; only a conv's inputs (its filter, its image) may have one");
    return "conv";
  }

  // After the conv's sum into an intermediate, one output definition: elementwise over the same
  // space, Y[n, k, h, w] = relu(acc[n, k, h, w] + b[k]), or a reduction over one of the sum's
  // indices of such an expression, Y[n, h, w] = min(acc[n, k, h, w] + b[k]) over k (the generator
  // takes it over the filters), or such a reduction into an intermediate that one elementwise
  // output definition reads alone. It reads the sum at the conv's indices and other inputs at
  // those indices or some of them (a per-filter bias b[k], a residual Z[n, k, h, w]).
  void epilogue(const Definition& conv, const Param& image, const Param& filter) const {
    const std::string hint = "; a conv's epilogue is one output definition such as Y[n, k, h, w] = relu(" + conv.name +
                             "[n, k, h, w] + b[k])";
    bool before = true;
    const Definition* epi = nullptr;
    const Definition* post = nullptr;  // after a reduction that is no output: the output's definition
    for (const Definition& other : p_.defs) {
      if (&other == &conv) {
        before = false;
        continue;
      }
      if (before)
        src_.fail(other.loc, "'" + other.name + "' comes before the conv '" + conv.name + "'; a conv prologue is" + kNoFamily);
      if (epi && epi->reduce != ReduceOp::none && !epi->is_output && !post) {
        post = &other;
        continue;
      }
      if (other.reduce != ReduceOp::none && !reduces_conv(other, conv))
        src_.fail(other.loc, "'" + other.name + "' is a reduction besides the conv '" + conv.name +
                                 "'; after a conv, a reduction is the output's definition over one of the conv's indices, "
                                 "as Y[n, h, w] = min(" + conv.name + "[n, k, h, w] + b[k]) over k");
      if (epi)
        src_.fail(other.loc, "'" + other.name + "' is a second definition after the conv '" + conv.name + "'" + hint);
      epi = &other;
    }
    if (!epi) return;
    if (post) {
      // m[n, h, w] = min(acc[n, k, h, w] + b[k]) over k, then Y[n, h, w] = tanh(m[n, h, w]): the
      // output's definition reads the reduction alone, at its own indices.
      const std::string what = "; after a conv's reduction '" + epi->name + "', the output's definition reads it alone, as Y[" +
                               join(epi->indices, ", ") + "] = tanh(" + epi->name + "[" + join(epi->indices, ", ") + "])";
      if (!post->is_output || post->reduce != ReduceOp::none)
        src_.fail(post->loc, "'" + post->name + "' must be the output's elementwise definition" + what);
      if (post->indices != epi->indices)
        src_.fail(post->loc, "'" + post->name + "' ranges over " + list_text(post->indices) + ", not the reduction's " +
                                 list_text(epi->indices) + what);
      for (const Expr* r : reads_of(post->body))
        if (r->name != epi->name || !reads_at(*r, epi->indices))
          src_.fail(r->loc, "'" + post->name + "' reads " + r->name + what);
    } else if (!epi->is_output) {
      src_.fail(epi->loc, "'" + epi->name + "' after the conv '" + conv.name + "' is an intermediate" + hint);
    }
    // The space the epilogue's expression ranges over: its own indices, or a reduction's with the
    // reduced index back in the conv's position.
    const std::vector<std::string> space = epi->reduce == ReduceOp::none ? epi->indices : conv_space(*epi, conv);
    if (epi->reduce == ReduceOp::none && epi->extents != conv.extents)
      src_.fail(epi->loc, "the conv epilogue keeps the output space " + list_text(conv.extents) + ", but '" + epi->name +
                              "' ranges over " + list_text(epi->extents));
    for (const Expr* r : reads_of(epi->body)) {
      if (r->name == image.name || r->name == filter.name)
        src_.fail(r->loc, "the conv epilogue reads the conv's " + std::string(r->name == image.name ? "image" : "filter") +
                              " '" + r->name + "'; it may read the sum '" + conv.name + "' and inputs other than the image and the "
                              "filter (pass a residual as an input of its own, Z[n, k, h, w])");
      if (r->name == conv.name && !reads_at(*r, space))
        src_.fail(r->loc, "the conv epilogue reads the sum '" + conv.name + "' at other indices than " + list_text(space));
      if (r->name != conv.name && !reads_broadcast(*r, space))
        src_.fail(r->loc, "the conv epilogue reads '" + r->name + "' at indices other than " + list_text(space) +
                              " or some of them in that order");
    }
  }

  // Whether `d` reduces over one index of the conv's space and keeps the others in their order:
  // Y[n, h, w] = min(acc[n, k, h, w] + b[k]) over k, the sum read at the conv's own indices.
  static bool reduces_conv(const Definition& d, const Definition& conv) {
    if (d.reduce != ReduceOp::sum && d.reduce != ReduceOp::max && d.reduce != ReduceOp::min && d.reduce != ReduceOp::mean)
      return false;
    if (!d.over_rest.empty() || d.indices.size() + 1 != conv.indices.size()) return false;
    for (const Expr* r : reads_of(d.body)) {
      if (r->name != conv.name) continue;
      if (r->indices.size() != conv.indices.size()) return false;
      std::vector<std::string> kept;
      bool reduced = false;
      for (const IndexExpr& ix : r->indices) {
        if (ix.offset != 0 || !ix.plus.empty()) return false;
        if (ix.var == d.over) {
          if (reduced) return false;
          reduced = true;
        } else {
          kept.push_back(ix.var);
        }
      }
      return reduced && kept == d.indices;
    }
    return false;
  }

  // A reduction epilogue's expression space: the indices it reads the sum at.
  static std::vector<std::string> conv_space(const Definition& d, const Definition& conv) {
    for (const Expr* r : reads_of(d.body))
      if (r->name == conv.name) {
        std::vector<std::string> v;
        for (const IndexExpr& ix : r->indices) v.push_back(ix.var);
        return v;
      }
    return d.indices;
  }

  std::string stencil(const std::vector<size_t>& reductions, const Expr& offset_read) const {
    if (!reductions.empty()) {
      const Definition& d = p_.defs[reductions.front()];
      src_.fail(d.loc, "'" + d.name + "' is a reduction in a stencil (an offset read at line " +
                           std::to_string(offset_read.loc.line) + "); a stencil with a reduction is" + kNoFamily);
    }
    return "stencil";
  }

  // sum(A[m, k] * B[k, n]) over k, with casts allowed around the reads, B also as B[n, k] and
  // a leading batch index on all three; both operands are inputs.
  bool is_gemm(const Definition& d) const {
    if (d.reduce != ReduceOp::sum || d.body.kind != Expr::Kind::binary || d.body.op != "*") return false;
    const Expr* a = strip_casts(d.body.args[0]);
    const Expr* b = strip_casts(d.body.args[1]);
    if (!a || !b || !is_input(a->name) || !is_input(b->name)) return false;
    size_t rank = d.indices.size();
    if (rank != 2 && rank != 3) return false;
    std::vector<std::string> batch(d.indices.begin(), d.indices.end() - 2);
    const std::string& m = d.indices[rank - 2];
    const std::string& n = d.indices[rank - 1];
    const std::string& k = d.over;
    auto with_batch = [&](std::vector<std::string> tail) {
      std::vector<std::string> v = batch;
      v.insert(v.end(), tail.begin(), tail.end());
      return v;
    };
    auto matches = [&](const Expr& x, const Expr& y) {
      return reads_at(x, with_batch({m, k})) && (reads_at(y, with_batch({k, n})) || reads_at(y, with_batch({n, k})));
    };
    return matches(*a, *b) || matches(*b, *a);
  }

  std::string gemm(size_t g, const std::vector<size_t>& reductions) const {
    const Definition& acc = p_.defs[g];
    for (size_t r : reductions)
      if (r != g)
        src_.fail(p_.defs[r].loc, "'" + p_.defs[r].name + "' is a reduction besides the gemm '" + acc.name +
                                      "'; a gemm combined with another reduction is" + kNoFamily);
    for (size_t i = 0; i < g; ++i)
      src_.fail(p_.defs[i].loc, "'" + p_.defs[i].name + "' comes before the gemm '" + acc.name +
                                    "'; a gemm prologue is" + kNoFamily);
    for (size_t i = g + 1; i < p_.defs.size(); ++i) {
      const Definition& d = p_.defs[i];
      if (d.extents != acc.extents)
        src_.fail(d.loc, "the gemm epilogue keeps the output space " + list_text(acc.extents) + ", but '" + d.name +
                             "' ranges over " + list_text(d.extents));
      for (const Expr* r : reads_of(d.body)) {
        if (!is_input(r->name) && !reads_at(*r, d.indices))
          src_.fail(r->loc, "the gemm epilogue reads the definition '" + r->name + "' at other indices than its own " +
                                list_text(d.indices));
        if (is_input(r->name) && !reads_broadcast(*r, d.indices))
          src_.fail(r->loc, "the gemm epilogue reads '" + r->name + "' at indices other than " + list_text(d.indices) +
                                " or a row or column of them");
      }
    }
    return "gemm";
  }

  // Whether some read of the body has the reduced index last: with another read that has it
  // first, the sum looks like a matrix product that is not written in the gemm's exact form.
  static bool reads_last(const Definition& d) {
    for (const Expr* x : reads_of(d.body))
      if (!x->indices.empty() && x->indices.back().var == d.over) return true;
    return false;
  }

  // One sum/mean/max/min over r keeping c, reading matrices at [r, c] and vectors at [r] or [c]:
  // a column reduction, which the rowwise family generates (src/codegen/colwise.cpp). With a
  // leading batch index b kept on the left, Y[b, c] reads its matrices at [b, r, c] (a reduction
  // over the middle dim of a 3-D tensor) and may read tensors at [b, c] too. One elementwise
  // definition may follow at the same index, reading only the reduction's value there (its epilogue).
  bool column_reduction() const {
    if (p_.defs.empty() || p_.defs.size() > 2) return false;
    const Definition& d = p_.defs.front();
    if (p_.defs.size() == 2) {
      const Definition& e = p_.defs.back();
      if (e.reduce != ReduceOp::none || e.indices != d.indices || d.is_output) return false;
      for (const Expr* x : reads_of(e.body)) {
        if (x->name != d.name || x->indices.size() != d.indices.size()) return false;
        for (size_t i = 0; i < x->indices.size(); ++i)
          if (x->indices[i].var != d.indices[i] || x->indices[i].offset != 0 || !x->indices[i].plus.empty()) return false;
      }
    }
    if ((d.indices.size() != 1 && d.indices.size() != 2) ||
        (d.reduce != ReduceOp::sum && d.reduce != ReduceOp::mean && d.reduce != ReduceOp::max && d.reduce != ReduceOp::min))
      return false;
    const bool batched = d.indices.size() == 2;
    const std::string& c = d.indices.back();
    bool matrix = false;
    for (const Expr* x : reads_of(d.body)) {
      if (!is_input(x->name)) return false;
      for (const IndexExpr& ix : x->indices)
        if (ix.offset != 0 || !ix.plus.empty()) return false;
      const auto& v = x->indices;
      bool at_rc = batched ? v.size() == 3 && v[0].var == d.indices[0] && v[1].var == d.over && v[2].var == c
                           : v.size() == 2 && v[0].var == d.over && v[1].var == c;
      bool vec = v.size() == 1 && (v[0].var == d.over || v[0].var == c);
      bool at_bc = batched && v.size() == 2 && v[0].var == d.indices[0] && v[1].var == c;  // the output's own indices
      if (!at_rc && !vec && !at_bc) return false;
      matrix = matrix || at_rc;
    }
    return matrix;
  }

  std::string rowwise(const std::vector<size_t>& reductions) const {
    if (column_reduction()) return "rowwise";
    std::vector<std::string> rows;
    std::string cols;
    const Definition* first = nullptr;
    for (size_t r : reductions) {
      const Definition& d = p_.defs[r];
      for (const Expr* x : reads_of(d.body)) {
        for (size_t pos = 0; pos < x->indices.size(); ++pos) {
          if (x->indices[pos].var != d.over || pos + 1 == x->indices.size()) continue;
          std::string which = pos == 0 ? "the first index" : "index " + std::to_string(pos + 1);
          std::string kind = std::string(pos == 0 ? "a reduction over the first index" : "a reduction over an index other than the last") +
                             ", but for a column reduction (one definition, Y[c] = sum(X[r, c]) over r or Y[b, c] = "
                             "sum(X[b, r, c]) over r, and at most an elementwise one of Y alone after it),";
          std::string hint;
          if (d.reduce == ReduceOp::sum && reads_last(d))
            hint = " (a gemm is exactly sum(A[m, k] * B[k, n]) over k, casts and tf32() allowed; scale it in a following "
                   "definition)";
          src_.fail(x->indices[pos].loc, "'" + d.name + "' reduces over '" + d.over + "', " + which + " of '" + x->name +
                                             "'; " + kind + " is" + kNoFamily + hint);
        }
      }
      std::vector<std::string> these = d.extents;
      if (d.reduce == ReduceOp::scan) {
        if (d.indices.back() != d.over)
          src_.fail(d.loc, "the scan '" + d.name + "' must keep its index '" + d.over + "' last on the left-hand side");
        these.pop_back();
      }
      if (!first) {
        first = &d;
        rows = these;
        cols = d.over_extent;
        continue;
      }
      if (these != rows || d.over_extent != cols)
        src_.fail(d.loc, "'" + d.name + "' reduces rows " + list_text(these) + " over " + d.over_extent + " but '" +
                             first->name + "' reduces rows " + list_text(rows) + " over " + cols +
                             "; row-wise reductions over different spaces are" + kNoFamily);
    }
    std::vector<std::string> full = rows;
    full.push_back(cols);
    for (const Definition& d : p_.defs) {
      if (d.reduce != ReduceOp::none || d.extents == rows || d.extents == full) continue;
      src_.fail(d.loc, "'" + d.name + "' ranges over " + list_text(d.extents) + ", neither the rows " + list_text(rows) +
                           " nor the rows and columns " + list_text(full) + " of the row-wise reductions; such a mix is" +
                           kNoFamily);
    }
    return "rowwise";
  }
};

}  // namespace

std::string recognise_family(const Source& src, const Parsed& parsed) { return Recogniser(src, parsed).run(); }

}  // namespace ksol::dsl::detail
