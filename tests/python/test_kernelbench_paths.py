"""scripts/kernelbench_paths.py without a GPU: the table of what its folder holds and, with
--archive, the folder as one .tar.gz (for a machine that returns few files)."""
import json
import os
import subprocess
import sys
import tarfile

from fixtures import ROOT, TempDir

SCRIPT = os.path.join(ROOT, "scripts", "kernelbench_paths.py")


class Archive(TempDir):
    def test_the_folder_as_one_archive(self):
        for level, name in (("level1", "5_Scale.py"), ("level2", "10_Chain.py")):
            os.makedirs(self.path("kb", level), exist_ok=True)
            self.write(os.path.join("kb", level, name), "# a problem file; --table-only reads none\n")
        self.write(os.path.join("out", "level1-5.log"), "a run's log\n")
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--table-only",
                            "--archive", self.path("kb.tgz")], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("level1-5", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith(f"archive: {self.path('kb.tgz')}"), r.stdout)
        with tarfile.open(self.path("kb.tgz")) as tf:
            self.assertEqual(sorted(tf.getnames()), ["out", "out/level1-5.log", "out/summary.txt"])


class Plans(TempDir):
    def test_the_table_gives_the_other_plans_figure(self):
        import json
        for level, name in (("level1", "5_Scale.py"), ("level2", "10_Chain.py"), ("level2", "20_Conv.py")):
            os.makedirs(self.path("kb", level), exist_ok=True)
            self.write(os.path.join("kb", level, name), "# a problem file\n")
        base = {"baseline_us": {"compile": 100.0, "eager": 120.0}, "best_baseline": "compile"}
        items = {
            # the vendor-call plan's stitched module returned, the module's own plan's figure beside it
            "level2-10": dict(base, stop_reason="stitched", use_baseline=False, plan="vendor", speedup_vs_best_baseline=1.25,
                              stitched={"status": "ok", "median_us": 80.0}, own_plan={"answer_us": 95.5}),
            # tried and not returned
            "level2-20": dict(base, stop_reason="not_lowered", use_baseline=True,
                              vendor_plan={"status": "ok", "median_us": 130.25, "kernels": 3,
                                           "kernel_us": [{"name": "cudnn_conv", "calls": 1, "us": 90.0},
                                                         {"name": "direct_model_f32", "calls": 2, "us": 30.5}]},
                              kernels={"compile": 4}, kernel_us={"compile": [{"name": "triton_poi", "calls": 1, "us": 12.25}]}),
            "level1-5": dict(base, stop_reason="not_lowered", use_baseline=True),
        }
        os.makedirs(self.path("out"), exist_ok=True)
        for pid, item in items.items():
            self.write(os.path.join("out", pid + ".json"), json.dumps({"results": [item]}))
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--table-only"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        rows = {l.split()[0]: l for l in r.stdout.splitlines() if l.startswith("level")}
        self.assertIn("stitched-vendor", rows["level2-10"])
        self.assertIn("vendor-call plan returned (own plan 95.50 us)", rows["level2-10"])
        self.assertIn("vendor-call plan 130.25 us, not returned", rows["level2-20"])
        self.assertNotIn("vendor-call plan", rows["level1-5"])
        self.assertIn("the fx path's vendor-call plan (--plan auto): tried on 2, its stitched module the fx answer on 1", r.stdout)
        # Where the profiled modules' time goes: torch.compile's and the vendor-call plan's rows.
        prof = [l.split() for l in r.stdout.splitlines() if l.startswith("  level2-20 ")]
        self.assertEqual([" ".join(l[1:]) for l in prof],
                         ["torch.compile 4 kernels: triton_poi 12.2",
                          "vendor-call plan 3 kernels: cudnn_conv 90.0, direct_model_f32 30.5 x2"])


