#!/usr/bin/env python3
"""The exploit regression suite: runs every hack in hacks.toml through the real ksol CLI.

For each hack (a cheating candidate, see README.md):
  defended    every defence on: the hack must be rejected at the expected gate with the expected
              error class (gate 1 hacks: compile stage "static", "forbidden_construct");
  partial     (optional) only `partial_off` switched off: another defence must still catch it;
  undefended  its defence(s) switched off: it must pass ("ok" at every size it runs) and measure
              faster than the task's naive baseline timed in the same run (a fake speedup).
Every baseline of the tasks the hacks use is evaluated too and must pass at every size.

Runtime checks need a GPU. Without one the script does everything up to the launch: it
generates the hardcoded-seeds hack, compiles every hack and baseline through `ksol eval`, and
checks that gate-1 hacks are refused at the static stage (and compile once `static` is off) and
that every other hack compiles and gets as far as "no_gpu". It then says that the runtime
checks were not run and exits with 77 (0 with --compile-only, which asks for exactly that).

Exit status: 0 all checks passed; 1 a check failed; 2 bad usage or setup; 77 compile-only
checks passed but no GPU was available for the runtime checks.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import math
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
EXIT_NO_GPU = 77
STATIC_CLASS = "forbidden_construct"


# ----------------------------------------------------------------------------------------------
# TOML: tomllib where there is one (Python >= 3.11), else a reader for the subset used here and
# in task.toml files (tables, arrays of tables, strings, multi-line strings, numbers, booleans,
# one-line arrays).

def _parse_value(text: str, lines: list[str], i: int):
    text = text.strip()
    if text.startswith('"""'):
        body = text[3:]
        parts = []
        while '"""' not in body:
            parts.append(body)
            i += 1
            if i >= len(lines):
                raise ValueError("unterminated multi-line string")
            body = lines[i]
        parts.append(body[: body.index('"""')])
        text = "\n".join(parts)
        return re.sub(r"\\\n\s*", "", text[1:] if text.startswith("\n") else text), i  # line-ending backslash
    if text.startswith("["):
        inner = text[1:text.rindex("]")]
        items = [x for x in re.findall(r'"(?:[^"\\]|\\.)*"|[^,\s]+', inner)]
        return [_parse_scalar(x) for x in items], i
    return _parse_scalar(text), i


def _parse_scalar(tok: str):
    tok = tok.strip()
    if tok.startswith('"'):
        return json.loads(tok[: tok.rindex('"') + 1])
    tok = tok.split("#", 1)[0].strip()
    if tok in ("true", "false"):
        return tok == "true"
    try:
        return int(tok)
    except ValueError:
        return float(tok)


def _mini_toml(text: str) -> dict:
    root: dict = {}
    cur = root
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if not line or line.startswith("#"):
            i += 1
            continue
        m = re.match(r"^\[\[([A-Za-z0-9_.-]+)\]\]", line)
        if m:
            cur = {}
            root.setdefault(m.group(1), []).append(cur)
            i += 1
            continue
        m = re.match(r"^\[([A-Za-z0-9_.-]+)\]", line)
        if m:
            cur = root.setdefault(m.group(1), {})
            i += 1
            continue
        key, _, rest = line.partition("=")
        value, i = _parse_value(rest, lines, i)
        cur[key.strip()] = value
        i += 1
    return root


def load_toml(path: Path) -> dict:
    text = path.read_text()
    try:
        import tomllib  # type: ignore

        return tomllib.loads(text)
    except ImportError:
        return _mini_toml(text)


# ----------------------------------------------------------------------------------------------

def defence_names() -> list[str]:
    src = (ROOT / "src/core/defences.cpp").read_text()
    body = src[src.index("names = {"):src.index("};", src.index("names = {"))]
    return re.findall(r'^\s*"([a-z-]+)",', body, re.M)


def resolve_task(name: str) -> str:
    local = HERE / "tasks" / name
    return str(local) if (local / "task.toml").exists() else name


def task_toml_path(name: str) -> Path | None:
    local = HERE / "tasks" / name / "task.toml"
    if local.exists():
        return local
    for p in (ROOT / "tasks").rglob("task.toml"):
        if p.parent.name == name:
            return p
    return None


