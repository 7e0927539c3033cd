// ksol import kernelbench: runs the PyTorch front end (python -m ksol_torch import) on problem
// files and reports what it found: the op graph's FLOPs and bytes (for SOL), the pieces the DSL
// can express, and whether the problem is degenerate.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "core/util.h"

namespace fs = std::filesystem;
using nlohmann::json;

namespace ksol::cli {
namespace {

struct ImportArgs {
  std::vector<std::string> files;
  std::string out_dir;
  bool no_screen = false;
  double screen_max_gflop = 20;
  int seed = 0;
  double timeout = 600;
};

int run_import(const ImportArgs& a, bool json_out) {
  for (auto& f : a.files)
    if (!fs::exists(f)) throw UsageError(f + ": no such file");
  std::string why;
  std::string py = find_torch_python(&why);
  if (py.empty()) {
    std::cerr << "error: " << why << "\n";
    return exit_status::error;
  }
  // A private folder for the answer (mkdtemp: nobody else can plant a link there).
  std::string tmpl = (fs::temp_directory_path() / "ksol-import-XXXXXX").string();
  if (!::mkdtemp(tmpl.data())) throw std::runtime_error("cannot create a temporary folder under " + fs::temp_directory_path().string());
  fs::path tmpdir = tmpl, tmp = tmpdir / "problems.json";
  struct Cleanup {
    fs::path d;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(d, ec);
    }
  } cleanup{tmpdir};
  std::string pypath = ksol_python_path();
  std::vector<std::string> argv = {"env", "PYTHONPATH=" + pypath, py, "-m", "ksol_torch", "import",
                                   "--json-out", tmp.string(), "--seed", std::to_string(a.seed),
                                   "--screen-max-gflop", fixed(a.screen_max_gflop, 3)};
  if (a.no_screen) argv.push_back("--no-screen");
  argv.push_back("--");
  for (auto& f : a.files) argv.push_back(f);  // as given: errors then name the file as the user wrote it
  std::cerr << "importing " << a.files.size() << " problem file(s) with " << py << " ...\n";
  ProcessResult r = run_process(argv, a.timeout);
  if (r.timed_out || !fs::exists(tmp)) {
    std::cerr << "error: the PyTorch front end " << (r.timed_out ? "timed out" : "failed") << ":\n" << r.output << "\n";
    return exit_status::error;
  }
  json res = json::parse(read_file(tmp.string()));
  if (!a.out_dir.empty()) fs::create_directories(a.out_dir);
  int bad = 0;
  if (json_out) std::cout << res.dump(2) << "\n";
  std::vector<std::vector<std::string>> rows;
  for (auto& p : res) {
    if (!p.value("ok", false)) {
      ++bad;
      std::cerr << p.value("error", "unknown error") << "\n";
      continue;
    }
    if (!a.out_dir.empty()) write_file_atomic(a.out_dir + "/" + p["problem"].get<std::string>() + ".json", p.dump(1) + "\n");
    std::string ins;
    for (auto& t : p["inputs"]) {
      std::string s;
      for (auto& d : t["shape"]) s += (s.empty() ? "" : "x") + std::to_string(d.get<int64_t>());
      ins += (ins.empty() ? "" : ", ") + (s.empty() ? "scalar" : s) + " " + t["dtype"].get<std::string>();
    }
    std::string pieces;
    int dsl = 0, n = 0;
    for (auto& q : p["pieces"]) {
      if (q["family"] == "view") continue;
      // Weight preparation (a fold on the parameters alone) is listed, not counted as a piece.
      const bool weights = q["family"] == "weights";
      n += !weights;
      dsl += !weights && q["dsl"].get<bool>();
      std::string ops;
      for (auto& o : q["ops"]) ops += (ops.empty() ? "" : "+") + o.get<std::string>();
      pieces += (pieces.empty() ? "" : " | ") + q["family"].get<std::string>() + ":" + ops +
                (q["dsl"].get<bool>() || weights ? "" : "(kept)");
    }
    // The vendor-call plan ksol optimize tries beside this one: its vendor calls, then its pieces.
    std::string vendor = "-";
    if (p.contains("vendor_plan") && p["vendor_plan"].is_object()) {
      std::vector<std::string> v;
      for (auto& o : p["vendor_plan"]["vendor"]) v.push_back(o.get<std::string>());
      vendor = join(v, "+") + "(vendor)";
      for (auto& q : p["vendor_plan"]["pieces"]) {
        std::vector<std::string> ops;
        for (auto& o : q["ops"]) ops.push_back(o.get<std::string>());
        vendor += " | " + q["family"].get<std::string>() + ":" + join(ops, "+");
      }
    }
    double fl = p["flops"].get<double>(), by = p["bytes"].get<double>();
    rows.push_back({p["problem"], ins, p["traced"].get<bool>() ? sig(fl / 1e9) : "-", sig(by / 1e6),
                    p["traced"].get<bool>() && by > 0 ? fixed(fl / by, 2) : "-", std::to_string(dsl) + "/" + std::to_string(n),
                    p["screen"]["verdict"], pieces, vendor});
    if (!p["traced"].get<bool>()) rows.back()[7] = "not traced: " + p["trace_reason"].get<std::string>().substr(0, 80);
  }
  if (!json_out) {
    rows.insert(rows.begin(), {"problem", "inputs", "GFLOP", "MB", "FLOP/B", "DSL pieces", "screen", "pieces (kept: stays a PyTorch/vendor call)",
                               "vendor-call plan (tried beside it)"});
    print_columns(std::cout, rows);
    std::cout << "MB = compulsory bytes (inputs, parameters, outputs once each); screen: ok, or why the problem is degenerate"
                 " (reported apart), or why it was skipped; weights: a rewrite's preparation of the parameters alone (a pool"
                 " or a reduction folded into a filter, a transposed conv's filter flipped), not a piece; vendor-call plan:"
                 " the plan `ksol optimize --plan auto` also tries, its convolutions and GEMMs cuDNN's and cuBLAS's calls"
                 " (vendor) and the ops around them pieces (-: none to try).\n";
    if (!a.out_dir.empty()) std::cout << "problem cards written to " << a.out_dir << "/\n";
  }
  return bad ? exit_status::error : exit_status::ok;
}

}  // namespace

