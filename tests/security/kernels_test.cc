// Hostile code in a code-interpreter kernel (issue 24): a kernel is a
// process of the sandbox like any exec, so code sent to /code must meet
// the same walls. From inside a Python, JavaScript and bash kernel it looks
// for hutchd, the host, a neighbour sandbox and privilege, and every look
// must come back empty. Needs the code-interpreter template that
// code_api_test builds (the code_template fixture); skipped without it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <string>

#include "common/clock.h"
#include "tests/support/code_run.h"
#include "tests/support/test_server.h"

namespace hutch::testing {
namespace {

using nlohmann::json;

class KernelEscape : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    token_ = RandomHex(8);
    // No warm pool: these tests want the plain v1 create (network none).
    server_ = std::make_unique<TestServer>(std::vector<std::string>{"--warm-pool", "none"});
    if (!server_->ok()) return;
    auto t = server_->Client().Request("GET", "/v1/templates/code-interpreter");
    if (t.status != 200) return;
    auto cr =
        server_->Client().Json("POST", "/v1/sandboxes", json{{"template", "code-interpreter"}});
    if (cr.status != 201) return;
    id_ = cr.json()["id"];
    // A neighbour with a file and a process that carry the token.
    auto nb = server_->Client().Json("POST", "/v1/sandboxes", json{{"template", "base"}});
    if (nb.status != 201) return;
    neighbour_ = nb.json()["id"];
    server_->Client().Json("POST", "/v1/sandboxes/" + neighbour_ + "/exec",
                           json{{"cmd", "echo secret > /tmp/nb-" + token_}});
    server_->Client().Json("POST", "/v1/sandboxes/" + neighbour_ + "/processes",
                           json{{"argv", {"/bin/sh", "-c", "sleep 3600; : nbproc-" + token_}}});
    host_marker_ = "/tmp/hutch-kernel-host-" + token_;
    std::ofstream(host_marker_) << "host only\n";
  }
  static void TearDownTestSuite() {
    unlink(host_marker_.c_str());
    server_.reset();
  }
  void SetUp() override {
    ASSERT_TRUE(server_ && server_->ok());
    if (id_.empty()) GTEST_SKIP() << "no code-interpreter template (run code_api_test first)";
    ASSERT_FALSE(neighbour_.empty());
  }
  // What the code printed; fails the test on an error the code did not expect.
  static std::string Run(const std::string& code, const std::string& language = "python") {
    auto r = RunCode(*server_, id_, {{"code", code}, {"language", language}});
    EXPECT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(r.Error().is_null()) << r.Error().dump() << r.Out("stderr");
    return r.Out();
  }

  static inline std::unique_ptr<TestServer> server_;
  static inline std::string id_, neighbour_, token_, host_marker_;
};

TEST_F(KernelEscape, TheKernelSeesOnlyItsOwnSandboxsProcesses) {
  // hutchd, the host's processes and the neighbour's sleep are all out of
  // its pid namespace; what it sees is a handful of its sandbox's own.
  const std::string out =
      Run("import os\n"
          "procs = {}\n"
          "for p in os.listdir('/proc'):\n"
          "    if p.isdigit():\n"
          "        try:\n"
          "            procs[p] = open(f'/proc/{p}/cmdline', 'rb').read().replace(b'\\0', b' ')\n"
          "        except OSError:\n"
          "            pass\n"
          "blob = b'\\n'.join(procs.values())\n"
          "print(str(os.getpid()) in procs, b'hutchd' in blob, b'nbproc-" +
          token_ + "' in blob, len(procs) < 40)");
  // (Its own pid listed: the scan works.)
  EXPECT_EQ(out, "True False False True\n");
}

TEST_F(KernelEscape, TheKernelSeesNoHostOrNeighbourFiles) {
  const std::string out = Run("import os\nopen('/tmp/own-" + token_ + "', 'w').write('x')\n" +
                              "print(os.path.exists('/tmp/own-" + token_ + "'), os.path.exists('" +
                              host_marker_ + "'), os.path.exists('/tmp/nb-" + token_ +
                              "'), os.path.exists('" + server_->state_dir() + "'))");
  // (Its own file is there: the look works.)
  EXPECT_EQ(out, "True False False False\n");
  // JavaScript's kernel is another process of the same sandbox.
  EXPECT_EQ(
      Run("const fs = require('fs');\n"
          "console.log(fs.existsSync('" +
              host_marker_ + "'), fs.existsSync('" + server_->state_dir() + "'), process.getuid())",
          "javascript"),
      "false false 1000\n");
}

TEST_F(KernelEscape, TheKernelHasNoPrivilegeToGainOrLend) {
  const std::string out = Run(
      "import ctypes, os\n"
      "st = dict(l.split(':', 1) for l in open('/proc/self/status').read().splitlines() if ':' in "
      "l)\n"
      "print(st['Uid'].split()[0], int(st['CapEff'].strip(), 16), st['NoNewPrivs'].strip(), "
      "st['Seccomp'].strip())\n"
      "try:\n"
      "    os.setuid(0); print('setuid ok')\n"
      "except PermissionError:\n"
      "    print('setuid refused')\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "print('mount', libc.mount(b'none', b'/tmp', b'tmpfs', 0, None))\n"
      "PTRACE_ATTACH = 16\n"
      "print('ptrace', libc.ptrace(PTRACE_ATTACH, 1, None, None))\n");
  EXPECT_EQ(out, "1000 0 1 2\nsetuid refused\nmount -1\nptrace -1\n");
  // The agent's environment and memory stay the agent's.
  EXPECT_EQ(Run("cat /proc/1/environ >/dev/null 2>&1 && echo READ || echo DENIED\n"
                "head -c1 /proc/1/mem >/dev/null 2>&1 && echo READ || echo DENIED",
                "bash"),
            "DENIED\nDENIED\n");
}

TEST_F(KernelEscape, TheKernelCannotReachHutchdOrTheHypervisor) {
  // Network mode none: its loopback is its own, so hutchd's port there is
  // nobody's; vsock (the host's hypervisor) is refused as a family.
  const std::string out =
      Run("import socket\n"
          "try:\n"
          "    socket.create_connection(('127.0.0.1', " +
          std::to_string(server_->port()) +
          "), timeout=2); print('connected')\n"
          "except OSError as e:\n"
          "    print('refused')\n"
          "try:\n"
          "    socket.socket(getattr(socket, 'AF_VSOCK', 40), socket.SOCK_STREAM); print('vsock')\n"
          "except OSError:\n"
          "    print('no vsock')\n");
  EXPECT_EQ(out, "refused\nno vsock\n");
}

}  // namespace
}  // namespace hutch::testing
