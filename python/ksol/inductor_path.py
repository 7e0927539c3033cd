"""The Inductor path of `ksol optimize FILE.py`: torch.compile's own kernels as ksol tasks.

    capture     torch.compile(Model) compiled on the problem's inputs; each graph's output code
                parsed (inductor_wrapper.py) and kept beside the report (graph-<i>.py, .txt)
    baseline    the compiled model timed (the worker's timer: cold L2, median)
    same task?  one generated kernel and no vendor call, where the fx path searched the whole
                forward as one DSL program (--fx-results): that kernel is the same task, so no
                search runs and the answer is the compiled model (same_task_as_fx)
    per kernel  (each Triton kernel Inductor launched)
      region    its Graph fragment bound to its arguments as PyTorch (inductor_region.py), or why not
      record    its launch on the model's own tensors: inputs before, outputs after (the reference:
                the Inductor kernel itself), and its time alone
      check     the region's PyTorch, run on those inputs, gives what the kernel wrote
      problem   the region as a KernelBench-format file with the kernel's shapes and the captured
                inputs' value ranges (kernels/g<i>-<kernel>.py)
      search    `ksol optimize kernels/g<i>-<kernel>.py --path fx`: the DSL lowering, the agent's
                search, the worker's float64 gates, beside eager and torch.compile of the region
      verify    the answer (a library, or a stitched module) on the recorded inputs against the
                kernel's recorded outputs, and timed alone
    stitch      the replacements into the compiled model's module (inductor_capture.installed),
                one at a time, the largest gain first, each kept only if the whole model passes
                the module path's float64 gate (ksol_torch.worker.verify_module) and is faster
                (inductor_choice.keep_if_faster)
    choose      against the fx path's results.json, where given (inductor_choice.choose)

Everything it did and why goes to <report>/inductor.json; the kernels' problems and searches to
<report>/kernels/. `python3 -m ksol.inductor_path parse OUTPUT_CODE.py` reads an output code file
(TORCH_COMPILE_DEBUG=1 leaves them, as does this path) on any machine, without PyTorch.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Dict, List, Optional

from . import inductor_choice as ch
from . import inductor_region as ir
from . import inductor_wrapper as iw

# The seed the model is built and captured with: the worker's gate builds its reference from the
# first of SEEDS, so the model's weights (drawn from the seed in a KernelBench problem) match it.
SEEDS = (1, 2, 3)
REPORT = "inductor.json"


def _log(msg: str) -> None:
    print(f"[inductor] {msg}", file=sys.stderr, flush=True)


def _write(path: str, doc) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(doc, fh, indent=1, default=str)
    os.replace(tmp, path)


# --- parse (no PyTorch needed) -------------------------------------------------------------------------
def parse_report(program: iw.Program) -> str:
    """The program, each kernel's provenance and its region or why it has none, as text."""
    out = [iw.describe(program)]
    for k in program.kernels.values():
        out.append(iw.describe_kernel(k))
    seen = set()
    for launch in program.launches():
        if launch.kernel in seen:
            continue
        seen.add(launch.kernel)
        try:
            out.append(ir.describe(ir.bind(program, launch)))
        except ir.RegionError as e:
            out.append(f"no region: {e}\n")
    return "\n".join(out)


# --- the GPU flow ---------------------------------------------------------------------------------------
class _Env:
    """The problem, its model (built from SEEDS[0]) and inputs on the GPU, the worker's timer and
    gate, under the precision mode's TF32 switches."""

    def __init__(self, problem_path: str, precision: str, device: str = "cuda"):
        import torch
        from ksol_torch import problem, worker

        self.torch, self.worker, self.problem_mod = torch, worker, problem
        self.prob = problem.load(problem_path)
        self.device = device
        self.mode = worker.check_precision(precision)
        self.flags = worker.precision_flags(self.mode, worker._tf32_flags())
        self.model = problem.instantiate(self.prob, SEEDS[0], inputs=False)[0].to(self.device).eval()
        self.inputs = [x.to(self.device) if isinstance(x, torch.Tensor) else x
                       for x in worker._get_inputs(self.prob, SEEDS[0] + 1, self.device)]
        self.timer = worker.Timer(self.device)

    def flags_on(self):
        return self.worker._Flags(self.flags)

    def time(self, fn, args) -> ch.Timing:
        with self.torch.no_grad(), self.flags_on():
            t, _ = self.timer.time(fn, args)
        return ch.Timing(t["median_us"], t["ci_low_us"], t["ci_high_us"])

    def verify(self, cand) -> str:
        try:
            self.worker.verify_module(self.prob, cand, self.device, list(SEEDS), precision=self.mode)
            return ""
        except self.worker.GateFailure as f:
            return f"{f.gate}: {f.message}"


