"""ksol's ABI as a PyTorch operator (python/ksol_torch/abi_op.py, csrc/abi_op.cpp): the extension
built with torch.utils.cpp_extension; ksol::bind and ksol::run on host libraries built to the C
ABI (the CPU's stand-ins for a run's CUDA kernels, as in test_load.py); each argument check's
message; the ctypes fallback and how it is reported; the returned module's call path. What needs
a GPU (CUDA tensors, PyTorch's current stream) skips without one, saying so.

The cases where the op raises from C++ run in a child process each (in_child_process): a crash
there, where an exception was due, fails that case alone, with the child's stderr and native
backtrace, and the other cases still run and report."""
import ctypes
import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import unittest
import warnings

import ksol
from fixtures import HERE, ROOT, TempDir, build_library, item_one_program, item_stitched, needs_cc, needs_torch, torch, write_run
from ksol.serialize import write_problem

if torch is not None:
    from ksol_torch import abi, abi_op

    class LinearReLU(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(32, 16)

        def forward(self, x):
            return torch.relu(self.fc(x))

    class CumsumReLUScale(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = torch.nn.Parameter(torch.randn(16))

        def forward(self, x):
            return torch.relu(torch.cumsum(x, dim=0)) * self.scale  # over the rows: kept as a PyTorch call

    class Softsign(torch.nn.Module):
        def forward(self, x):
            return x / (1 + torch.abs(x))

    F32 = torch.float32
    # linear_relu.c's table at M, N, K = 8, 16, 32: input0, w_net_weight, w_net_bias, output0.
    LINEAR_TABLE = [((8, 32), F32), ((16, 32), F32), ((16,), F32), ((8, 16), F32)]
    LINEAR_NAMES = ["input0", "w_net_weight", "w_net_bias", "output0"]


def op_status():
    return abi_op.status() if torch is not None else None


def skip_without_op(test):
    st = op_status()
    if not st.ok:
        test.skipTest(f"ksol's torch op is not built here: {st.reason}")


def first_line(e) -> str:
    return str(e).split("\n")[0]


CHILD_ENV = "KSOL_TEST_IN_CHILD_PROCESS"
MODULE = os.path.splitext(os.path.basename(__file__))[0]


def child_command(case):
    return [sys.executable, "-X", "faulthandler", "-m", "unittest", "-v", f"{MODULE}.{type(case).__name__}.{case._testMethodName}"]


def run_in_child(case):
    """`case` (a TestCase instance) run by `python -m unittest` in a fresh interpreter: its
    CompletedProcess, and, where the child died of a signal and gdb is installed, gdb's native
    backtrace of a second run (else "")."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (HERE, os.path.join(ROOT, "python"),
                                                                   os.environ.get("PYTHONPATH")) if p))
    env[CHILD_ENV] = "1"
    cmd = child_command(case)
    r = subprocess.run(cmd, cwd=HERE, env=env, capture_output=True, text=True, timeout=600)
    native = ""
    if r.returncode < 0 and shutil.which("gdb"):
        g = subprocess.run(["gdb", "-nx", "-batch", "-ex", "run", "-ex", "bt 40", "--args", *cmd], cwd=HERE, env=env,
                           capture_output=True, text=True, timeout=600)
        native = "\n".join(line for line in (g.stdout + g.stderr).splitlines() if re.match(r"#\d|.* received signal ", line))
    return r, native


def in_child_process(test):
    """The test, run in a child process (run_in_child) rather than in this one: its failure or
    skip is this case's, and a crash fails this case with what the child printed."""
    @functools.wraps(test)
    def wrapper(self):
        if os.environ.get(CHILD_ENV):
            return test(self)
        r, native = run_in_child(self)
        skipped = re.search(r"\.\.\. skipped '(.*)'", r.stderr)
        if r.returncode == 0 and skipped:
            self.skipTest(skipped.group(1))
        how = f"died of signal {-r.returncode}" if r.returncode < 0 else f"exited with {r.returncode}"
        self.assertEqual(r.returncode, 0, f"the case, run in a child process, {how}:\n{r.stderr[-6000:]}"
                                          + (f"\ngdb's backtrace of a second run:\n{native}" if native else ""))
    return wrapper


@needs_torch
class Build(TempDir):
    def test_the_extension_builds_and_registers_its_ops(self):
        from torch.utils import cpp_extension

        if not cpp_extension.is_ninja_available() or shutil.which(abi_op.compiler()) is None:
            self.skipTest("building a torch extension needs ninja and a C++ compiler")
        st = abi_op.status()
        self.assertTrue(st.ok, st.reason)
        self.assertEqual(bool(torch.ops.ksol.built_with_cuda()), st.with_cuda)
        self.assertEqual(os.path.dirname(st.build_dir), os.path.join(abi_op.cache_dir(), "torch_ext"))
        self.assertTrue(os.path.isfile(os.path.join(st.build_dir, abi_op.NAME + ".so")))
        if torch.version.cuda is None:
            self.assertEqual(st.cuda_reason, f"PyTorch {torch.__version__} is built without CUDA")

    def test_the_build_from_the_tree_checks_the_struct_against_abi_h(self):
        cflags, includes, _ = abi_op.build_flags(False)
        self.assertIn("-DKSOL_OP_ABI_HEADER", cflags)
        self.assertEqual(includes, [os.path.join(ROOT, "include")])

    def test_one_build_folder_per_pytorch_cuda_and_python(self):
        py = f"py{sys.version_info[0]}{sys.version_info[1]}"
        got = abi_op.build_dir(False, env={"KSOL_CACHE_DIR": "/c"})
        self.assertEqual(got, os.path.join("/c/torch_ext", f"torch{torch.__version__}-cpu-{py}".replace("/", "_")))
        self.assertTrue(abi_op.build_dir(True, env={"XDG_CACHE_HOME": "/x"}).startswith("/x/ksol/torch_ext/torch"))
        self.assertIn("-cuda", abi_op.build_dir(True, env={"XDG_CACHE_HOME": "/x"}))

    def test_without_ninja_one_compiler_command_builds_it(self):
        """A fresh process whose cpp_extension finds no ninja, with an empty cache: the extension
        is built by one compiler command with cpp_extension's paths, loaded, and runs a library."""
        if shutil.which(abi_op.compiler()) is None:
            self.skipTest("needs a C++ compiler")
        so = build_library("relu_scale_piece.c", self.path("piece.so")) if shutil.which("cc") else None
        code = ("import torch\nfrom torch.utils import cpp_extension\ncpp_extension.is_ninja_available = lambda: False\n"
                "from ksol_torch import abi_op\nst = abi_op.status()\nprint('status', st.ok, st.builder, st.reason)\n")
        if so:
            code += (f"k = abi_op.OpKernel({so!r}, [((2, 3), torch.float32), ((3,), torch.float32), ((2, 3), torch.float32)], 1, "
                     "[2, 3], 'cpu', 'piece 0')\nprint('out', k([torch.ones(2, 3), torch.full((3,), 2.0)])[0].sum().item())\n")
        env = dict(os.environ, KSOL_CACHE_DIR=self.path("cache"), PYTHONPATH=os.path.join(ROOT, "python"))
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("status True compiler ", r.stdout)
        if so:
            self.assertIn("out 12.0", r.stdout)
        built = os.listdir(abi_op.build_dir(torch.version.cuda is not None and bool(abi_op.cuda_include_dirs()),
                                            env={"KSOL_CACHE_DIR": self.path("cache")}))
        self.assertEqual([f for f in built if f.endswith(".so")], [f for f in built if f.startswith(abi_op.NAME + "-")])

    def test_the_cuda_part_compiles_against_this_pytorchs_headers(self):
        """The part built only for a PyTorch with CUDA, compiled (not linked) here against this
        PyTorch's c10/cuda headers and the CUDA toolkit's cuda_runtime_api.h."""
        from torch.utils import cpp_extension

        if torch.version.cuda is not None:
            self.skipTest("this PyTorch has CUDA: the extension's own build compiles the part")
        cuda = abi_op.cuda_include_dirs()
        incs = cpp_extension.include_paths()
        if not cuda:
            self.skipTest("no cuda_runtime_api.h (a CUDA toolkit) on this machine")
        if not any(os.path.isfile(os.path.join(d, "c10", "cuda", "CUDAStream.h")) for d in incs):
            self.skipTest("this PyTorch ships no c10/cuda headers")
        # A PyTorch built without CUDA lacks c10/cuda's generated macro header; a stand-in says
        # what a CUDA build's says (c10_cuda is a shared library).
        if not any(os.path.isfile(os.path.join(d, "c10", "cuda", "impl", "cuda_cmake_macros.h")) for d in incs):
            self.write("stub/c10/cuda/impl/cuda_cmake_macros.h", "#define C10_CUDA_BUILD_SHARED_LIBS\n")
            incs = incs + [self.path("stub")]
        cflags, includes, _ = abi_op.build_flags(True)
        cmd = [abi_op.compiler(), "-fsyntax-only", f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}"]
        cmd += [f for f in cflags if f.startswith("-D")] + [f"-I{d}" for d in includes] + [a for d in incs for a in ("-isystem", d)]
        r = subprocess.run(cmd + [abi_op.SOURCE], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])


@needs_torch
@needs_cc
class OpCalls(TempDir):
    def setUp(self):
        super().setUp()
        skip_without_op(self)
        self.so = build_library("linear_relu.c", self.path("best.so"))
        torch.manual_seed(0)
        self.net = LinearReLU().eval()
        self.args = [torch.randn(8, 32), self.net.fc.weight.detach(), self.net.fc.bias.detach()]

    def kernel(self, dims=(8, 16, 32), so=None, table=None, device="cpu"):
        return abi_op.OpKernel(so or self.so, table or LINEAR_TABLE, 1, dims, device, "best.so", LINEAR_NAMES)

    def test_runs_the_library_on_the_table(self):
        k = self.kernel()
        self.assertEqual(k.call_path, "torch-op")
        (y,) = k(self.args)
        with torch.no_grad():
            want = self.net(self.args[0])
        self.assertEqual((tuple(y.shape), y.dtype), ((8, 16), F32))
        self.assertTrue(torch.allclose(y, want, rtol=1e-5, atol=1e-6))
        # A non-contiguous input is copied first, as abi.py's ctypes path does.
        x_t = self.args[0].t().contiguous().t()
        self.assertFalse(x_t.is_contiguous())
        self.assertTrue(torch.equal(k([x_t] + self.args[1:])[0], y))
        # Meta tensors (what torch.compile traces with) give the outputs' shapes, running nothing.
        (m,) = k([a.to("meta") for a in self.args])
        self.assertEqual((m.device.type, tuple(m.shape), m.dtype), ("meta", (8, 16), F32))

    @in_child_process
    def test_each_argument_is_checked_against_the_verified_table(self):
        k = self.kernel()
        x, w, b = self.args
        cases = [
            ([x, w], "best.so: ksol::run takes the 3 input tensors the library was verified with, got 2"),
            ([x.double(), w, b], "best.so: tensor 0 'input0' is float64; the library was verified with float32"),
            ([x, w, b.half()], "best.so: tensor 2 'w_net_bias' is float16; the library was verified with float32"),
            ([torch.randn(4, 32), w, b], "best.so: tensor 0 'input0' has shape [4, 32]; the library was verified with [8, 32]"),
            ([x, w.reshape(32, 16), b], "best.so: tensor 1 'w_net_weight' has shape [32, 16]; the library was verified with [16, 32]"),
        ]
        for args, msg in cases:
            with self.subTest(msg=msg):
                # OpKernel raises ksol::check's answer from Python; ksol::run itself, called
                # directly, raises the same from C++.
                self.assertEqual(torch.ops.ksol.check(k.handle, args), msg)
                with self.assertRaises(RuntimeError) as c:
                    k(args)
                self.assertEqual(first_line(c.exception), msg)
                with self.assertRaises(RuntimeError) as c:
                    torch.ops.ksol.run(k.handle, args)
                self.assertEqual(first_line(c.exception), msg)
        self.assertEqual(torch.ops.ksol.check(k.handle, [x, w, b]), "")
        self.assertEqual(torch.ops.ksol.check(k.handle, [a.to("meta") for a in (x, w, b)]), "")
        with self.assertRaises(RuntimeError) as c:
            torch.ops.ksol.run(1 << 40, [x])
        self.assertEqual(first_line(c.exception), f"ksol::run: no library is bound as {1 << 40} (ksol::bind returns the number to pass)")

    @in_child_process
    def test_a_failing_status_raises(self):
        k = self.kernel(dims=(8, 16))  # linear_relu.c wants three dims: it returns 1
        with self.assertRaises(RuntimeError) as c:
            k(self.args)
        self.assertEqual(first_line(c.exception), f"best.so: ksol_run returned 1 ({os.path.abspath(self.so)})")

    @in_child_process
    def test_libraries_that_cannot_be_bound(self):
        missing = self.path("none.so")
        with self.assertRaises(OSError) as c:
            self.kernel(so=missing)
        self.assertTrue(first_line(c.exception).startswith(f"ksol::bind: best.so: cannot load {missing}: "), str(c.exception))
        other = build_library("linear_relu.c", self.path("other.so"), "-Dksol_run=other_entry")
        with self.assertRaises(OSError) as c:
            self.kernel(so=other)
        self.assertIn(f"ksol::bind: best.so: {other} exports no ksol_run (", first_line(c.exception))
        with self.assertRaises(RuntimeError) as c:
            torch.ops.ksol.bind(self.so, "best.so", ["input0"], [torch.empty(8, 32, device="meta")] * 2, 1, [8], torch.device("cpu"))
        self.assertEqual(first_line(c.exception), "ksol::bind: best.so: 1 names for 2 tensors")

    @in_child_process
    def test_a_build_without_cuda_refuses_cuda_libraries(self):
        if op_status().with_cuda:
            self.skipTest("this build of the op has CUDA")
        with self.assertRaises(OSError) as c:
            self.kernel(device="cuda")
        self.assertIn("ksol::bind: best.so: this build of ksol's torch op has no CUDA (PyTorch without CUDA, or no "
                      "cuda_runtime_api.h when it was built), so it cannot call a CUDA library on PyTorch's stream",
                      first_line(c.exception))


class ChildProcess(unittest.TestCase):
    def segfault(self):
        """Not a case of its own: what test_a_crash_in_the_child_fails_its_case_alone runs."""
        ctypes.string_at(0)

    def test_a_crash_in_the_child_fails_its_case_alone(self):
        r, native = run_in_child(ChildProcess("segfault"))
        self.assertEqual(r.returncode, -signal.SIGSEGV, r.stderr[-3000:])
        self.assertIn("Fatal Python error: Segmentation fault", r.stderr)
        self.assertIn("in segfault", r.stderr)  # faulthandler's Python traceback
        if shutil.which("gdb"):
            self.assertIn("received signal SIGSEGV", native)


@needs_torch
@needs_cc
class CallPath(TempDir):
    def setUp(self):
        super().setUp()
        self.so = build_library("linear_relu.c", self.path("best.so"))
        saved = (abi_op._status, set(abi._fallbacks_warned))

        def restore():
            abi_op._status = saved[0]
            abi._fallbacks_warned.clear()
            abi._fallbacks_warned.update(saved[1])

        self.addCleanup(restore)

    def open(self, call_path, device="cpu"):
        return abi.open_kernel(self.so, LINEAR_TABLE, 1, [8, 16, 32], device, "best.so", LINEAR_NAMES, call_path=call_path)

    def test_auto_takes_the_op_and_ctypes_is_taken_on_request(self):
        skip_without_op(self)
        self.assertIsInstance(self.open("auto"), abi_op.OpKernel)
        k = self.open("ctypes")
        self.assertIsInstance(k, abi.CtypesKernel)
        x = torch.randn(8, 32)
        w, b = torch.randn(16, 32), torch.randn(16)
        self.assertTrue(torch.equal(k([x, w, b])[0], self.open("torch-op")([x, w, b])[0]))
        with self.assertRaises(ValueError) as c:
            self.open("cffi")
        self.assertEqual(str(c.exception), "call_path is one of auto, torch-op, ctypes, not 'cffi'")

    def test_without_the_op_auto_falls_back_to_ctypes_and_says_why_once(self):
        abi_op._status = abi_op.Status(False, "no C++ compiler (a test)")
        abi._fallbacks_warned.clear()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIsInstance(self.open("auto"), abi.CtypesKernel)
            self.assertIsInstance(self.open("auto"), abi.CtypesKernel)
        self.assertEqual([str(x.message) for x in w],
                         ["ksol: calling the verified kernels through ctypes, not ksol's torch op: no C++ compiler (a test)"])
        self.assertEqual(w[0].category, RuntimeWarning)
        with self.assertRaises(RuntimeError) as c:
            self.open("torch-op")
        self.assertEqual(str(c.exception), "ksol's torch op cannot call best.so: no C++ compiler (a test)")

    def test_a_cuda_library_needs_the_ops_cuda_build(self):
        abi_op._status = abi_op.Status(True, with_cuda=False, cuda_reason="PyTorch 0.0 is built without CUDA", build_dir="/b")
        abi._fallbacks_warned.clear()
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            self.assertIsInstance(self.open("auto", device="cuda"), abi.CtypesKernel)
        self.assertEqual(str(w[0].message), "ksol: calling the verified kernels through ctypes, not ksol's torch op: its build in /b "
                                            "has no CUDA: PyTorch 0.0 is built without CUDA")


@needs_torch
@needs_cc
class ModuleCallPath(TempDir):
    def one_program_run(self):
        torch.manual_seed(0)
        self.net = LinearReLU().eval()
        files = write_problem(self.net, [torch.randn(8, 32)], self.path("run"), "LinearReLU")
        write_run(self.path("run"), files.path, item_one_program(), emulated=True)
        os.makedirs(self.path("run", "lib"))
        build_library("linear_relu.c", self.path("run", "lib", "best.so"))
        return self.path("run")

    def test_one_program_through_each_path(self):
        skip_without_op(self)
        run = self.one_program_run()
        x = torch.randn(8, 32)
        outs = {}
        for path in ("torch-op", "ctypes"):
            m = ksol.load(run, call_path=path)
            self.assertEqual(m.ksol_call_path, path)
            self.assertEqual(len(m.ksol_verification["cases"]), 9)
            outs[path] = m(x)
        self.assertEqual(ksol.load(run, verify=False).ksol_call_path, "torch-op")
        self.assertTrue(torch.equal(outs["torch-op"], outs["ctypes"]))
        with torch.no_grad():
            self.assertTrue(torch.allclose(outs["ctypes"], self.net(x), rtol=1e-5, atol=1e-6))
        with self.assertRaises(ValueError):
            ksol.load(run, call_path="cuda")

    @in_child_process
    def test_the_op_catches_parameters_that_are_not_the_verified_ones(self):
        skip_without_op(self)
        m = ksol.load(self.one_program_run(), verify=False)
        m.model.double()  # the module's parameters in float64, the inputs still the run's float32
        with self.assertRaises(RuntimeError) as c:
            m(torch.randn(8, 32))
        self.assertEqual(first_line(c.exception), "best.so: tensor 1 'w_net_fc_weight' is float64; the library was verified with float32")

    def test_a_stitched_module_calls_its_pieces_through_the_op(self):
        skip_without_op(self)
        torch.manual_seed(0)
        net = CumsumReLUScale().eval()
        files = write_problem(net, [torch.randn(8, 16)], self.path("run"), "CumsumReLUScale")
        piece = {"nodes": ["relu", "mul"], "so": build_library("relu_scale_piece.c", self.path("piece.so")), "dims": [8, 16],
                 "family": "elementwise", "kernel": "elementwise_model_f32_t256_v1_i1", "program": "..."}
        write_run(self.path("run"), files.path, item_stitched([piece]), emulated=True)
        m = ksol.load(self.path("run"))
        self.assertEqual(m.ksol_call_path, "torch-op")
        x = torch.randn(8, 16)
        with torch.no_grad():
            self.assertTrue(torch.allclose(m(x), net(x), rtol=1e-6, atol=0))
        self.assertEqual(ksol.load(self.path("run"), call_path="ctypes").ksol_call_path, "ctypes")

    def test_a_failed_build_falls_back_to_ctypes_with_a_warning(self):
        """A fresh process whose C++ compiler fails (KSOL_TORCH_CXX=false) and whose cache is empty: the
        module comes back through ctypes, verified, and a warning says why."""
        run = self.one_program_run()
        env = dict(os.environ, KSOL_TORCH_CXX="false", KSOL_CACHE_DIR=self.path("cache"), PYTHONPATH=os.path.join(ROOT, "python"))
        code = ("import warnings, ksol, torch\nwarnings.simplefilter('always')\n"
                f"m = ksol.load({run!r})\nprint('path', m.ksol_call_path, m(torch.randn(8, 32)).shape)\n")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stderr[-3000:])
        self.assertIn("path ctypes torch.Size([8, 16])", r.stdout)
        self.assertIn("RuntimeWarning: ksol: calling the verified kernels through ctypes, not ksol's torch op: building "
                      f"{abi_op.SOURCE} in {self.path('cache', 'torch_ext')}", r.stderr)
        self.assertEqual(r.stderr.count("calling the verified kernels through ctypes"), 1, r.stderr)


