"""The stubs kept in augur_client/ are what generate.py makes from proto/augur/v1/augur.proto."""

import importlib.util
import os
import pathlib
import unittest

import support  # noqa: F401 - the package from this source tree

HERE = pathlib.Path(__file__).resolve().parent


def load_generate():
    spec = importlib.util.spec_from_file_location("generate", HERE.parent / "generate.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Stubs(unittest.TestCase):
    def test_the_kept_stubs_are_current(self):
        try:
            import grpc_tools  # noqa: F401
        except ImportError:
            if os.environ.get("AUGUR_REQUIRE_PYTHON"):
                self.fail("grpcio-tools is not installed (clients/python/requirements.txt)")
            self.skipTest("grpcio-tools is not installed (clients/python/requirements.txt)")
        stale = load_generate().stale()
        self.assertEqual(
            stale, [], "out of date with proto/augur/v1/augur.proto: run "
            "python3 clients/python/generate.py (with the requirements.txt grpcio-tools)"
        )


if __name__ == "__main__":
    unittest.main()