def _region_model(source: str, where: str):
    ns = {"__name__": "ksol_inductor_region", "__file__": where}
    exec(compile(source, where, "exec"), ns)
    return ns["Model"]()


def _kernel_search(ksol_bin: str, problem_file: str, run_dir: str, seconds: float, agent: str, precision: str,
                   candidates: int = 0) -> Dict:
    """`ksol optimize` on a kernel's problem (the fx path alone): its exit status and folder."""
    cmd = [ksol_bin, "--json", "optimize", problem_file, "--path", "fx", "--budget-seconds", f"{seconds:g}", "--agent", agent,
           "--precision", precision, "--report", run_dir]
    if candidates > 0:
        cmd += ["--budget-candidates", str(candidates)]
    env = dict(os.environ, KSOL_PYTHON=sys.executable)
    t0 = time.perf_counter()
    log = run_dir + ".log"
    timed_out = False
    with open(log, "w") as logf:
        try:
            rc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=logf, env=env, timeout=seconds + 900).returncode
        except subprocess.TimeoutExpired:
            rc, timed_out = -1, True
    return {"command": cmd, "exit_status": rc, "timed_out": timed_out, "seconds": time.perf_counter() - t0, "run_dir": run_dir,
            "log": log}


def _replacement(run, problem_file: str, region: ir.Region, label: str, device: str = "cuda"):
    """The library or module a kernel's ksol run returned, bound to the region's table."""
    from ksol_torch import abi, problem, synth

    from . import inductor_capture as ic
    from .module import _extent, load

    if run.answer == "stitched":
        return ic.ModuleReplacement(load(run.run_dir, verify=False, device=device), label)
    prob = problem.load(problem_file)
    try:
        m, xs = problem.instantiate(prob, 0, meta=True)
        syn = synth.synthesize(m, xs)
    except Exception:
        m, xs = problem.instantiate(prob, 0)
        syn = synth.synthesize(m, xs)
    if not syn.get("program"):
        raise RuntimeError(f"{problem_file} is no longer one DSL program: {syn.get('reason', '?')}")
    want = [tuple(_extent(d, syn["dims"]) for d in t["shape"]) for t in syn["tensors"]]
    have = [tuple(p.spec.shape) for p in region.inputs + region.outputs]
    if len(want) != len(have) or not all(abi.same_layout(w, h) for w, h in zip(want, have)):
        raise RuntimeError(f"the program's tensors {want} are not the kernel's {have}")
    from .run_dir import library
    dims = [int(syn["dims"][d]) for d in syn["dim_order"]]
    return ic.LibraryReplacement(library(run, "best"), dims, syn.get("family") == "elementwise", label)


def _tensors_for(rec, region: ir.Region):
    """Fresh tensors for one call of a replacement: clones of the recorded inputs, and outputs of
    the recorded outputs' shapes (an in-place buffer is the same tensor in both)."""
    import torch

    t = {p.param: rec.inputs[p.param].clone() for p in region.inputs}
    outs = [t[p.param] if p.param in t else torch.empty_like(rec.outputs[p.param]) for p in region.outputs]
    return [t[p.param].view(tuple(p.spec.shape)) for p in region.inputs], outs


