"""The worker's per-evaluation work on the evaluation device: inputs drawn there where PyTorch can
(a torch.device context, PyTorch >= 2.0), the host's draw otherwise; the distributions' transforms
written in place, the float64 comparison in slices, the reference kept on the GPU while it has
room. On the CPU every number must stay what the whole-tensor expressions gave, bit for bit.
Run: PYTHONPATH=python python3 -m unittest discover -s tests/torch"""
import math
import os
import tempfile
import unittest
from unittest import mock

import torch

from ksol_torch import problem as problem_mod
from ksol_torch import worker

HERE = os.path.dirname(os.path.abspath(__file__))
PROBLEM = os.path.join(HERE, "problems", "01_gemm_relu.py")
HAS_DEVICE_CONTEXT = hasattr(torch.device("cpu"), "__enter__")


# --- the expressions the worker used before, kept here to pin its values on the host -------------
def transform_whole(x, dist, gen):
    if dist == "normal" or not x.is_floating_point():
        return x
    u = torch.rand(x.shape, generator=gen, dtype=torch.float64)
    sign = torch.where(x >= 0, 1.0, -1.0).to(torch.float64)
    if dist == "heavy":
        y = sign * (u.pow(-1.0 / 3.0) - 1.0)
    else:
        mag = 10.0 * torch.pow(torch.tensor(100.0, dtype=torch.float64), torch.rand(x.shape, generator=gen, dtype=torch.float64))
        y = torch.where(u < 0.02, torch.zeros_like(u), torch.where(u < 0.03, sign * mag, 0.1 * x.to(torch.float64)))
    return y.to(x.dtype)


def compare_whole(o, ref64, accumulation, rtol_scale, k, label):
    """The whole-tensor comparison: (worst, None) or (None, message)."""
    got64 = o.detach().to(device="cpu", dtype=torch.float64)
    fin = torch.isfinite(ref64)
    bad_special = (~fin & ~((got64 == ref64) | (torch.isnan(got64) & torch.isnan(ref64)))).sum().item()
    if bad_special:
        return None, f"output {k}: {bad_special} NaN/Inf elements differ from the reference ({label})"
    if not torch.isfinite(got64[fin]).all():
        return None, f"output {k}: NaN or Inf where the reference is finite ({label})"
    mag = ref64[fin].abs()
    mean = mag.mean().item() if mag.numel() else 0.0
    u_out = worker._unit(o.dtype)
    growth = (8.0 + 2.0 * math.sqrt(max(1.0, accumulation))) * rtol_scale
    bound = 2 * u_out * ref64.abs() + 2.0 ** -24 * growth * (ref64.abs() + mean)
    err = (got64 - ref64).abs()
    ratio = torch.where(fin, err / torch.clamp(bound, min=1e-300), torch.zeros_like(err))
    worst = ratio.max().item() if ratio.numel() else 0.0
    nbad = (ratio > 1).sum().item()
    if nbad:
        i = int(torch.argmax(ratio).item())
        return None, (f"output {k}: {nbad} of {ratio.numel()} elements out of tolerance; worst at flat index {i}: "
                      f"got {got64.flatten()[i].item():.9g}, want {ref64.flatten()[i].item():.9g} "
                      f"(allowed {bound.flatten()[i].item():.3g}) ({label})")
    return worst, None


def compare_new(o, ref64, chunk=None):
    with mock.patch.object(worker, "_CHUNK", chunk or worker._CHUNK):
        try:
            return worker._compare_values(o, ref64, 40.0, 16.0, 0, "case"), None
        except worker.GateFailure as f:
            return None, f.message


def sample(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g, dtype=torch.float64) * torch.rand(shape, generator=g, dtype=torch.float64).pow(-0.5)
    return x.to(dtype)


