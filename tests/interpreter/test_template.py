"""templates/code-interpreter.toml ships the whole server and starts it on 49999."""

import os
import tomllib
import unittest

from code_server import SOURCE_DIR

SPEC = os.path.join(SOURCE_DIR, "templates", "code-interpreter.toml")
SERVER_DIR = os.path.join(SOURCE_DIR, "src", "interpreter")
DEST = "/opt/hutch/code-interpreter/"
# The keys the template parser accepts (src/core/template_spec.cc refuses others).
KEYS = {"name", "from", "packages", "files", "run", "user", "workdir", "start", "ready",
        "ready_timeout_seconds", "description", "env"}


class TemplateTest(unittest.TestCase):
    def setUp(self):
        with open(SPEC, "rb") as f:
            self.spec = tomllib.load(f)

    def test_only_known_keys(self):
        self.assertLessEqual(set(self.spec), KEYS)
        for f in self.spec["files"]:
            self.assertLessEqual(set(f), {"dest", "src", "content", "content_b64", "mode", "owner"})

    def test_every_server_file_is_copied_in(self):
        shipped = {f["dest"]: f["src"] for f in self.spec["files"]}
        for name in os.listdir(SERVER_DIR):
            if name.endswith((".py", ".js")):
                self.assertEqual(shipped.get(DEST + name), "../src/interpreter/" + name, name)
        for src in shipped.values():
            self.assertTrue(os.path.isfile(os.path.join(os.path.dirname(SPEC), src)), src)

    def test_starts_the_server_on_49999_and_waits_for_health(self):
        self.assertIn(DEST + "hutch_code_server.py", self.spec["start"])
        self.assertIn("--port 49999", self.spec["start"])
        self.assertIn("49999/health", self.spec["ready"])

    def test_kernel_packages_are_debian_packages(self):
        # (numpy and pandas come with the parent template, python)
        for p in ("python3-ipykernel", "python3-jupyter-client", "python3-matplotlib",
                  "python3-scipy", "python3-pil", "nodejs", "node-typescript"):
            self.assertIn(p, self.spec["packages"])


if __name__ == "__main__":
    unittest.main()