def optimize(problem_path: str, report_dir: str, budget_seconds: float = 60.0, precision: str = "default",
             agent: str = "expert", ksol_bin: str = "", min_gain: float = 0.01, max_candidates: int = 0,
             fx_item: Optional[Dict] = None) -> Dict:
    """The Inductor path on one problem: the report (also written to <report_dir>/inductor.json).
    `fx_item`: the fx path's result on the same problem (results.json's first item), when it ran."""
    from . import inductor_capture as ic

    os.makedirs(report_dir, exist_ok=True)
    doc: Dict = {"path": "inductor", "problem": os.path.abspath(problem_path), "status": "skipped", "precision": {"mode": precision},
                 "kernels": [], "graphs": []}
    why = ic.available()
    if why:
        doc["reason"] = f"the Inductor path needs PyTorch 2 with Triton and a GPU: {why}"
        doc["no_gpu"] = why.startswith("no CUDA device")
        _write(os.path.join(report_dir, REPORT), doc)
        return doc
    if not ksol_bin:
        from .binaries import find_binaries
        ksol_bin = find_binaries().ksol
    env = _Env(problem_path, precision)
    doc.update(torch=env.torch.__version__, gpu=env.torch.cuda.get_device_name(), status="failed")
    try:
        with env.flags_on():
            cap = ic.capture(env.model, env.inputs, os.path.splitext(os.path.basename(problem_path))[0])
    except ic.CaptureError as e:
        doc["reason"] = f"capture: {e}"
        _write(os.path.join(report_dir, REPORT), doc)
        return doc

    def search(problem_file, run_dir, seconds):
        return _kernel_search(ksol_bin, problem_file, run_dir, seconds, agent, precision, max_candidates)

    return run_path(env, cap, doc, report_dir, search, budget_seconds, min_gain, fx_item)


def same_task_as_fx(cap, fx_item: Optional[Dict]) -> str:
    """Why searching the compiled model's kernels would repeat the fx path's search, or "": the
    compiled model is one generated kernel and no vendor call, so that kernel computes the whole
    forward from the model's inputs, and the fx path searched the whole forward as one DSL program
    (not stitched pieces) and verified at least one schedule of it. Both searches would then be
    over the same program's schedules. Where the fx path verified none (its seed ran out of memory,
    say), the kernel is searched here."""
    if not fx_item or not fx_item.get("seed_program") or fx_item.get("pieces"):
        return ""
    if not any(t.get("status") == "ok" for t in fx_item.get("trajectory") or []):
        return ""
    launches = [launch for g in cap.graphs for launch in g.program.launches()]
    if len(launches) != 1 or any(g.program.externs() for g in cap.graphs):
        return ""
    return (f"not searched: the compiled model is one generated kernel ({launches[0].kernel}) and no vendor call, "
            "so that kernel is the whole forward, which the fx path searched as one DSL program")


def _moved(torch, values: List, device: str) -> List:
    """`values` with each tensor on `device` (the same values; the others as they are)."""
    return [x.to(device) if isinstance(x, torch.Tensor) else x for x in values]


