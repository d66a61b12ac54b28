// Design item 1 (security-and-reliability.md): kernel interfaces. Root in a
// sandbox writes the host kernel's knobs, overwrites the executable of the
// one host-side process it can see (hutch-agent, its PID 1), and looks for
// a host fd leaked into it. Every attempt must fail, and where the host
// could have changed the test reads the host's value back.
//
// With the vm driver (HUTCH_TEST_DRIVER=vm) these interfaces are the guest
// kernel's own: root in the guest may write its core_pattern, its sysrq
// trigger and its /sys, and that is no escape. There each test proves the
// VM's boundary instead: the write lands in the guest kernel (read back
// inside, or seen on the guest's console) and the host's value, read back
// on the host, is unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <set>
#include <sstream>
#include <string>

#include "tests/support/host_probe.h"
#include "tests/support/shared_server.h"

using namespace std::string_literals;
using hutch::testing::HostSh;
using hutch::testing::OnVm;
using hutch::testing::StdoutOf;
using hutch::testing::probe::ReadFile;

namespace {

class Escape : public hutch::testing::SharedServerTest {
 protected:
  // Writes a core_pattern-style payload to `path` from inside; returns what
  // the shell reported (WROTE or FAILED).
  static std::string TryWrite(const std::string& path) {
    return Sh("if printf '%s\\n' '|/tmp/pwn %p' > "s + path +
              "; then echo WROTE; else echo FAILED; fi");
  }
  // On vm: the guest kernel takes the write (it is the sandbox's own), the
  // guest reads back what it wrote, and the host's file keeps its value.
  static void ExpectGuestOnlyWrite(const std::string& path) {
    const std::string host = ReadFile(path);
    EXPECT_EQ(TryWrite(path), "WROTE\n") << path << ": the guest kernel refused its own root";
    EXPECT_EQ(Sh("cat " + path), "|/tmp/pwn %p\n") << path;
    EXPECT_EQ(ReadFile(path), host) << path << ": the host's value changed";
  }
  // The guest's console log, as QEMU wrote it into the sandbox's dir.
  static std::string GuestConsole() {
    return ReadFile(server().state_dir() + "/state/vm/sandboxes/" + sandbox() + "/console.log");
  }
};

}  // namespace

TEST_F(Escape, ProcSysCorePatternIsNotWritable) {
  if (OnVm()) {
    ExpectGuestOnlyWrite("/proc/sys/kernel/core_pattern");
    // A crashing process in the guest runs nothing on the host: the host's
    // pattern is not the guest's, and the guest's kernel is not the host's.
    EXPECT_NE(Sh("cat /proc/sys/kernel/random/boot_id"),
              ReadFile("/proc/sys/kernel/random/boot_id"));
    Exec("echo core > /proc/sys/kernel/core_pattern");
    return;
  }
  const std::string host = ReadFile("/proc/sys/kernel/core_pattern");
  EXPECT_EQ(TryWrite("/proc/sys/kernel/core_pattern"), "FAILED\n");
  // Not even through a fresh fd with O_TRUNC, and /proc/sys is read-only.
  EXPECT_EQ(Sh("grep -E ' /proc/sys ro,' /proc/self/mountinfo | wc -l"), "1\n");
  EXPECT_EQ(ReadFile("/proc/sys/kernel/core_pattern"), host);
  EXPECT_EQ(Sh("cat /proc/sys/kernel/core_pattern"), host);
}

TEST_F(Escape, ProcSysModprobeIsNotWritable) {
  if (OnVm()) {
    ExpectGuestOnlyWrite("/proc/sys/kernel/modprobe");
    // The guest's hostname is its own: the host's stays.
    const std::string host_name = ReadFile("/proc/sys/kernel/hostname");
    EXPECT_EQ(Sh("echo guest-renamed > /proc/sys/kernel/hostname && hostname"), "guest-renamed\n");
    EXPECT_EQ(ReadFile("/proc/sys/kernel/hostname"), host_name);
    Exec("hostname " + sandbox());
    return;
  }
  // The file exists only with CONFIG_MODULES; the write must fail either way.
  const std::string host = ReadFile("/proc/sys/kernel/modprobe");
  EXPECT_EQ(TryWrite("/proc/sys/kernel/modprobe"), "FAILED\n");
  EXPECT_EQ(ReadFile("/proc/sys/kernel/modprobe"), host);
  // Other sysctls the same: the host's hostname and page cache.
  EXPECT_EQ(TryWrite("/proc/sys/kernel/hostname"), "FAILED\n");
  EXPECT_EQ(TryWrite("/proc/sys/vm/drop_caches"), "FAILED\n");
}