class Run(TempDir):
    def problems(self, *names):
        """Problem files under kb/ ("level1/5_Scale.py", ...); both levels' folders exist."""
        for level in ("level1", "level2"):
            os.makedirs(self.path("kb", level), exist_ok=True)
        for name in names:
            self.write(os.path.join("kb", name), "# a problem file\n")

    def recording_ksol(self, then=""):
        """A stand-in for ksol that appends the problem file it is given to order.txt, runs `then`
        and writes its --json-out file."""
        fake = self.write("ksol", "#!/bin/sh\necho \"$2\" >> " + self.path("order.txt") + "\n" + then +
                          "for a; do last=$a; done; echo '{\"results\": [{}]}' > \"$last\"\n")
        os.chmod(fake, 0o755)
        return fake

    def ran(self):
        """The problem files the stand-in was given, in order (order.txt read and removed)."""
        with open(self.path("order.txt")) as fh:
            out = [os.path.basename(l.strip()) for l in fh]
        os.remove(self.path("order.txt"))
        return out

    def test_each_problems_log_line_carries_its_seconds(self):
        self.problems("level1/5_Scale.py")
        # A stand-in for ksol: prints two lines, writes the --json-out file, exits 0.
        fake = self.write("ksol", "#!/bin/sh\necho first; sleep 0.3; echo second\n"
                                  "for a; do last=$a; done; echo '{\"ksol\": \"ksol 0.1.0+abc\", \"results\": [{}]}' > \"$last\"\n")
        os.chmod(fake, 0o755)
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--archive", self.path("kb.tgz")], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("level1-5: exit status 0", r.stdout)
        # The KernelBench protocol's summary over what returned, and the binaries that ran.
        self.assertIn("KernelBench's protocol over the returned answers", r.stdout)
        self.assertIn("correct 0 (0.0%)", r.stdout)
        self.assertIn("\nbinaries: ksol 0.1.0+abc\n", r.stdout)
        self.assertTrue(r.stdout.rstrip().endswith(f"archive: {self.path('kb.tgz')}"), r.stdout[-300:])
        with open(self.path("out", "level1-5.log")) as fh:
            lines = fh.read().splitlines()
        self.assertEqual([l.split("s ", 1)[1] for l in lines], ["first", "second"])
        first, second = (float(l.split("s ", 1)[0]) for l in lines)
        self.assertGreaterEqual(second - first, 0.25)
        with tarfile.open(self.path("kb.tgz")) as tf:
            self.assertIn("out/level1-5.json", tf.getnames())
        self.assertFalse(os.path.exists(self.path("kb.tgz.tmp")))

    def test_a_problem_cut_short_before_runs_after_the_others(self):
        self.problems("level1/5_Scale.py", "level1/10_Other.py", "level2/5_Chain.py")
        # level1-5 was cut short by an earlier call's deadline: it runs last, and its marker goes
        # once it finishes.
        self.write(os.path.join("out", "level1-5.cut.json"), '{"cut_after_s": 300}')
        fake = self.recording_ksol()
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["10_Other.py", "5_Chain.py", "5_Scale.py"])
        self.assertFalse(os.path.exists(self.path("out", "level1-5.cut.json")))

    def test_the_further_problems_with_set_all(self):
        # The rule's 40 are every fifth problem; --set all takes every problem of both levels.
        self.problems("level1/5_Scale.py", "level1/7_Other.py", "level2/14_Fold.py")
        fake = self.recording_ksol()
        for chosen, want in (("rule", ["5_Scale.py"]), ("all", ["7_Other.py", "14_Fold.py"])):
            r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out-" + chosen), "--kb", self.path("kb"), "--ksol", fake,
                                "--set", chosen] + (["--only", "level1-7,level2-14"] if chosen == "all" else []),
                               capture_output=True, text=True, timeout=120)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(self.ran(), want, chosen)

    def test_only_runs_its_problems_in_the_order_given(self):
        # The cut one still waits for the end.
        self.problems("level1/5_Scale.py", "level1/10_Other.py", "level2/5_Chain.py")
        self.write(os.path.join("out", "level1-10.cut.json"), '{"cut_after_s": 30}')
        fake = self.recording_ksol()
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--only", "level2-5,level1-10,level1-5,level2-5"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["5_Chain.py", "5_Scale.py", "10_Other.py"])

    def test_no_problem_starts_that_the_deadline_would_cut(self):
        # Each problem takes about 5 s. After the first, the 9 s deadline leaves less than the
        # median of what finished: the next does not start (it would only be cut), though more
        # than --min-left is left. (The first has 3-4 s to spare before the deadline.)
        self.problems("level1/5_Scale.py", "level1/10_Other.py", "level2/5_Chain.py")
        fake = self.recording_ksol(then="sleep 5\n")
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--deadline", "9", "--min-left", "1"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["5_Scale.py"], r.stdout)
        self.assertIn("2 problem(s) not started", r.stdout)
        # The poll that sees a problem end comes once a second: about 5-6 s.
        self.assertRegex(r.stdout, r"level1-10 needs about [56] s \(the median of the 1 problem\(s\) this call finished\)")
        self.assertEqual([f for f in os.listdir(self.path("out")) if f.endswith(".cut.json")], [])

    def test_a_problem_cut_before_waits_for_as_long_as_it_ran(self):
        # An earlier call cut level1-5 after 50 s: with 20 s left it does not start again; the
        # fresh problem, with nothing finished yet to go by, does.
        self.problems("level1/5_Scale.py", "level1/10_Other.py")
        self.write(os.path.join("out", "level1-5.cut.json"), '{"cut_after_s": 50}')
        fake = self.recording_ksol()
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--deadline", "20", "--min-left", "1"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["10_Other.py"], r.stdout)
        self.assertIn("level1-5 needs about 50 s (an earlier call cut it after that long)", r.stdout)
        self.assertTrue(os.path.exists(self.path("out", "level1-5.cut.json")))

    def test_a_problem_run_again_waits_for_as_long_as_it_took_before(self):
        # Each finished problem's result records its wall time; run again (--only), a problem whose
        # earlier run took 50 s does not start with 20 s left, though nothing this call finished
        # says so, while one that took 2 s does.
        self.problems("level1/5_Scale.py", "level1/10_Other.py")
        fake = self.recording_ksol()
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["5_Scale.py", "10_Other.py"])
        for pid in ("level1-5", "level1-10"):
            with open(self.path("out", pid + ".json")) as fh:
                self.assertGreater(json.load(fh)["kbpaths_wall_s"], 0)
        for pid, took in (("level1-5", 50), ("level1-10", 2)):
            with open(self.path("out", pid + ".json")) as fh:
                d = json.load(fh)
            d["kbpaths_wall_s"] = took
            self.write(os.path.join("out", pid + ".json"), json.dumps(d))
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--only", "level1-5,level1-10", "--deadline", "20", "--min-left", "1"],
                           capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ran(), ["10_Other.py"], r.stdout)
        self.assertIn("level1-5 needs about 50 s (an earlier call finished it in that long)", r.stdout)

    def test_the_precision_mode_goes_to_ksol_and_one_folder_holds_one_mode(self):
        # Each problem's ksol optimize gets --precision; a folder whose results were made under
        # another mode is refused before anything runs.
        self.problems("level1/5_Scale.py", "level1/10_Other.py")
        fake = self.write("ksol", "#!/bin/sh\necho \"$@\" >> " + self.path("args.txt") + "\n"
                          "for a; do last=$a; done; echo '{\"results\": [{}], \"precision\": {\"mode\": \"strict\"}}' > \"$last\"\n")
        os.chmod(fake, 0o755)
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--precision", "strict", "--only", "level1-5"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("args.txt")) as fh:
            args = fh.read()
        self.assertIn("--precision strict", args)
        self.assertIn("--path best", args)
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--only", "level1-10"], capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("holds results made under another precision than --precision default (level1-5: strict)", r.stderr)
        # A timeout recorded under another mode counts too.
        os.remove(self.path("out", "level1-5.json"))
        self.write(os.path.join("out", "level1-5.timeout.json"), '{"timeout_s": 9, "precision": {"mode": "strict"}}')
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--only", "level1-10"], capture_output=True, text=True, timeout=120)
        self.assertNotEqual(r.returncode, 0, r.stdout)
        self.assertIn("(level1-5: strict)", r.stderr)

    def test_path_fx_runs_the_fx_lowering_alone(self):
        # --path fx goes to each ksol optimize; the table then shows the Inductor path as not run.
        self.problems("level1/5_Scale.py")
        fake = self.write("ksol", "#!/bin/sh\necho \"$@\" >> " + self.path("args.txt") + "\n"
                          "for a; do last=$a; done; echo '{\"results\": [{}]}' > \"$last\"\n")
        os.chmod(fake, 0o755)
        r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                            "--path", "fx"], capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.path("args.txt")) as fh:
            self.assertIn("--path fx", fh.read())
        self.assertRegex(r.stdout, r"level1-5 .* inductor: not run")

    def test_an_only_id_that_names_no_problem_is_an_error(self):
        # level1-7 is a further problem (not every fifth): without --set all it is no problem of the
        # run, and a misspelt id is none of either set; nothing runs.
        self.problems("level1/5_Scale.py", "level1/7_Other.py")
        fake = self.recording_ksol()
        for only in ("level1-7", "level1-5,levl1-5"):
            r = subprocess.run([sys.executable, SCRIPT, "--out", self.path("out"), "--kb", self.path("kb"), "--ksol", fake,
                                "--only", only], capture_output=True, text=True, timeout=120)
            self.assertNotEqual(r.returncode, 0, r.stdout)
            self.assertIn("error: --only names " + only.split(",")[-1] + ", not among the 1 problems of --set rule", r.stderr)
            self.assertFalse(os.path.exists(self.path("order.txt")))