def run_path(env, cap, doc: Dict, report_dir: str, search, budget_seconds: float, min_gain: float = 0.01,
             fx_item: Optional[Dict] = None) -> Dict:
    """The Inductor path after the capture: `search(problem_file, run_dir, seconds)` runs one
    kernel's search (`ksol optimize ... --path fx`) and returns its record. The report, written to
    <report_dir>/inductor.json as it goes. With `fx_item` (the fx path's result) the searches are
    skipped where they would repeat the fx path's (same_task_as_fx): the answer is the compiled
    model, timed here."""
    from . import inductor_capture as ic

    stem = os.path.splitext(os.path.basename(doc["problem"]))[0]
    doc["compile_seconds"] = cap.compile_seconds
    for g in cap.graphs:
        with open(os.path.join(report_dir, f"graph-{g.index}.py"), "w") as fh:
            fh.write(g.source)
        with open(os.path.join(report_dir, f"graph-{g.index}.txt"), "w") as fh:
            fh.write(parse_report(g.program))
        doc["graphs"].append({"index": g.index, "output_code": f"graph-{g.index}.py", "kernels": len(g.program.kernels),
                              "launches": len(g.program.launches()), "externs": [e.op for e in g.program.externs()]})
    base = env.time(cap.compiled, env.inputs)
    doc["compiled_us"] = base.median_us
    _log(f"{stem}: {len(cap.graphs)} graph(s), {sum(len(g.program.launches()) for g in cap.graphs)} launch(es), "
         f"externs {[e.op for g in cap.graphs for e in g.program.externs()]}; compiled model {base.median_us:.2f} us")
    same = same_task_as_fx(cap, fx_item)
    if same:
        doc["kernels"] = [{"graph": g.index, "kernel": launch.kernel, "launches": 1, "status": "not searched", "reason": same}
                          for g in cap.graphs for launch in g.program.launches()]
        doc.update(status="ok", answer="compile", answer_us=base.median_us, speedup_vs_compile=1.0, kept=[], searched=False,
                   reason=same)
        _log(same)
        _write(os.path.join(report_dir, REPORT), doc)
        return doc

    # Each kernel: region, record, check, problem file, lowering, its time alone. An earlier run's
    # kernels go first: a search that crashes before writing its results.json must find no
    # results there, not those an earlier run with the same --report left.
    kdir = os.path.join(report_dir, "kernels")
    shutil.rmtree(kdir, ignore_errors=True)
    os.makedirs(kdir)
    work = []
    for g in cap.graphs:
        counts: Dict[str, int] = {}
        for launch in g.program.launches():
            counts[launch.kernel] = counts.get(launch.kernel, 0) + 1
        seen = set()
        for launch in g.program.launches():
            if launch.kernel in seen:
                continue
            seen.add(launch.kernel)
            rec = {"graph": g.index, "kernel": launch.kernel, "launches": counts[launch.kernel],
                   "source_hash": ic.source_hash(g.program.kernels[launch.kernel].source),
                   "source_nodes": launch.source_nodes, "aten": launch.aten}
            doc["kernels"].append(rec)
            item = _prepare(env, cap, g, launch, counts[launch.kernel], kdir, stem, rec)
            if item is not None:
                work.append(item)
    _write(os.path.join(report_dir, REPORT), doc)

    # The searches, the budget split evenly over the kernels that lower. Each runs in processes of
    # its own, which need the GPU's memory: the recorded launches and the model's inputs wait on
    # the host, and what this process's allocator keeps cached goes back to the GPU; a kernel's
    # launches come back for its checks and are dropped after them, the inputs after the searches.
    share = budget_seconds / max(1, len(work))
    for item in work:
        for r in item["recs"]:
            r.to("cpu")
    if work:
        env.inputs = _moved(env.torch, env.inputs, "cpu")
    candidates, makers = [], {}
    for item in work:
        rec = item["rec"]
        name = f"g{rec['graph']}.{rec['kernel']}"
        run_dir = os.path.join(kdir, item["stem"])
        _log(f"{name}: ksol optimize {os.path.relpath(item['file'], report_dir)} ({share:.0f} s)")
        env.torch.cuda.empty_cache()
        rec["search"] = search(item["file"], run_dir, share)
        try:
            for r in item["recs"]:
                r.to(env.device)
        except Exception as e:
            item["recs"] = None
            rec["status"], rec["reason"] = "not checked", f"its recorded launches did not fit on the GPU again: {type(e).__name__}: {e}"[:300]
            continue
        made = _searched(env, item, rec, run_dir)
        item["recs"] = None
        if made is None:
            continue
        makers[(rec["graph"], rec["kernel"])] = made
        candidates.append(ch.Candidate(name, rec["inductor_us"] - rec["replacement_us"]))
        _write(os.path.join(report_dir, REPORT), doc)

    env.inputs = _moved(env.torch, env.inputs, env.device)

    # The whole model, replacements added one at a time.
    by_name = {f"g{gi}.{k}": (gi, k) for gi, k in makers}

    def shims(names):
        return {by_name[n]: makers[by_name[n]] for n in names}

    def time_model(names):
        with ic.installed(cap, shims(names)) as model:
            t = env.time(model, env.inputs)
            ic.check_called(cap, names)
            return t

    def verify(names):
        with ic.installed(cap, shims(names)):
            return env.verify(ic.checked(cap, names))

    sel = ch.keep_if_faster(candidates, time_model, verify, min_gain)
    for rec in doc["kernels"]:
        rec["kept"] = f"g{rec['graph']}.{rec['kernel']}" in sel.kept
    doc.update(status="ok", selection=sel.log, kept=sel.kept, compiled_us=sel.base.median_us,
               answer="inductor+ksol" if sel.kept else "compile",
               answer_us=sel.final.median_us if sel.final else sel.base.median_us, speedup_vs_compile=sel.speedup)
    doc["reason"] = (f"{len(sel.kept)} kernel(s) replaced: {sel.speedup:.3f}x over the compiled model" if sel.kept else
                     "no replacement made the whole model faster" if candidates else "no kernel got a verified replacement")
    _log(doc["reason"])
    _write(os.path.join(report_dir, REPORT), doc)
    return doc