TEST_F(Escape, ProcSysrqTriggerIsNotWritable) {
  if (OnVm()) {
    // `h` (help) is the one harmless key: the guest kernel answers it on
    // its console, which QEMU writes to the sandbox's console.log, and the
    // host's kernel log never sees it.
    const std::string host_log = HostSh("dmesg 2>/dev/null | grep -c 'sysrq: HELP'");
    EXPECT_EQ(Sh("echo h > /proc/sysrq-trigger && echo WROTE"), "WROTE\n");
    bool seen = false;
    for (int i = 0; i < 100 && !seen; ++i) {
      seen = GuestConsole().find("sysrq: HELP") != std::string::npos;
      if (!seen) usleep(50000);
    }
    EXPECT_TRUE(seen) << "the guest's sysrq answer is not on its console: " << GuestConsole();
    EXPECT_EQ(HostSh("dmesg 2>/dev/null | grep -c 'sysrq: HELP'"), host_log)
        << "the host's kernel took the key";
    EXPECT_EQ(Sh("echo alive"), "alive\n");
    return;
  }
  EXPECT_EQ(TryWrite("/proc/sysrq-trigger"), "FAILED\n");
  // Other host-kernel views are masked: they read empty.
  EXPECT_EQ(Sh("for f in /proc/kcore /proc/kmsg /proc/kallsyms /proc/timer_list /proc/keys; do "
               "head -c 64 $f 2>/dev/null; done | wc -c"),
            "0\n");
  EXPECT_EQ(Sh("find /proc/acpi /proc/scsi /proc/driver -mindepth 1 2>/dev/null | wc -l"), "0\n");
}

TEST_F(Escape, SysIsEmptyAndReadOnly) {
  if (OnVm()) {
    // The guest's /sys is its own machine's: two virtio disks, no network
    // device but loopback, none of the host's. What root writes there
    // reaches the guest kernel only; the host's knob keeps its value.
    EXPECT_EQ(Sh("ls /sys/block"), "vda\nvdb\n");
    EXPECT_EQ(Sh("ls /sys/class/net"), "lo\n");
    const std::string host_helper = ReadFile("/sys/kernel/uevent_helper");
    Exec("printf '%s' /tmp/pwn > /sys/kernel/uevent_helper");
    EXPECT_EQ(ReadFile("/sys/kernel/uevent_helper"), host_helper);
    Exec("printf '' > /sys/kernel/uevent_helper");
    return;
  }
  for (const char* f :
       {"/sys/kernel/uevent_helper", "/sys/fs/cgroup/x", "/sys/x", "/sys/power/state"})
    EXPECT_EQ(TryWrite(f), "FAILED\n") << f;
  EXPECT_EQ(Sh("mkdir /sys/d 2>/dev/null; echo rc=$?; ls -A /sys | wc -l"), "rc=1\n0\n");
  EXPECT_EQ(Sh("grep -E ' /sys ro,' /proc/self/mountinfo | wc -l"), "1\n");
  // Remounting it writable is a mount: denied.
  EXPECT_EQ(Sh("mount -o remount,rw /sys 2>/dev/null; echo rc=$?"), "rc=32\n");
}

