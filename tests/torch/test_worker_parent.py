"""Workers end when their coordinator is killed outright (SIGKILL) while they are busy: the Python
worker (worker.exit_with_parent) and ksol-worker both watch their parent. A shell stands in for
ksol: it starts the worker with a pipe the test holds open (no end of input reaches the worker),
and is then killed; the worker must be gone within a few seconds. CPU only.
Run: PYTHONPATH=python:tests/torch python3 -m unittest test_worker_parent"""
import os
import signal
import subprocess
import sys
import time
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class ParentWatch(unittest.TestCase):
    def orphaned(self, worker_cmd: str):
        # The shell prints the worker's pid, then waits; stdin stays open on the test's side.
        sh = subprocess.Popen(["sh", "-c", f"exec 3<&0; {worker_cmd} <&3 & echo $!; exec sleep 120"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
        try:
            pid = int(sh.stdout.readline())
            time.sleep(2.5)  # the worker is up (and, for Python, torch imported) and idle on its input
            self.assertTrue(alive(pid), "the worker died on its own")
            os.kill(sh.pid, signal.SIGKILL)
            sh.wait()
            deadline = time.time() + 15
            while alive(pid) and time.time() < deadline:
                time.sleep(0.2)
            self.assertFalse(alive(pid), "the worker outlived its parent")
        finally:
            try:
                os.killpg(sh.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            sh.stdin.close()

    def test_the_python_worker_ends_with_its_parent(self):
        env = f"PYTHONPATH={os.path.join(ROOT, 'python')}"
        self.orphaned(f"{env} {sys.executable} -c 'from ksol_torch import worker; worker.exit_with_parent(0.2); "
                      f"import time; time.sleep(120)'")

    @unittest.skipUnless(os.path.exists(os.path.join(ROOT, "build", "ksol-worker")), "ksol-worker is not built (build/)")
    def test_ksol_worker_ends_with_its_parent(self):
        self.orphaned(os.path.join(ROOT, "build", "ksol-worker"))


if __name__ == "__main__":
    unittest.main()