def _prepare(env, cap, g, launch, launches: int, kdir: str, stem: str, rec: Dict) -> Optional[Dict]:
    """A kernel's region, recording, check, problem file and time alone; None (rec says why) where
    it cannot become a task."""
    from ksol_torch import problem, synth

    from . import inductor_capture as ic
    from .serialize import input_spec

    torch = env.torch
    try:
        region = ir.bind(g.program, launch)
    except ir.RegionError as e:
        rec["status"], rec["reason"] = "no region", str(e)
        return None
    rec["region"] = ir.describe(region)
    with env.flags_on():
        recs = ic.record(cap, g, launch, env.inputs, limit=launches)
    if not recs:
        rec["status"], rec["reason"] = "not launched", "the kernel did not run during the forward"
        return None
    file_stem = f"g{g.index}-{launch.kernel}"
    path = os.path.join(kdir, file_stem + ".py")
    stats = [input_spec(recs[0].inputs[p.param], i) for i, p in enumerate(region.inputs)]
    source = ir.problem_source(region, f"{stem} (graph {g.index})", stats)
    with open(path, "w") as fh:
        fh.write(source)
    rec["problem"] = os.path.relpath(path, os.path.dirname(kdir))
    # The region against the kernel itself, on every recorded launch.
    model = _region_model(source, path).to(env.device)
    for n, r in enumerate(recs):
        with torch.no_grad():
            got = model(*[r.inputs[p.param].view(tuple(p.spec.shape)) for p in region.inputs])
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        for p, t in zip(region.outputs, got):
            err = ic.compare(t.reshape(r.outputs[p.param].shape).contiguous(), r.outputs[p.param], region.accumulation)
            if err:
                rec["status"] = "region differs"
                rec["reason"] = f"the fragment's PyTorch does not give what the kernel wrote to {p.param} (launch {n}): {err}"
                return None
    got = model = None  # GPU memory the timing below and the searches need
    # Does ksol's lowering take it (as one program, or pieces)? On shape-only tensors, before any search.
    try:
        prob = problem.load(path)
        syn = synth.synthesize(*problem.instantiate(prob, 0, meta=True))
    except Exception as e:
        syn = {"reason": f"{type(e).__name__}: {e}"}
    if not syn.get("program") and not (syn.get("stitch") or {}).get("pieces"):
        rec["status"], rec["reason"] = "not lowered", syn.get("reason", "no DSL form")
        return None
    rec["family"] = syn.get("family") or "stitched"
    original = g.kernel_object(launch.kernel)
    args = recs[0].fresh_args()
    rec["inductor_us"] = env.time(lambda: original.run(*args, stream=recs[0].stream), []).median_us
    args = None
    rec["status"] = "task"
    return {"rec": rec, "file": path, "stem": file_stem, "region": region, "recs": recs, "launch": launch, "graph": g}


