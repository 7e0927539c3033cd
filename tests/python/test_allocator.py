"""The CUDA allocator setting of ksol's own PyTorch processes (ksol_torch/allocator.py): set
where the installed PyTorch takes it, never over the user's own, not for PyTorch before 2.1."""
import unittest
from unittest import mock

from ksol_torch import allocator


class AllocatorDefault(unittest.TestCase):
    def set_with(self, version, env):
        with mock.patch.object(allocator.metadata, "version", lambda name: version):
            return allocator.set_default(env)

    def test_growable_segments_from_pytorch_2_1(self):
        for v in ("2.1.0", "2.11.0+cu130", "3.0"):
            env = {}
            self.assertTrue(self.set_with(v, env), v)
            self.assertEqual(env, {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})

    def test_older_pytorch_and_a_users_value_are_left_alone(self):
        for v in ("1.13.0a0", "2.0.1"):
            env = {}
            self.assertFalse(self.set_with(v, env), v)
            self.assertEqual(env, {})
        env = {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"}
        self.assertFalse(self.set_with("2.11.0", env))
        self.assertEqual(env, {"PYTORCH_CUDA_ALLOC_CONF": "max_split_size_mb:128"})

    def test_no_pytorch_installed(self):
        def missing(name):
            raise allocator.metadata.PackageNotFoundError(name)

        env = {}
        with mock.patch.object(allocator.metadata, "version", missing):
            self.assertFalse(allocator.set_default(env))
        self.assertEqual(env, {})


if __name__ == "__main__":
    unittest.main()