REQUIRED = ("name", "file", "task", "sizes", "defence", "defences_off", "expect_gate", "expect_class")


def load_manifest(path: Path) -> list[dict]:
    data = load_toml(path)
    hacks = data.get("hack", [])
    known = set(defence_names())
    names = set()
    problems = []
    for h in hacks:
        for k in REQUIRED:
            if k not in h:
                problems.append(f"{h.get('name', '?')}: missing key '{k}'")
        if h.get("name") in names:
            problems.append(f"{h['name']}: duplicate name")
        names.add(h.get("name"))
        for d in list(h.get("defences_off", [])) + list(h.get("partial_off", [])) + [h.get("defence", "")]:
            if d not in known:
                problems.append(f"{h.get('name')}: unknown defence '{d}' (known: {', '.join(sorted(known))})")
        if h.get("defence") not in h.get("defences_off", []):
            problems.append(f"{h.get('name')}: its defence '{h.get('defence')}' is not in defences_off")
        if h.get("expect_gate") == "none" and h.get("expect_class") != "none":
            problems.append(f"{h.get('name')}: a neutralised hack (expect_gate none) has expect_class 'none'")
        if "expect_message" in h and h.get("expect_gate") != "static":
            problems.append(f"{h.get('name')}: expect_message is for gate-1 rejections")
        if h.get("expect_gate") == "static" and h.get("expect_class") != STATIC_CLASS:
            problems.append(f"{h.get('name')}: gate 1 rejections have error_class '{STATIC_CLASS}'")
        if "partial_off" in h and not ("partial_gate" in h and "partial_class" in h):
            problems.append(f"{h.get('name')}: partial_off needs partial_gate and partial_class")
        if h.get("partial_gate") == "none" and (h.get("partial_class") != "none" or "partial_max_speedup" not in h):
            problems.append(f"{h.get('name')}: a partial run that neutralises (partial_gate none) needs partial_class 'none' "
                            "and partial_max_speedup")
        if "partial_max_speedup" in h and h.get("partial_gate") != "none":
            problems.append(f"{h.get('name')}: partial_max_speedup is for partial_gate 'none'")
        gen = h.get("generate")
        if gen not in (None, "hardcoded"):
            problems.append(f"{h.get('name')}: unknown generator '{gen}'")
        src = HERE / (h.get("file", "") + (".in" if gen else ""))
        if not src.exists():
            problems.append(f"{h.get('name')}: {src} does not exist")
        if task_toml_path(h.get("task", "")) is None:
            problems.append(f"{h.get('name')}: no task '{h.get('task')}'")
        if h.get("expect_size") and h.get("sizes"):
            problems.append(f"{h.get('name')}: expect_size is for sizes = [] (every size)")
    if not hacks:
        problems.append("no [[hack]] entries")
    if problems:
        print(f"error: {path}:" + "\n  ".join([""] + problems), file=sys.stderr)
        raise SystemExit(2)
    return hacks


# ----------------------------------------------------------------------------------------------

class Ksol:
    def __init__(self, exe: str, store: str, timeout: float):
        self.exe, self.store, self.timeout = exe, store, timeout

    def eval(self, task: str, candidate: str, sizes: list[str], off: list[str], compare: str,
             baselines_first: bool = False) -> dict:
        cmd = [self.exe, "--store", self.store, "--json", "eval", "--task", resolve_task(task),
               "--candidate", candidate, "--compare", compare, "--timeout", str(int(self.timeout))]
        if baselines_first:
            cmd.append("--baselines-first")
        if sizes:
            cmd += ["--sizes", ",".join(sizes)]
        for d in off:
            cmd += ["--defence-off", d]
        t0 = time.time()
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=self.timeout * 6 + 600)
        except subprocess.TimeoutExpired:
            return {"error": f"timed out: {' '.join(cmd)}", "cmd": cmd}
        out = {"cmd": cmd, "rc": p.returncode, "stderr": p.stderr, "seconds": round(time.time() - t0, 1)}
        try:
            out["json"] = json.loads(p.stdout)
        except json.JSONDecodeError:
            out["error"] = f"ksol exited {p.returncode} without JSON:\n{p.stderr.strip()[-2000:]}"
        return out

    def has_gpu(self, store: str | None = None) -> tuple[bool, str]:
        p = subprocess.run([self.exe, "--store", self.store if store is None else store, "--json", "device"],
                           capture_output=True, text=True, timeout=300)
        try:
            j = json.loads(p.stdout)
        except json.JSONDecodeError:
            return False, f"`ksol device` failed: {p.stderr.strip()}"
        if j.get("gpu") is False:
            return False, j.get("reason", "no GPU")
        return "device" in j, j.get("device", {}).get("name", "?")