class Transforms(unittest.TestCase):
    def test_in_place_transforms_draw_what_the_whole_expressions_drew(self):
        for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
            x = sample((33, 17), 5, dtype)
            x.view(-1)[:4] = torch.tensor([float("nan"), -0.0, 0.0, float("inf")]).to(dtype)
            for dist in worker.DISTRIBUTIONS:
                seed = 17 * 7919 + worker.DISTRIBUTIONS.index(dist)
                want = transform_whole(x, dist, torch.Generator().manual_seed(seed))
                keep = x.clone()
                got = worker._transform(x, dist, torch.Generator(device=x.device).manual_seed(seed))
                self.assertEqual(got.dtype, x.dtype)
                self.assertTrue(torch.equal(got.view(-1)[4:], want.view(-1)[4:]), (dtype, dist))
                self.assertEqual(torch.isnan(got).tolist(), torch.isnan(want).tolist())
                self.assertTrue(torch.equal(x.nan_to_num(), keep.nan_to_num()), "the transform changed its input")

    def test_a_large_draw_is_transformed_slice_by_slice(self):
        # Slices of 1000 elements over 40000 (the last one short): the same draw again under the
        # same seed; the input untouched; spiky's zeros, spikes and shrunk values, and heavy's
        # signs, in every slice (an element left unwritten would break the counts or the rule).
        x = sample((200, 200), 3)
        keep = x.clone()
        with mock.patch.object(worker, "_TRANSFORM_SLICE", 1000):
            spiky = worker._transform(x, "spiky", torch.Generator().manual_seed(5))
            again = worker._transform(x, "spiky", torch.Generator().manual_seed(5))
            heavy = worker._transform(x, "heavy", torch.Generator().manual_seed(6))
        self.assertTrue(torch.equal(spiky, again))
        self.assertTrue(torch.equal(x, keep))
        self.assertEqual((spiky.shape, spiky.dtype), (x.shape, x.dtype))
        shrunk = spiky == (x.double() * 0.1).float()
        zero = (spiky == 0) & ~shrunk
        spike = ~shrunk & ~zero
        self.assertTrue(torch.all((spiky[spike].abs() >= 10) & (spiky[spike].abs() <= 1000)))
        self.assertTrue(torch.equal(torch.sign(spiky[spike]), torch.sign(x[spike])))
        for part, want in ((zero, 0.02), (spike, 0.01)):
            for s in range(0, 40000, 10000):  # each quarter's share, not only the whole's
                frac = part.view(-1)[s:s + 10000].double().mean().item()
                self.assertLess(abs(frac - want), 0.006, (want, s, frac))
        self.assertTrue(torch.equal(torch.sign(heavy), torch.sign(x)))
        # Each slice its own numbers: |heavy| depends on them alone (the signs are x's).
        flat = heavy.view(-1).abs()
        self.assertFalse(any(torch.equal(flat[:1000], flat[s:s + 1000]) for s in range(1000, 40000, 1000)))

    def test_integers_are_kept(self):
        x = torch.arange(10)
        self.assertIs(worker._transform(x, "spiky", torch.Generator()), x)


class CaseTensors(unittest.TestCase):
    """A correctness case drawn into the tensors the candidate is called on, and the copy of them
    from before the call that the input-mutation check compares against."""

    def setUp(self):
        self.prob = problem_mod.load(PROBLEM)

    def test_a_case_drawn_into_its_tensors_is_the_draw(self):
        # Whole and slice by slice (1000 elements over 8 x 32 = 256: one slice; 50: six): the
        # tensors hold what _draw gives under the same slicing, whatever they held before.
        for slice_ in (1000, 50):
            with mock.patch.object(worker, "_TRANSFORM_SLICE", slice_):
                for dist in worker.DISTRIBUTIONS:
                    want = worker._draw(self.prob, 7, dist, "cpu")
                    dst = [torch.full_like(want[0], 7.0)]
                    worker._draw_into(dst, self.prob, 7, dist, "cpu")
                    self.assertTrue(torch.equal(dst[0], want[0]), (slice_, dist))
                    # A destination that is not contiguous takes the transformed tensor whole.
                    odd = [torch.full((32, 8), 7.0).t()]
                    worker._draw_into(odd, self.prob, 7, dist, "cpu")
                    self.assertTrue(torch.equal(odd[0], want[0]), (slice_, dist))
        # The sliced draw is its own (the generator draws slice by slice), so the test above
        # compares like with like.
        with mock.patch.object(worker, "_TRANSFORM_SLICE", 50):
            sliced = worker._draw(self.prob, 7, "spiky", "cpu")[0]
        self.assertFalse(torch.equal(sliced, worker._draw(self.prob, 7, "spiky", "cpu")[0]))

    def test_the_unchanged_check_compares_slice_by_slice(self):
        a = sample((40, 25), 4)
        with mock.patch.object(worker, "_EQUAL_SLICE", 64):
            self.assertTrue(worker._unchanged(a.clone(), a))
            b = a.clone()
            b.view(-1)[-1] += 1.0  # in the last, short slice
            self.assertFalse(worker._unchanged(a, b))
            b = a.clone()
            b.view(-1)[70] = float("nan")
            self.assertFalse(worker._unchanged(a, b))
            self.assertFalse(worker._unchanged(a, a.reshape(25, 40)))
            self.assertFalse(worker._unchanged(a, a.double()))
        self.assertTrue(worker._unchanged(a.clone(), a))
        self.assertFalse(worker._unchanged(a, a + 1))

    def test_the_copy_from_before_the_call_is_a_copy(self):
        x, n = sample((4, 4), 2), 3
        got = worker._before_call([x, n])
        self.assertIsNot(got[0], x)
        self.assertTrue(torch.equal(got[0], x))
        self.assertEqual(got[1], n)

    def test_a_candidate_that_writes_into_its_input_fails_with_slices_too(self):
        for slice_ in (worker._EQUAL_SLICE, 16):
            with mock.patch.object(worker, "_EQUAL_SLICE", slice_):
                r = worker.evaluate({"problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3],
                                     "candidate": os.path.join(HERE, "candidates", "gemm_relu_mutates_input.py")})
            self.assertEqual((r["status"], r.get("error_class")), ("failed", "input_mutated"), r.get("message"))
            self.assertIn("input 0 changed during the call (seed 1, normal)", r["message"])


