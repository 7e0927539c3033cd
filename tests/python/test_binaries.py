"""Finding ksol and ksol-worker (python/ksol/binaries.py): KSOL_HOME, the source tree, PATH,
KSOL_WORKER, and the error that says how to build them. No PyTorch needed."""
import os

import ksol
from fixtures import TempDir
from ksol.binaries import find_binaries

EXE = 0o755


class FindBinaries(TempDir):
    def pair(self, folder, worker=True):
        ksol_path = self.write(os.path.join(folder, "ksol"), "#!/bin/sh\n", EXE)
        if worker:
            self.write(os.path.join(folder, "ksol-worker"), "#!/bin/sh\n", EXE)
        return ksol_path

    def test_ksol_home_build_comes_first(self):
        k = self.pair("home/build")
        self.pair("bin")
        b = find_binaries(env={"KSOL_HOME": self.path("home"), "PATH": self.path("bin")}, tree=None)
        self.assertEqual((b.ksol, b.worker, b.found_by), (k, self.path("home/build/ksol-worker"), "KSOL_HOME"))

    def test_binaries_carried_to_a_gpu_host(self):
        k = self.pair("home/.carry/bin")
        self.assertEqual(find_binaries(env={"KSOL_HOME": self.path("home")}, tree=None).ksol, k)

    def test_the_source_trees_build_folder(self):
        k = self.pair("tree/build")
        b = find_binaries(env={}, tree=self.path("tree"))
        self.assertEqual((b.ksol, b.found_by), (k, "source tree"))

    def test_path(self):
        k = self.pair("bin")
        b = find_binaries(env={"PATH": self.path("bin")}, tree=None)
        self.assertEqual((b.ksol, b.found_by), (k, "PATH"))

    def test_an_explicit_path_wins(self):
        k = self.pair("mine")
        self.pair("bin")
        self.assertEqual(find_binaries(k, env={"PATH": self.path("bin")}, tree=None).found_by, "ksol_bin")

    def test_ksol_worker_from_the_environment(self):
        k = self.pair("bin", worker=False)
        w = self.write("elsewhere/my-worker", "#!/bin/sh\n", EXE)
        b = find_binaries(env={"PATH": self.path("bin"), "KSOL_WORKER": w}, tree=None)
        self.assertEqual((b.ksol, b.worker), (k, w))

    def test_ksol_without_its_worker_is_passed_over_and_named(self):
        self.pair("home/build", worker=False)
        k = self.pair("bin")
        self.assertEqual(find_binaries(env={"KSOL_HOME": self.path("home"), "PATH": self.path("bin")}, tree=None).ksol, k)
        with self.assertRaises(ksol.BinaryNotFoundError) as c:
            find_binaries(env={"KSOL_HOME": self.path("home")}, tree=None)
        self.assertIn(f"{self.path('home/build/ksol')} (KSOL_HOME): found, but not ksol-worker at "
                      f"{self.path('home/build/ksol-worker')}", str(c.exception))

    def test_a_file_that_is_not_executable_is_not_ksol(self):
        self.write("bin/ksol", "#!/bin/sh\n", 0o644)
        self.write("bin/ksol-worker", "#!/bin/sh\n", EXE)
        with self.assertRaises(ksol.BinaryNotFoundError):
            find_binaries(env={"PATH": self.path("bin")}, tree=None)

    def test_nothing_found_says_where_it_looked_and_how_to_build(self):
        with self.assertRaises(ksol.BinaryNotFoundError) as c:
            find_binaries(env={"KSOL_HOME": self.path("home"), "PATH": self.path("empty")}, tree=None)
        e = c.exception
        self.assertIsInstance(e, ksol.KsolError)
        self.assertIsInstance(e, FileNotFoundError)
        self.assertEqual(e.tried, [f"{self.path('home/build/ksol')} (KSOL_HOME): no such executable",
                                   f"{self.path('home/.carry/bin/ksol')} (KSOL_HOME): no such executable",
                                   "PATH: no ksol on it"])
        self.assertIn("./setup.sh", str(e))
        self.assertIn("cmake --build build", str(e))
        self.assertIn("set KSOL_HOME to that tree or put its build/ folder on PATH", str(e))

    def test_this_trees_build_when_it_has_one(self):
        tree = ksol.binaries.source_tree()
        self.assertIsNotNone(tree, "the package's tests run from the ksol tree")
        if not os.path.exists(os.path.join(tree, "build", "ksol")):
            self.skipTest("the tree has no build/ksol: ./setup.sh builds it")
        self.assertEqual(find_binaries(env={}).ksol, os.path.join(tree, "build", "ksol"))