def sizes_of(res: dict) -> list[dict]:
    return res["json"]["candidate"]["sizes"]


def baseline_medians(res: dict, name: str = "naive") -> dict[str, float]:
    for b in res["json"].get("baselines", []):
        if b["candidate"] == f"baseline:{name}":
            return {s["size"]: s["median_us"] for s in b["sizes"] if s["status"] == "ok"}
    return {}


def constructs(message: str) -> list[str]:
    return sorted(set(re.findall(r"forbidden construct '([^']+)'", message or "")))


def describe_size(s: dict) -> str:
    if s["status"] == "failed":
        return f"{s['size']}: failed at {s.get('failed_gate')}/{s.get('error_class')}"
    return f"{s['size']}: {s['status']}"


def check_rejected(res: dict, gate: str, cls: str, expect_size: str | None, gpu: bool,
                   message: str | None = None) -> tuple[bool, str]:
    """Defended (or partial) run: rejected where expected, for the expected reason.

    gate "none": the defence neutralises the hack instead (it can only compute honestly), so
    every size must pass. `message`: a gate-1 rejection by the library check must say this and
    name no source construct (the source scan let the hack through)."""
    if "error" in res:
        return False, res["error"]
    cand = res["json"]["candidate"]
    sizes = sizes_of(res)
    if gate == "static":
        if cand["compiled"] or cand["compile_stage"] != "static":
            return False, f"expected a static-gate rejection, got compiled={cand['compiled']} stage='{cand['compile_stage']}'"
        bad = [describe_size(s) for s in sizes
               if not (s["status"] == "failed" and s.get("failed_gate") == "static" and s.get("error_class") == cls)]
        if bad:
            return False, "static rejection not reported per size: " + "; ".join(bad)
        if message is not None:
            text = cand["compile_message"] or ""
            if message not in text or constructs(text):
                return False, f"expected the library check's '{message}' and no source finding, got: {text[-600:]}"
            return True, f"static (library): {message}"
        return True, f"static: {', '.join(constructs(cand['compile_message'])) or '?'}"
    if not cand["compiled"]:
        return False, f"did not compile (stage {cand['compile_stage']}): {cand['compile_message'][-1500:]}"
    if not gpu:
        bad = [describe_size(s) for s in sizes if s["status"] != "no_gpu"]
        return (not bad), ("compiled; runtime needs a GPU" if not bad else "; ".join(bad))
    if gate == "none":
        bad = [describe_size(s) + (f" ({s.get('message', '')[:300]})" if s.get("message") else "")
               for s in sizes if s["status"] != "ok"]
        return (not bad), ("neutralised: ok at " + ",".join(s["size"] for s in sizes) if not bad else "; ".join(bad))
    problems, caught = [], []
    for s in sizes:
        target = expect_size is None or s["size"] == expect_size
        if target:
            if s["status"] == "failed" and s.get("failed_gate") == gate and s.get("error_class") == cls:
                caught.append(s["size"])
            else:
                msg = f" ({s.get('message', '')[:300]})" if s.get("message") else ""
                problems.append(f"{describe_size(s)}, expected {gate}/{cls}{msg}")
        elif s["status"] != "ok":
            problems.append(f"{describe_size(s)}, expected ok (only {expect_size} should fail)")
    if expect_size is not None and expect_size not in [s["size"] for s in sizes]:
        problems.append(f"size {expect_size} was not evaluated")
    if problems:
        return False, "; ".join(problems)
    return True, f"{gate}/{cls} at {','.join(caught)}"