def gpu_skip_reason():
    if torch is None or not torch.cuda.is_available():
        return "needs a CUDA device visible to PyTorch"
    if shutil.which("nvcc") is None:
        return "needs nvcc for the test's CUDA library"
    st = abi_op.status()
    if not st.ok:
        return f"ksol's torch op is not built here: {st.reason}"
    if not st.with_cuda:
        return f"ksol's torch op is built without CUDA: {st.cuda_reason}"
    return ""


class OnTheGPU(TempDir):
    """softsign_stream.cu, a CUDA library to the ABI, through ksol::run on CUDA tensors."""

    def setUp(self):
        super().setUp()
        why = gpu_skip_reason()
        if why:
            self.skipTest(why)
        major, minor = torch.cuda.get_device_capability()
        self.so = self.path("softsign.so")
        subprocess.run(["nvcc", "-O2", "-shared", "-Xcompiler", "-fPIC", f"-arch=sm_{major}{minor}", "-I", os.path.join(ROOT, "include"),
                        os.path.join(HERE, "libs", "softsign_stream.cu"), "-o", self.so], check=True)
        self.table = [((16, 1024), torch.float32), ((16, 1024), torch.float32)]

    def kernel(self, call_path="torch-op"):
        return abi.open_kernel(self.so, self.table, 1, [16, 1024], "cuda", "softsign.so", ["input0", "output0"], call_path=call_path)

    def test_the_kernel_runs_on_pytorchs_current_stream(self):
        k = self.kernel()
        last = ctypes.CDLL(self.so).ksol_test_last_stream
        last.restype = ctypes.c_void_p
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            # A long kernel first on s: were the library's work not queued on s after it, it
            # would read the input before the fill below.
            torch.cuda._sleep(200_000_000)
            x = torch.empty(16, 1024, device="cuda").fill_(3.0)
            (y,) = k([x])
            self.assertEqual(last() or 0, s.cuda_stream)
        s.synchronize()
        self.assertTrue(torch.equal(y, torch.full_like(y, 0.75)))
        (y,) = k([x])
        self.assertEqual(last() or 0, torch.cuda.current_stream().cuda_stream)

    @in_child_process
    def test_host_tensors_are_refused(self):
        with self.assertRaises(RuntimeError) as c:
            self.kernel()([torch.randn(16, 1024)])
        self.assertEqual(first_line(c.exception), "softsign.so: the library runs on cuda tensors; tensor 0 'input0' is on cpu "
                                                  "(move the module and its inputs there)")

    def test_a_cuda_run_loads_through_both_paths(self):
        files = write_problem(Softsign(), [torch.randn(16, 1024)], self.path("run"), "Softsign")
        write_run(self.path("run"), files.path, item_one_program())
        os.makedirs(self.path("run", "lib"))
        shutil.copy(self.so, self.path("run", "lib", "best.so"))
        x = torch.randn(16, 1024, device="cuda")
        outs = {}
        for path in ("torch-op", "ctypes"):
            m = ksol.load(self.path("run"), call_path=path)
            self.assertEqual(m.ksol_call_path, path)
            outs[path] = m(x)
        self.assertTrue(torch.equal(outs["torch-op"], outs["ctypes"]))
        self.assertTrue(torch.allclose(outs["torch-op"], x / (1 + x.abs())))