def _search_end(search: Dict) -> str:
    """How a kernel's search ended, from its record: "the search was killed by signal 11 (its log:
    ...)"."""
    rc = search.get("exit_status")
    if search.get("timed_out"):
        how = "the search timed out"
    elif rc is None or rc == 0:
        how = "the search finished"
    elif rc < 0:
        how = f"the search was killed by signal {-rc}"
    else:
        how = f"the search exited with status {rc}"
    return how + (f" (its log: {search['log']})" if search.get("log") else "")


def _searched(env, item: Dict, rec: Dict, run_dir: str):
    """After a kernel's search: the shim maker of its verified answer, or None (rec says why)."""
    from . import inductor_capture as ic
    from .run_dir import read_run

    region, recs, g, launch = item["region"], item["recs"], item["graph"], item["launch"]
    try:
        run = read_run(run_dir)
    except Exception as e:
        rec["status"], rec["reason"] = "search failed", f"{_search_end(rec['search'])} and left no results: {e}"
        return None
    rec["answer"] = run.answer
    rec["search_reason"] = run.reason
    if run.answer == "pytorch":
        rec["status"], rec["reason"] = "no faster kernel", run.reason
        return None
    try:
        repl = _replacement(run, item["file"], region, item["stem"], env.device)
    except Exception as e:
        rec["status"], rec["reason"] = "replacement failed", f"{type(e).__name__}: {e}"
        return None
    # The reference: the Inductor kernel's own outputs, on every launch recorded.
    for n, r in enumerate(recs):
        ins, outs = _tensors_for(r, region)
        try:
            with env.flags_on():
                repl(ins, outs)
        except Exception as e:
            rec["status"], rec["reason"] = "replacement failed", f"launch {n}: {type(e).__name__}: {e}"
            return None
        for p, t in zip(region.outputs, outs):
            err = ic.compare(t, r.outputs[p.param], region.accumulation)
            if err:
                rec["status"], rec["reason"] = "replacement differs", f"{p.param} (launch {n}) against the Inductor kernel: {err}"
                return None
    ins, outs = _tensors_for(recs[0], region)
    rec["replacement_us"] = env.time(lambda: repl(ins, outs), []).median_us
    rec["replacement"] = repl.label
    rec["status"] = "verified"
    k = g.program.kernels[launch.kernel]
    in_params, out_params = [p.param for p in region.inputs], [p.param for p in region.outputs]
    in_shapes = [p.spec.shape for p in region.inputs]
    return lambda original: ic.Shim(original, k, launch, repl, in_params, out_params, in_shapes)


class InductorModule:
    """What `load` returns: the compiled model with the run's kept replacements in place, called
    like the module (under torch.no_grad: inference only). `ksol_result` is the run's report."""

    def __init__(self, cap, kept: List[str], doc: Dict):
        self.compiled, self.kept, self.ksol_result = cap.compiled, kept, doc
        self._cap = cap

    def __call__(self, *inputs):
        import torch

        with torch.no_grad():
            return self.compiled(*inputs)