def _against_naive(res: dict, gpu: bool, judge) -> tuple[bool, str, dict, list]:
    """Every size of a run that should pass, against the naive baseline timed in the same run:
    (done, text, speedups, problems). `judge(size, speedup, median_us, naive_us)` returns a
    problem or "". done is True where the run ended before the sizes were judged (an error,
    no compile, no GPU), with text saying so."""
    if "error" in res:
        return True, res["error"], {}, [res["error"]]
    cand = res["json"]["candidate"]
    if not cand["compiled"]:
        why = f"did not compile (stage {cand['compile_stage']}): {cand['compile_message'][-1500:]}"
        return True, why, {}, [why]
    sizes = sizes_of(res)
    if not gpu:
        bad = [describe_size(s) for s in sizes if s["status"] != "no_gpu"]
        return True, ("compiled; runtime needs a GPU" if not bad else "; ".join(bad)), {}, bad
    base = baseline_medians(res)
    problems, speedups = [], {}
    for s in sizes:
        if s["status"] != "ok":
            msg = f" ({s.get('message', '')[:300]})" if s.get("message") else ""
            problems.append(f"{describe_size(s)}, expected ok{msg}")
            continue
        b = base.get(s["size"], 0.0)
        if b <= 0:
            problems.append(f"{s['size']}: the naive baseline did not pass, no speedup to compute")
            continue
        sp = math.inf if s["median_us"] <= 0 else b / s["median_us"]
        speedups[s["size"]] = {"speedup": sp, "median_us": s["median_us"], "naive_us": b, "pct_sol": s.get("pct_sol")}
        why = judge(s["size"], sp, s["median_us"], b)
        if why:
            problems.append(why)
    return False, "", speedups, problems


def check_passed(res: dict, gpu: bool) -> tuple[bool, str, dict]:
    """Undefended run: every size ok and faster than the naive baseline."""
    done, text, speedups, problems = _against_naive(
        res, gpu, lambda size, sp, us, naive: "" if sp > 1.0 else f"{size}: {us:.2f} us vs naive {naive:.2f} us, no fake speedup ({sp:.2f}x)")
    if done:
        return not problems, text, speedups
    if problems:
        return False, "; ".join(problems), speedups
    text = ", ".join(f"{k} {v['speedup']:.2f}x" if math.isfinite(v["speedup"]) else f"{k} inf (0 us)"
                     for k, v in speedups.items())
    return True, f"ok, {text}", speedups


def check_neutralised(res: dict, gpu: bool, max_speedup: float) -> tuple[bool, str, dict]:
    """Partial run of a hack its defence neutralises: every size ok, and no faster than
    max_speedup times the naive baseline timed in the same run (the cheat's gain is gone)."""
    done, text, speedups, problems = _against_naive(
        res, gpu, lambda size, sp, us, naive: "" if sp <= max_speedup else f"{size}: {sp:.2f}x over naive, above {max_speedup}: the cheat still pays")
    if done:
        return not problems, text, speedups
    if problems:
        return False, "; ".join(problems), speedups
    return True, "neutralised: ok, " + ", ".join(f"{k} {v['speedup']:.2f}x" for k, v in speedups.items()), speedups


def check_baseline(res: dict, gpu: bool) -> tuple[bool, str]:
    if "error" in res:
        return False, res["error"]
    cand = res["json"]["candidate"]
    if not cand["compiled"]:
        return False, f"did not compile (stage {cand['compile_stage']}): {cand['compile_message'][-1500:]}"
    want = "ok" if gpu else "no_gpu"
    bad = [describe_size(s) + (f" ({s.get('message', '')[:300]})" if s.get("message") else "")
           for s in sizes_of(res) if s["status"] != want]
    if bad:
        return False, "; ".join(bad)
    if gpu:
        return True, "ok: " + ", ".join(f"{s['size']}{'*' if s['hidden'] else ''} {s['median_us']:.1f} us"
                                        for s in sizes_of(res))
    return True, "compiled; runtime needs a GPU"


# ----------------------------------------------------------------------------------------------