class ErrorText(unittest.TestCase):
    def test_an_escaped_error_says_its_phase_and_line(self):
        worker._STATE["phase"] = "correctness"
        try:
            try:
                worker._unchanged(None, torch.zeros(1))
            except Exception as e:
                text = worker._error_text(e)
        finally:
            worker._STATE["phase"] = None
        self.assertRegex(text, r"^AttributeError \(in phase correctness, at worker\.py:\d+ in _unchanged\): ")
        try:
            raise ValueError("plain")
        except ValueError as e:
            self.assertEqual(worker._error_text(e), "ValueError: plain")  # no phase, no ksol frame


class DeviceDraws(unittest.TestCase):
    def setUp(self):
        self.prob = problem_mod.load(PROBLEM)

    def test_the_host_never_enters_a_device_context(self):
        self.assertIsNone(worker._device_context("cpu"))
        self.assertIsNone(worker._device_context(torch.device("cpu")))

    def test_without_the_context_the_draw_is_the_hosts(self):
        # Debian's torch 1.13 has no torch.device context: the draw falls back to the host's.
        ctx = worker._device_context("meta")
        with mock.patch.object(problem_mod, "call", wraps=problem_mod.call) as call:
            xs = worker._get_inputs(self.prob, 4, "meta")
        self.assertEqual(call.call_count, 1)
        if HAS_DEVICE_CONTEXT:
            self.assertIsNotNone(ctx)
            self.assertTrue(all(x.device.type == "meta" for x in xs))  # drawn on the device itself
        else:
            self.assertIsNone(ctx)
            self.assertTrue(all(x.device.type == "cpu" for x in xs))  # drawn on the host, moved by the caller
            drawn = worker._draw(self.prob, 4, "heavy", "meta")  # transformed on the host, then moved
            self.assertTrue(all(x.device.type == "meta" for x in drawn))
        drawn = worker._draw(self.prob, 4, "normal", "meta")  # on the device either way
        self.assertTrue(all(x.device.type == "meta" for x in drawn))
        self.assertEqual([tuple(x.shape) for x in drawn], [(8, 32)])

    def test_draws_are_deterministic_per_seed_and_identical_to_the_hosts_on_the_cpu(self):
        for dist in worker.DISTRIBUTIONS:
            a = worker._draw(self.prob, 7, dist, "cpu")
            b = worker._draw(self.prob, 7, dist, "cpu")
            c = worker._draw(self.prob, 8, dist, "cpu")
            self.assertTrue(torch.equal(a[0], b[0]), dist)
            self.assertFalse(torch.equal(a[0], c[0]), dist)
            # what the worker drew before: get_inputs on the host, the transform on the host
            torch.manual_seed(7)
            raw = problem_mod.call(self.prob, "get_inputs")
            want = transform_whole(raw[0], dist, torch.Generator().manual_seed(7 * 7919 + worker.DISTRIBUTIONS.index(dist)))
            self.assertTrue(torch.equal(a[0], want), dist)

    def test_get_inputs_runs_inside_the_device_context_where_there_is_one(self):
        inside = []

        class Ctx:
            def __enter__(self):
                inside.append(True)

            def __exit__(self, *exc):
                inside.append(False)

        real, calls = self.prob.get_inputs, []

        def get_inputs():
            calls.append(inside[-1:] == [True])  # (an assertion here would be taken for a failed draw)
            return real()

        with mock.patch.object(worker, "_device_context", lambda device: Ctx()), \
                mock.patch.object(self.prob, "get_inputs", get_inputs):
            a = worker._draw(self.prob, 9, "spiky", "cpu")
            b = worker._draw(self.prob, 9, "spiky", "cpu")
        self.assertEqual(calls, [True, True])  # inside the context, once per draw: no fallback
        self.assertEqual(inside, [True, False] * 2)
        self.assertTrue(torch.equal(a[0], b[0]))
        self.assertTrue(torch.equal(a[0], worker._draw(self.prob, 9, "spiky", "cpu")[0]))  # seeded the same way

    def test_a_get_inputs_that_fails_on_the_device_is_drawn_on_the_host(self):
        class Ctx:
            # An op the device lacks: the problem's torch.randn raises inside the context.
            def __enter__(self):
                self.patch = mock.patch.object(torch, "randn", side_effect=RuntimeError("not on this device"))
                self.patch.start()

            def __exit__(self, *exc):
                self.patch.stop()

        with mock.patch.object(worker, "_device_context", lambda device: Ctx()), \
                mock.patch.object(problem_mod, "call", wraps=problem_mod.call) as call:
            a = worker._get_inputs(self.prob, 3, "cpu")
        self.assertEqual(call.call_count, 2)  # the device's draw, then the host's
        b = worker._get_inputs(self.prob, 3, "cpu")
        self.assertTrue(torch.equal(a[0], b[0]))  # seeded again before the host's draw

    def test_get_inputs_must_return_a_list(self):
        with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as fh:
            fh.write("import torch\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x\n"
                     "def get_inputs():\n    return torch.rand(3)\ndef get_init_inputs():\n    return []\n")
        try:
            prob = problem_mod.load(fh.name)
            with self.assertRaises(problem_mod.ProblemError) as e:
                worker._get_inputs(prob, 1, "cpu")
            self.assertIn("must return a list", str(e.exception))
        finally:
            os.unlink(fh.name)