def load(inductor_dir: str, verify: bool = True) -> InductorModule:
    """The Inductor path's answer from its report folder (<run>/inductor): the problem's Model
    (built from the first of SEEDS, as the run built it) compiled again, each kept kernel found in
    the new output code by name and source (Inductor writes the same code for the same graph, torch
    and config), its library bound as the run bound it, and, with `verify`, the whole model
    checked against the Model in float64. The replacements live in the compiled graph's module,
    which PyTorch shares between compiles of the same code in this process: a second
    torch.compile of the same module runs them too. RunDirError where the code is not the run's;
    VerificationError where the model does not pass."""
    from . import inductor_capture as ic
    from .errors import RunDirError, VerificationError
    from .run_dir import read_run

    with open(os.path.join(inductor_dir, REPORT)) as fh:
        doc = json.load(fh)
    if doc.get("status") != "ok":
        raise RunDirError(f"{inductor_dir}: the Inductor path did not finish there ({doc.get('reason', doc.get('status'))})")
    env = _Env(doc["problem"], doc.get("precision", {}).get("mode", "default"))
    with env.flags_on():
        cap = ic.capture(env.model, env.inputs, os.path.basename(doc["problem"]))
    recs = {f"g{r['graph']}.{r['kernel']}": r for r in doc["kernels"]}
    for name in doc.get("kept", []):
        rec = recs[name]
        gi, kernel = rec["graph"], rec["kernel"]
        g = cap.graphs[gi] if gi < len(cap.graphs) else None
        k = g.program.kernels.get(kernel) if g else None
        if k is None or ic.source_hash(k.source) != rec["source_hash"]:
            raise RunDirError(f"{inductor_dir}: torch.compile no longer writes kernel {name} as the run saw it (PyTorch, its "
                              "configuration or the module changed): run ksol optimize again")
        launch = next(l for l in g.program.launches() if l.kernel == kernel)
        region = ir.bind(g.program, launch)
        stem = f"g{gi}-{kernel}"
        repl = _replacement(read_run(os.path.join(inductor_dir, "kernels", stem)), os.path.join(inductor_dir, "kernels", stem + ".py"),
                            region, stem)
        setattr(g.module, kernel, ic.Shim(g.kernel_object(kernel), k, launch, repl, [p.param for p in region.inputs],
                                          [p.param for p in region.outputs], [p.spec.shape for p in region.inputs]))
    mod = InductorModule(cap, list(doc.get("kept", [])), doc)
    if verify:
        err = env.verify(ic.checked(cap, mod.kept))
        if err:
            raise VerificationError(f"{inductor_dir}: the compiled model with the run's kernels does not pass the module's "
                                    f"gate: {err}", "correctness", "wrong_result", inductor_dir)
    return mod


def choose_paths(fx_results: str, inductor_doc: Dict) -> ch.Choice:
    """The choice between the fx path's results.json and the Inductor path's report."""
    with open(fx_results) as fh:
        fx_doc = json.load(fh)
    item = (fx_doc.get("results") or [{}])[0]
    fx = ch.fx_result(item, emulated=bool(fx_doc.get("emulated")))
    ind = inductor_result(inductor_doc)
    return ch.choose(fx, ind)


def inductor_result(doc: Dict) -> ch.PathResult:
    if doc.get("status") != "ok":
        return ch.PathResult("inductor", False, reason=doc.get("reason", "") or doc.get("status", ""))
    return ch.PathResult("inductor", True, doc.get("answer", "compile"), float(doc.get("answer_us", 0.0)),
                         float(doc.get("compiled_us", 0.0)), reason=doc.get("reason", ""))


def record_choice(fx_results: str, inductor_dir: str, choice: ch.Choice) -> None:
    """The choice into both reports: results.json's "path" and inductor.json's "choice"."""
    with open(fx_results) as fh:
        fx_doc = json.load(fh)
    fx_doc["path"] = dict(choice.to_json(), inductor_report=os.path.relpath(os.path.join(inductor_dir, REPORT),
                                                                           os.path.dirname(os.path.abspath(fx_results))))
    _write(fx_results, fx_doc)
    md = os.path.join(os.path.dirname(os.path.abspath(fx_results)), "report.md")
    if os.path.exists(md):
        with open(md, "a") as fh:
            fh.write(choice_markdown(choice))
    ind_path = os.path.join(inductor_dir, REPORT)
    if os.path.exists(ind_path):
        with open(ind_path) as fh:
            ind_doc = json.load(fh)
        ind_doc["choice"] = choice.to_json()
        _write(ind_path, ind_doc)


def choice_markdown(choice: ch.Choice) -> str:
    """The report's section on the two paths."""
    rows = []
    for p in (choice.fx, choice.inductor):
        if p is None:
            continue
        if p.ok:
            rows.append(f"| {p.path} | {p.answer} | {p.answer_us:.2f} | {p.compile_us:.2f} | {p.speedup:.3f}x | {p.reason} |")
        else:
            rows.append(f"| {p.path} | - | - | - | - | {p.reason} |")
    return ("\n## Path\n\n" + f"Returned: **{choice.path or 'neither'}** ({choice.why}).\n\n"
            "| path | answer | us | torch.compile us | speedup over torch.compile | note |\n| --- | --- | --- | --- | --- | --- |\n"
            + "\n".join(rows) + "\n")


