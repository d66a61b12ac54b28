// Copy steps (core/build_copy.h): tar uploads (plain and gzip) read into
// entries, archives leaving their root refused, Docker's COPY rules for
// where a file, a directory and a glob land, owners resolved from a
// root's account files, and build paths made absolute.
#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>

#include <map>

#include "core/build_copy.h"

using namespace hutch;

namespace {

// A tar archive (gzip when asked) of path -> content ("/"-ended: a directory).
std::string MakeTar(const std::vector<std::pair<std::string, std::string>>& files, bool gzip) {
  std::vector<char> buf(1 << 20);
  size_t used = 0;
  struct archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (gzip) archive_write_add_filter_gzip(a);
  archive_write_open_memory(a, buf.data(), buf.size(), &used);
  for (const auto& [path, content] : files) {
    struct archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, path.c_str());
    const bool dir = !path.empty() && path.back() == '/';
    archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
    archive_entry_set_perm(e, dir ? 0755 : 0640);
    archive_entry_set_size(e, dir ? 0 : static_cast<la_int64_t>(content.size()));
    archive_write_header(a, e);
    if (!dir) archive_write_data(a, content.data(), content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return std::string(buf.data(), used);
}

std::map<std::string, std::string> Where(const std::vector<ArchiveEntry>& entries,
                                         const std::string& src, const std::string& dest) {
  auto plan = PlanCopy(entries, src, dest);
  EXPECT_TRUE(plan.ok()) << plan.error().message;
  std::map<std::string, std::string> out;
  if (plan.ok())
    for (const auto& t : *plan) out[t.dest] = t.entry->path;
  return out;
}

}  // namespace

TEST(BuildCopy, ReadsPlainAndGzipTars) {
  for (bool gzip : {false, true}) {
    const std::string tar = MakeTar({{"./app/", ""}, {"./app/main.py", "print(1)\n"}}, gzip);
    auto e = ReadTarArchive(tar, 1 << 20);
    ASSERT_TRUE(e.ok()) << e.error().message;
    ASSERT_EQ(e->size(), 2u);
    EXPECT_EQ((*e)[0].path, "app");
    EXPECT_EQ((*e)[0].type, ArchiveEntry::Type::kDir);
    EXPECT_EQ((*e)[1].path, "app/main.py");
    EXPECT_EQ((*e)[1].data, "print(1)\n");
    EXPECT_EQ((*e)[1].mode, 0640u);
  }
}

TEST(BuildCopy, RefusesEscapesOversizeAndNonArchives) {
  auto esc = ReadTarArchive(MakeTar({{"../etc/passwd", "x"}}, false), 1 << 20);
  ASSERT_FALSE(esc.ok());
  EXPECT_NE(esc.error().message.find("outside of it"), std::string::npos);
  auto abs = ReadTarArchive(MakeTar({{"/etc/passwd", "x"}}, false), 1 << 20);
  EXPECT_FALSE(abs.ok());
  auto big = ReadTarArchive(MakeTar({{"a", std::string(2048, 'a')}}, true), 1024);
  ASSERT_FALSE(big.ok());
  EXPECT_EQ(big.error().code, Code::kPayloadTooLarge);
  EXPECT_FALSE(ReadTarArchive("not a tar at all, just some bytes", 1 << 20).ok());
}

TEST(BuildCopy, DockerRulesForFilesDirectoriesAndGlobs) {
  auto e = ReadTarArchive(MakeTar({{"hello.txt", "hi"},
                                   {"dir/", ""},
                                   {"dir/a.txt", "a"},
                                   {"dir/sub/b.txt", "b"},
                                   {"x.py", "x"},
                                   {"y.py", "y"}},
                                  false),
                          1 << 20);
  ASSERT_TRUE(e.ok());
  // A file to a path, or into a directory.
  EXPECT_EQ(Where(*e, "hello.txt", "/etc/greeting"),
            (std::map<std::string, std::string>{{"/etc/greeting", "hello.txt"}}));
  EXPECT_EQ(Where(*e, "./hello.txt", "/app/"),
            (std::map<std::string, std::string>{{"/app/hello.txt", "hello.txt"}}));
  // A directory's contents into the destination.
  EXPECT_EQ(Where(*e, "dir", "/srv"),
            (std::map<std::string, std::string>{{"/srv/a.txt", "dir/a.txt"},
                                                {"/srv/sub/b.txt", "dir/sub/b.txt"}}));
  // A glob's matches into the destination.
  EXPECT_EQ(Where(*e, "*.py", "/code/"),
            (std::map<std::string, std::string>{{"/code/x.py", "x.py"}, {"/code/y.py", "y.py"}}));
  // The whole archive.
  EXPECT_EQ(Where(*e, ".", "/ctx").size(), e->size());
  auto none = PlanCopy(*e, "missing.txt", "/x");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("'missing.txt' matches nothing"), std::string::npos);
  EXPECT_FALSE(PlanCopy(*e, "../x", "/x").ok());
  EXPECT_FALSE(PlanCopy(*e, "hello.txt", "relative").ok());
}

TEST(BuildCopy, OwnersResolveFromTheRootsAccountFiles) {
  const std::string passwd = "root:x:0:0:root:/root:/bin/sh\napp:x:1000:1001::/home/app:/bin/sh\n";
  const std::string group = "root:x:0:\napp:x:1001:\nstaff:x:50:\n";
  auto ids = [&](const std::string& o) {
    auto r = ResolveOwner(o, passwd, group);
    return r.ok() ? std::to_string(r->first) + ":" + std::to_string(r->second) : r.error().message;
  };
  EXPECT_EQ(ids("app"), "1000:1001");
  EXPECT_EQ(ids("app:staff"), "1000:50");
  EXPECT_EQ(ids("1000"), "1000:1001");
  EXPECT_EQ(ids("2000:7"), "2000:7");
  EXPECT_EQ(ids("root"), "0:0");
  EXPECT_NE(ids("nobody").find("no user 'nobody'"), std::string::npos);
  EXPECT_NE(ids("app:wheel").find("no group 'wheel'"), std::string::npos);
}

TEST(BuildCopy, BuildPathsAreAbsolute) {
  EXPECT_EQ(AbsoluteBuildPath("app", "/home/user"), "/home/user/app");
  EXPECT_EQ(AbsoluteBuildPath("app/", "/home/user"), "/home/user/app/");
  EXPECT_EQ(AbsoluteBuildPath("/etc/../opt/./x", "/ignored"), "/opt/x");
  EXPECT_EQ(AbsoluteBuildPath("../..", "/a"), "/");
  EXPECT_EQ(AbsoluteBuildPath("x", ""), "/x");
}