class SlicedComparison(unittest.TestCase):
    def check_same(self, o, ref, expect_fail=None):
        want = compare_whole(o, ref, 40.0, 16.0, 0, "case")
        got = compare_new(o, ref)
        self.assertEqual(got, want)  # one slice: bit for bit the whole tensor's
        for chunk in (1, 7, 64, 1000):
            sliced = compare_new(o, ref, chunk)
            self.assertEqual(sliced[1] is None, want[1] is None, (chunk, sliced, want))
            if want[1] is not None:
                self.assertEqual(sliced[1].split(":")[0], want[1].split(":")[0])
                self.assertEqual(sliced[1].split(";")[0], want[1].split(";")[0])  # the same count
                self.assertEqual(sliced[1].split("; ")[-1].split(" (allowed")[0], want[1].split("; ")[-1].split(" (allowed")[0])
            else:
                self.assertAlmostEqual(sliced[0], want[0], delta=1e-12 * max(1.0, want[0]))
        if expect_fail:
            self.assertIn(expect_fail, want[1])
        return want

    def test_an_honest_output(self):
        ref = sample((37, 29), 1, torch.float64)
        self.check_same(ref.float(), ref)

    def test_wrong_elements(self):
        ref = sample((37, 29), 2, torch.float64)
        o = ref.float()
        o[3, 4] *= 1.001
        o[30, 1] += 0.5
        r = self.check_same(o, ref, "2 of 1073 elements out of tolerance")
        self.assertIn("flat index 871", r[1])  # the larger error is the worst

    def test_nan_and_inf(self):
        ref = sample((10, 10), 3, torch.float64)
        ref[2, 2] = float("inf")
        ref[5, 5] = float("nan")
        o = ref.float()
        self.check_same(o, ref)
        o2 = o.clone()
        o2[5, 5] = 0.0
        self.check_same(o2, ref, "1 NaN/Inf elements differ")
        o3 = o.clone()
        o3[7, 1] = float("nan")
        self.check_same(o3, ref, "NaN or Inf where the reference is finite")

    def test_non_contiguous_empty_and_scalar_outputs(self):
        ref = sample((23, 41), 4, torch.float64)
        o = ref.float().t().contiguous().t()  # the candidate's strides differ from the reference's
        o[11, 40] *= 1.01
        self.check_same(o, ref, "1 of 943")
        self.check_same(torch.empty(0, 5), torch.empty(0, 5, dtype=torch.float64))
        self.check_same(torch.tensor(2.5), torch.tensor(2.5, dtype=torch.float64))
        self.check_same(torch.tensor(2.6), torch.tensor(2.5, dtype=torch.float64), "1 of 1")

    def test_bf16_outputs(self):
        ref = sample((16, 16), 6, torch.float64)
        self.check_same(ref.bfloat16(), ref)