def main(argv=None) -> int:
    from ksol_torch import allocator

    allocator.set_default()  # this process's allocator is the worker's (ksol_torch/allocator.py)
    ap = argparse.ArgumentParser(prog="python3 -m ksol.inductor_path", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("parse", help="read Inductor output code: launches, kernels, regions (no PyTorch needed)")
    p.add_argument("output_code")
    p.add_argument("--regions", metavar="DIR", help="also write each kernel's region as a KernelBench-format problem in DIR")
    o = sub.add_parser("optimize", help="the Inductor path on a KernelBench-format problem (a GPU with PyTorch 2 and Triton)")
    o.add_argument("problem")
    o.add_argument("--report", required=True, metavar="DIR")
    o.add_argument("--budget-seconds", type=float, default=60.0, help="the kernels' searches together (split evenly)")
    o.add_argument("--agent", default="expert")
    o.add_argument("--precision", default="default", choices=["default", "strict", "tf32"])
    o.add_argument("--ksol", default="", help="the ksol binary the kernels' searches run (default: ksol.find_binaries())")
    o.add_argument("--budget-candidates", type=int, default=0, help="each kernel's search tries at most this many programs")
    o.add_argument("--min-gain", type=float, default=0.01, help="a replacement stays when the whole model is this fraction faster")
    o.add_argument("--fx-results", metavar="RESULTS_JSON", help="the fx path's results.json: choose between the two and "
                                                                "write the choice into both reports")
    a = ap.parse_args(argv)
    if a.cmd == "parse":
        try:
            prog = iw.parse_file(a.output_code)
        except iw.WrapperFormatError as e:
            print(e, file=sys.stderr)
            return 1
        except OSError as e:
            print(f"{a.output_code}: {e.strerror}", file=sys.stderr)
            return 2
        print(parse_report(prog), end="")
        if a.regions:
            os.makedirs(a.regions, exist_ok=True)
            seen = set()
            for launch in prog.launches():
                if launch.kernel in seen:
                    continue
                seen.add(launch.kernel)
                try:
                    region = ir.bind(prog, launch)
                except ir.RegionError:
                    continue
                with open(os.path.join(a.regions, launch.kernel + ".py"), "w") as fh:
                    fh.write(ir.problem_source(region, a.output_code))
        return 0
    fx_item = None
    if a.fx_results:
        try:
            with open(a.fx_results) as fh:
                fx_item = (json.load(fh).get("results") or [None])[0]
        except (OSError, ValueError) as e:
            _log(f"{a.fx_results}: not read ({e}); every kernel is searched")
    try:
        doc = optimize(a.problem, a.report, a.budget_seconds, a.precision, a.agent, a.ksol, a.min_gain, a.budget_candidates,
                       fx_item)
    except Exception as e:  # reported in the JSON: the fx path's answer stands
        import traceback
        doc = {"path": "inductor", "status": "failed", "reason": f"{type(e).__name__}: {e}", "traceback": traceback.format_exc()}
        _write(os.path.join(a.report, REPORT), doc)
        _log(f"failed: {doc['reason']}")
    if a.fx_results:
        choice = choose_paths(a.fx_results, doc)
        record_choice(a.fx_results, a.report, choice)
        _log(f"path: {choice.path or 'none'}: {choice.why}")
    print(json.dumps({"status": doc.get("status"), "answer": doc.get("answer", ""), "answer_us": doc.get("answer_us", 0.0),
                      "compiled_us": doc.get("compiled_us", 0.0), "reason": doc.get("reason", ""), "no_gpu": bool(doc.get("no_gpu"))}))
    return 0 if doc.get("status") in ("ok", "skipped") else 1


if __name__ == "__main__":
    sys.exit(main())