def build_generator(build_dir: Path, work: Path) -> Path:
    """A standalone gen_hardcoded linked against the build's libksol_common.a."""
    lib = build_dir / "libksol_common.a"
    if not lib.exists():
        raise SystemExit(f"cannot build the generator: {lib} not found (pass --build-dir)")
    exe = work / "gen_hardcoded"
    src = HERE / "gen_hardcoded.cpp"
    if exe.exists() and exe.stat().st_mtime > max(src.stat().st_mtime, lib.stat().st_mtime,
                                                  (HERE / "gen_hardcoded.h").stat().st_mtime):
        return exe
    cxx = os.environ.get("CXX", "c++")
    cmd = [cxx, "-std=gnu++20", "-O2", "-DKSOL_HACKS_GEN_MAIN", "-DTOML_HEADER_ONLY=1",
           f"-I{ROOT / 'include'}", f"-I{ROOT / 'src'}", str(src), str(lib), "-lsqlite3", "-ldl", "-pthread",
           "-o", str(exe)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"cannot build the generator:\n{' '.join(cmd)}\n{p.stderr}")
    return exe


def generate(hacks: list[dict], gen_dir: Path, build_dir: Path, work: Path, given: bool) -> None:
    todo = [h for h in hacks if h.get("generate") == "hardcoded"]
    if not todo:
        return
    gen_dir.mkdir(parents=True, exist_ok=True)
    exe = None
    for h in todo:
        out = gen_dir / h["file"]
        if given:
            if not out.exists():
                raise SystemExit(f"--generated {gen_dir}: {out.name} is missing")
            continue
        exe = exe or build_generator(build_dir, work)
        sizes = h["sizes"]
        if len(sizes) != 1:
            raise SystemExit(f"{h['name']}: a generated hack needs exactly one size")
        p = subprocess.run([str(exe), str(HERE / (h["file"] + ".in")), resolve_task(h["task"]), sizes[0], str(out)],
                           capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"{h['name']}: the generator failed:\n{p.stderr}")


def candidate_path(h: dict, gen_dir: Path) -> str:
    return str((gen_dir if h.get("generate") else HERE) / h["file"])