@needs_torch
class ForeignCompiler(unittest.TestCase):
    def test_a_cxx_with_its_own_runtime_does_not_build_the_op(self):
        """$CXX names a compiler that links its own C++ runtime statically (a g++ wrapper adding
        -static-libstdc++, as a compiler under /opt may): the operator is built with c++ anyway,
        so its messages print their numbers (with $CXX they printed nothing, or crashed)."""
        if shutil.which("g++") is None:
            self.skipTest("needs g++ for the wrapper")
        with tempfile.TemporaryDirectory() as d:
            wrapper = os.path.join(d, "gxx-static")
            with open(wrapper, "w") as fh:
                fh.write('#!/bin/sh\nexec g++ "$@" -static-libstdc++\n')
            os.chmod(wrapper, 0o755)
            env = dict(os.environ, CXX=wrapper, KSOL_CACHE_DIR=os.path.join(d, "cache"), PYTHONPATH=os.pathsep.join(
                p for p in (HERE, os.path.join(ROOT, "python"), os.environ.get("PYTHONPATH")) if p))
            env.pop("KSOL_TORCH_CXX", None)
            env[CHILD_ENV] = "1"
            r = subprocess.run([sys.executable, "-X", "faulthandler", "-m", "unittest", "-v", f"{MODULE}.OpCalls.test_a_failing_status_raises"],
                               cwd=HERE, env=env, capture_output=True, text=True, timeout=600)
            self.assertEqual(r.returncode, 0, r.stderr[-4000:])
            self.assertNotIn("skipped", r.stderr, r.stderr[-4000:])
            self.assertTrue(r.stderr.rstrip().endswith("OK"), r.stderr[-4000:])