TEST_F(Escape, HostSideProcessExeIsNotWritable) {
  // hutchd and every other host process are invisible (Neighbour suite);
  // the one process inside that came from the host is hutch-agent, PID 1,
  // executed from a sealed memfd.
  const char* agent_bin = getenv("HUTCH_AGENT_BIN");
  const std::string hash_before = agent_bin ? HostSh("sha256sum "s + agent_bin) : "";
  auto r = Exec(
      "if echo x > /proc/1/exe; then echo WROTE; else echo FAILED; fi; "
      "if cp /bin/sh /proc/1/exe; then echo WROTE; else echo FAILED; fi; "
      "python3 -c \"\n"
      "import os\n"
      "for flags in (os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC):\n"
      "  try:\n"
      "    fd = os.open('/proc/1/exe', flags); os.write(fd, b'x'); print('WROTE')\n"
      "  except OSError as e:\n"
      "    print('FAILED', e.errno)\n"
      "\"; readlink /proc/1/exe || echo NO-EXE-LINK; ls /proc/1/fd/4/ 2>/dev/null || echo "
      "NO-LAYER-FD");
  const std::string out = StdoutOf(r);
  EXPECT_EQ(out.find("WROTE"), std::string::npos) << out;
  std::istringstream in(out);
  std::string line;
  int failed = 0;
  while (std::getline(in, line))
    if (line.rfind("FAILED", 0) == 0) ++failed;
  EXPECT_EQ(failed, 5) << r.dump();
  if (OnVm()) {
    // In a VM nothing inside came from a host process: PID 1 is the
    // guest's copy of hutch-agent, run from the initramfs (busy text, so
    // the writes fail), and no host path exists in the guest.
    EXPECT_EQ(out.find(server().state_dir()), std::string::npos) << out;
    EXPECT_EQ(Sh("readlink /proc/1/exe"), "/hutch-agent\n");
  } else {
    // The agent is non-dumpable: its exe link and its fds (fd 4 is the
    // sandbox's writable layer, kept for snapshots) are out of reach.
    EXPECT_TRUE(out.find("memfd:") != std::string::npos ||
                out.find("NO-EXE-LINK") != std::string::npos)
        << out;
    EXPECT_NE(out.find("NO-LAYER-FD"), std::string::npos) << out;
  }
  EXPECT_EQ(Sh("echo still"), "still\n");
  if (agent_bin) {
    EXPECT_EQ(HostSh("sha256sum "s + agent_bin), hash_before);
  }
}

TEST_F(Escape, NoHostFdLeaksIntoTheSandbox) {
  // A command sees 0, 1, 2 and the one fd `ls` opened on the directory;
  // only stdin (/dev/null) and that directory are paths, the rest pipes.
  for (const char* via : {"exec", "process"}) {
    std::string out;
    const std::string cmd = "ls /proc/self/fd; echo ---; ls -l /proc/self/fd | grep -c -- '-> /'";
    if (std::string(via) == "exec") {
      out = Sh(cmd);
    } else {
      // A background process (the processes API): same promise.
      auto c = server().Client();
      auto p = c.Json("POST", "/v1/sandboxes/" + sandbox() + "/processes",
                      {{"cmd", "{ " + cmd + "; } > /tmp/fds.txt"}});
      ASSERT_EQ(p.status, 201) << p.body;
      for (int i = 0; i < 100; ++i) {
        out = Sh("cat /tmp/fds.txt 2>/dev/null");
        size_t sep = out.find("---\n");
        if (sep != std::string::npos && out.size() > sep + 4 && out.back() == '\n') break;
        usleep(50000);
      }
    }
    ASSERT_NE(out.find("---"), std::string::npos) << via << ": " << out;
    std::istringstream in(out.substr(0, out.find("---")));
    std::set<int> fds;
    int fd;
    while (in >> fd) fds.insert(fd);
    EXPECT_EQ(fds, (std::set<int>{0, 1, 2, 3})) << via << ": " << out;
    // Through exec, stdin is /dev/null; a background process's is a pipe.
    EXPECT_EQ(out.substr(out.find("---") + 4), std::string(via) == "exec" ? "2\n" : "1\n")
        << via << ": " << out;
  }
  // Nothing inside names a host path: every open fd of every process the
  // sandbox can see points at a pipe, a socket, /dev or a sandbox path.
  // (The agent's own fds are hidden: it is non-dumpable.)
  const std::string state = server().state_dir();
  auto all =
      Sh("for p in /proc/[0-9]*; do ls -l $p/fd 2>/dev/null; done | grep -- '->' | sed 's/.*-> //' "
         "| sort -u");
  EXPECT_EQ(all.find(state), std::string::npos) << all;
  EXPECT_EQ(all.find("hutchd"), std::string::npos) << all;
}