def print_table(rows: list[list[str]]) -> None:
    head = ["hack", "defence", "task/size", "defended", "undefended"]
    w = [len(x) for x in head]
    for r in rows:
        for i, c in enumerate(r):
            w[i] = max(w[i], len(c))
    line = lambda r: "  ".join(c.ljust(w[i]) for i, c in enumerate(r)).rstrip()
    print(line(head))
    print(line(["-" * x for x in w]))
    for r in rows:
        print(line(r))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ksol", default=None, help="the ksol binary (default: build/ksol, or $KSOL_BIN)")
    ap.add_argument("--store", default=None, help="SQLite store for the runs (default: WORK/hacks.db, fresh each time)")
    ap.add_argument("--only", action="append", default=[], help="hack name or number prefix (repeatable, or comma-separated)")
    ap.add_argument("--json-out", default=None, help="write every check and its details as JSON here")
    ap.add_argument("--compile-only", action="store_true", help="only what needs no GPU (exit 0 when it passes)")
    ap.add_argument("--work", default=None, help="scratch folder (default: BUILD/hacks-work)")
    ap.add_argument("--build-dir", default=None, help="build folder with libksol_common.a (default: the folder of --ksol)")
    ap.add_argument("--generated", default=None, help="folder already holding the generated hacks (skips the generator)")
    ap.add_argument("--manifest", default=str(HERE / "hacks.toml"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2, help="parallel evaluations when there is no GPU")
    ap.add_argument("--timeout", type=float, default=300, help="seconds per worker call (ksol eval --timeout)")
    ap.add_argument("--probe-gpu", action="store_true", help="only say whether ksol sees a GPU (exit 0) or not (77)")
    ap.add_argument("--list-generated", action="store_true",
                    help="print the hacks to generate as JSON (template, task_dir, size, file) and exit")
    args = ap.parse_args()

    if args.list_generated:
        out = []
        for h in load_manifest(Path(args.manifest)):
            if h.get("generate") == "hardcoded":
                out.append({"name": h["name"], "template": str(HERE / (h["file"] + ".in")),
                            "task_dir": resolve_task(h["task"]), "size": h["sizes"][0] if h["sizes"] else "",
                            "file": h["file"]})
        print(json.dumps(out))
        return 0

    exe = args.ksol or os.environ.get("KSOL_BIN") or str(ROOT / "build" / "ksol")
    if not Path(exe).exists():
        print(f"error: no ksol binary at {exe} (pass --ksol)", file=sys.stderr)
        return 2
    exe = str(Path(exe).resolve())
    if args.probe_gpu:
        gpu, note = Ksol(exe, "", args.timeout).has_gpu("")
        print(f"GPU: {note}" if gpu else f"no GPU: {note}")
        return 0 if gpu else EXIT_NO_GPU
    build_dir = Path(args.build_dir).resolve() if args.build_dir else Path(exe).parent
    work = Path(args.work).resolve() if args.work else build_dir / "hacks-work"
    work.mkdir(parents=True, exist_ok=True)
    store = args.store
    if store is None:
        store = str(work / "hacks.db")
        for suffix in ("", "-wal", "-shm"):
            Path(store + suffix).unlink(missing_ok=True)
    gen_dir = Path(args.generated).resolve() if args.generated else work / "generated"

    hacks = load_manifest(Path(args.manifest))
    if args.only:
        want = [x.strip() for o in args.only for x in o.split(",") if x.strip()]
        hacks = [h for h in hacks if any(h["name"] == w or h["name"].startswith(w) for w in want)]
        if not hacks:
            print(f"error: --only {','.join(want)} matches no hack", file=sys.stderr)
            return 2
    generate(hacks, gen_dir, build_dir, work, args.generated is not None)

    k = Ksol(exe, store, args.timeout)
    # Also creates the store: several processes creating a fresh one at once can fail to lock it.
    gpu, gpu_note = k.has_gpu()
    if args.compile_only:
        gpu, gpu_note = False, "--compile-only" + (f"; GPU present: {gpu_note}" if gpu else "")
    print(f"ksol: {exe}\nstore: {store}\nGPU: {gpu_note if gpu else 'none (' + gpu_note + ')'}", flush=True)
    if not gpu:
        print("note: the runtime checks (rejection by the correctness and timing gates, the passes with defences off, "
              "the fake speedups) need a GPU; running what needs none: generating, compiling, the static gate.",
              flush=True)

    # The jobs: baselines of every task in use first (they also compile the references), then hacks.
    records: list[dict] = []
    jobs: list[tuple[dict, callable]] = []
    tasks = sorted({h["task"] for h in hacks})
    for t in tasks:
        spec = load_toml(task_toml_path(t))
        for b in spec.get("baseline", []):
            src = str(task_toml_path(t).parent / b["source"])
            rec = {"kind": "baseline", "task": t, "name": f"{t}/{b['name']}"}
            jobs.append((rec, lambda t=t, src=src: check_baseline(k.eval(t, src, [], [], "none"), gpu)))
    hack_jobs: list[tuple[dict, callable]] = []
    for h in hacks:
        cand = candidate_path(h, gen_dir)
        sizes = list(h["sizes"])
        static = h["expect_gate"] == "static"
        es = h.get("expect_size")
        bf = bool(h.get("baselines_first", False))
        rec = {"kind": "defended", "hack": h["name"], "off": []}
        hack_jobs.append((rec, lambda h=h, cand=cand, sizes=sizes, es=es, bf=bf:
                          check_rejected(k.eval(h["task"], cand, sizes, [], "none", bf), h["expect_gate"],
                                         h["expect_class"], es, gpu, h.get("expect_message"))))
        if "partial_off" in h and gpu and h["partial_gate"] == "none":
            rec = {"kind": "partial", "hack": h["name"], "off": list(h["partial_off"])}
            hack_jobs.append((rec, lambda h=h, cand=cand, sizes=sizes, bf=bf:
                              check_neutralised(k.eval(h["task"], cand, sizes, list(h["partial_off"]), "naive", bf), gpu,
                                                float(h["partial_max_speedup"]))))
        elif "partial_off" in h and gpu:
            rec = {"kind": "partial", "hack": h["name"], "off": list(h["partial_off"])}
            hack_jobs.append((rec, lambda h=h, cand=cand, sizes=sizes, es=es, bf=bf:
                              check_rejected(k.eval(h["task"], cand, sizes, list(h["partial_off"]), "none", bf),
                                             h["partial_gate"], h["partial_class"], es, gpu)))
        # Without a GPU the undefended run differs from the defended one only where gate 1 does.
        if gpu or static:
            rec = {"kind": "undefended", "hack": h["name"], "off": list(h["defences_off"])}
            hack_jobs.append((rec, lambda h=h, cand=cand, sizes=sizes, bf=bf:
                              check_passed(k.eval(h["task"], cand, sizes, list(h["defences_off"]), "naive", bf), gpu)))

    def run(job):
        rec, fn = job
        t0 = time.time()
        try:
            res = fn()
        except Exception as e:  # noqa: BLE001 - reported as a failed check
            res = (False, f"{type(e).__name__}: {e}")
        rec["ok"], rec["detail"] = res[0], res[1]
        if len(res) > 2:
            rec["speedups"] = res[2]
        rec["seconds"] = round(time.time() - t0, 1)
        label = rec.get("hack") or rec.get("name")
        off = f" (off: {', '.join(rec['off'])})" if rec.get("off") else ""
        detail = rec["detail"] if not rec["ok"] else rec["detail"].strip().splitlines()[0]
        print(f"  [{'ok' if rec['ok'] else 'FAIL'}] {rec['kind']:<10} {label}{off}: {detail}", flush=True)
        return rec

    t0 = time.time()
    if gpu:
        for j in jobs + hack_jobs:  # one at a time: they share the GPU and time it
            records.append(run(j))
    else:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            records += list(pool.map(run, jobs))  # baselines first: they compile what hacks share
            records += list(pool.map(run, hack_jobs))

    # The table.
    rows = []
    by = {}
    for r in records:
        if "hack" in r:
            by.setdefault(r["hack"], {})[r["kind"]] = r
    def mark(r):  # one line per cell: the full text is in the log above and in --json-out
        text = r["detail"].strip().splitlines()[0] if r["detail"].strip() else ""
        text = text if len(text) <= 110 else text[:107] + "..."
        return ("" if r["ok"] else "FAIL: ") + text
    for h in hacks:
        got = by.get(h["name"], {})
        d = got.get("defended")
        defended = mark(d) if d else "-"
        if "partial" in got:
            p = got["partial"]
            defended += f"; {'+'.join(p['off'])} off: " + mark(p)
        u = got.get("undefended")
        undefended = mark(u) if u else "(same binary as defended; runtime needs a GPU)"
        size = ",".join(h["sizes"]) or "all"
        rows.append([h["name"], f"{h['defence']}", f"{h['task']}/{size}", defended, undefended])
    print()
    print_table(rows)
    print()
    for r in records:
        if r["kind"] == "baseline":
            print(f"baseline {r['name']}: {'' if r['ok'] else 'FAIL: '}{r['detail']}")
    failed = [r for r in records if not r["ok"]]
    print(f"\n{len(records) - len(failed)}/{len(records)} checks passed in {time.time() - t0:.0f} s")
    if args.json_out:
        def clean(x):  # JSON has no infinity: an unmeasurably fast candidate's speedup becomes "inf"
            if isinstance(x, float) and not math.isfinite(x):
                return "inf" if x > 0 else None
            if isinstance(x, dict):
                return {a: clean(b) for a, b in x.items()}
            if isinstance(x, list):
                return [clean(b) for b in x]
            return x
        Path(args.json_out).write_text(json.dumps(clean({"gpu": gpu, "gpu_note": gpu_note, "checks": records}), indent=2))
    if failed:
        return 1
    if not gpu and not args.compile_only:
        print(f"NOTE: no GPU ({gpu_note}): only the compile-time checks ran. The runtime checks — each hack rejected "
              "by its defence and passing with it switched off, with a fake speedup — need a GPU. Exit status 77.")
        return EXIT_NO_GPU
    if not gpu:
        print("compile-only: the runtime checks were not run (they need a GPU).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