void print_columns(std::ostream& out, const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> w;
  for (auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) {
      if (w.size() <= i) w.push_back(0);
      w[i] = std::max(w[i], r[i].size());
    }
  auto line = [&](const std::vector<std::string>& r) {
    for (size_t i = 0; i < r.size(); ++i) out << (i ? "  " : "") << r[i] << (i + 1 < r.size() ? std::string(w[i] - r[i].size(), ' ') : "");
    out << "\n";
  };
  for (size_t k = 0; k < rows.size(); ++k) {
    line(rows[k]);
    if (k == 0) {
      std::vector<std::string> dash;
      for (size_t x : w) dash.push_back(std::string(x, '-'));
      line(dash);
    }
  }
}

void add_import_command(CLI::App& app, const bool& json_out) {
  auto* imp = app.add_subcommand("import", "bring problems from other formats into ksol");
  auto* kb = imp->add_subcommand("kernelbench", "trace, cost, lower and screen KernelBench-format PyTorch problems (docs/TORCH.md)");
  auto a = std::make_shared<ImportArgs>();
  kb->add_option("files", a->files, "problem files (Model, get_inputs, get_init_inputs)")->required();
  kb->add_option("--out", a->out_dir, "write one JSON problem card per problem into this folder");
  kb->add_flag("--no-screen", a->no_screen, "skip the float64 screening for degenerate outputs");
  kb->add_option("--screen-max-gflop", a->screen_max_gflop, "skip screening on the CPU above this many GFLOP (all draws)")
      ->capture_default_str()
      ->check(non_negative_number());
  kb->add_option("--seed", a->seed, "seed for the module's parameters and the example inputs")->capture_default_str()->check(non_negative_integer());
  kb->add_option("--timeout", a->timeout, "seconds for the whole import")->capture_default_str()->check(positive_number());
  imp->require_subcommand(1);
  kb->callback([a, &json_out]() { finish_command("import kernelbench", [&] { return run_import(*a, json_out); }); });
}

}  // namespace ksol::cli