class ReferencePlacement(unittest.TestCase):
    def place(self, free, reserved=0, allocated=0, also=0):
        outs = [torch.zeros(1 << 20, dtype=torch.float64)]  # 8 MiB
        moved = []

        def to(t, **kw):
            moved.append(kw)
            return t

        with mock.patch.object(worker, "_to", to), \
                mock.patch.object(torch.cuda, "mem_get_info", lambda dev=None: (free, 1 << 40)), \
                mock.patch.object(torch.cuda, "memory_reserved", lambda dev=None: reserved), \
                mock.patch.object(torch.cuda, "memory_allocated", lambda dev=None: allocated):
            worker._place_reference(outs, "cuda", also=also)
        return moved

    def test_kept_on_the_gpu_while_it_has_room(self):
        need = worker._ROOM * (8 << 20) + worker._SLACK
        self.assertEqual(self.place(need), [])
        self.assertEqual(self.place(need - 1), [{"device": "cpu"}])
        self.assertEqual(self.place(need - (1 << 20), reserved=(3 << 20), allocated=(2 << 20)), [])  # the allocator's unused blocks count
        # The case's input copies, made after the reference, need room too.
        self.assertEqual(self.place(need + (5 << 20), also=(5 << 20)), [])
        self.assertEqual(self.place(need + (5 << 20) - 1, also=(5 << 20)), [{"device": "cpu"}])

    def test_on_the_host_the_reference_stays_where_it_is(self):
        t = torch.zeros(3, dtype=torch.float64)
        self.assertIs(worker._place_reference([t], "cpu")[0], t)


class Phases(unittest.TestCase):
    def test_the_result_says_where_the_time_went(self):
        r = worker.evaluate({"problem": PROBLEM, "candidate": os.path.join(HERE, "candidates", "gemm_relu_numpy.py"),
                             "device": "cpu", "seeds": [1, 2, 3]})
        self.assertEqual(r["status"], "ok", r.get("message"))
        self.assertEqual(set(r["phase_seconds"]), {"setup", "baselines", "load", "correctness", "timing", "kernelbench"})
        self.assertTrue(all(v >= 0 for v in r["phase_seconds"].values()))
        r = worker.evaluate({"problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "baselines_only": True})
        self.assertEqual(set(r["phase_seconds"]), {"setup", "baselines", "screen"})
        r = worker.evaluate({"problem": PROBLEM, "device": "cpu", "seeds": [1, 2, 3], "baselines_only": True, "screen": False})
        self.assertEqual(set(r["phase_seconds"]), {"setup", "baselines"})
        self.assertNotIn("screen", r)


class Screening(unittest.TestCase):
    """ksol optimize FILE.py's screening: the worker's float64 references on the seeds' draws."""

    def verdict(self, name):
        r = worker.evaluate({"problem": os.path.join(HERE, "problems", name), "device": "cpu", "seeds": [1, 2, 3],
                             "baselines_only": True, "baselines": False})
        return r["screen"]

    def test_honest_problems_pass(self):
        for name in ("01_gemm_relu.py", "05_residual_layernorm.py"):
            s = self.verdict(name)
            self.assertEqual((s["verdict"], s["degenerate"], s["draws"]), ("ok", False, 3), (name, s))

    def test_degenerate_problems_are_marked(self):
        for name, want in (("04_constant.py", "constant_fill"), ("07_zero.py", "zero")):
            s = self.verdict(name)
            self.assertEqual((s["verdict"], s["degenerate"]), (want, True), (name, s))

    def test_a_reference_that_fails_is_skipped_with_the_reason(self):
        real, calls = worker._draw, []

        def draw(*a):  # the baselines' draw, then the screen's, which fails
            calls.append(a)
            if len(calls) > 1:
                raise RuntimeError("out of memory")
            return real(*a)
        with mock.patch.object(worker, "_draw", side_effect=draw):
            s = self.verdict("01_gemm_relu.py")
        self.assertEqual((s["verdict"], s["degenerate"]), ("skipped", False))
        self.assertIn("out of memory", s["detail"])


if __name__ == "__main__":
    unittest.main()
