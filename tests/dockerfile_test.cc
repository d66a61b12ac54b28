// `hutch template build -f` (src/cli/dockerfile): a Dockerfile's lines
// become ordered spec steps in order; continuations, comments, ARG and
// ENV substitution, the exec form, COPY from a build context (files,
// directories, globs, --chown/--chmod), CMD/ENTRYPOINT as `start`, and
// refusals that name their line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "cli/dockerfile.h"
#include "common/base64.h"

using hutch::cli::DockerfileInput;
using hutch::cli::DockerfileToSpec;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class Context {
 public:
  Context() {
    dir_ = fs::temp_directory_path() / ("hutch-dockerfile-" + std::to_string(getpid()));
    fs::create_directories(dir_ / "conf");
    Write("hello.txt", "hi\n");
    Write("conf/a.ini", "a\n");
    Write("conf/b.ini", "b\n");
    Write("x.py", "x\n");
    Write("y.py", "y\n");
  }
  ~Context() { fs::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& text) { std::ofstream(dir_ / rel) << text; }
  hutch::cli::DockerfileSpec Spec(const std::string& text,
                                  std::map<std::string, std::string> args = {}) const {
    DockerfileInput in;
    in.text = text;
    in.name = "t";
    in.context = dir_.string();
    in.build_args = std::move(args);
    in.is_template = [](const std::string& ref) { return ref == "base"; };
    return DockerfileToSpec(in);
  }

 private:
  fs::path dir_;
};

std::string Decoded(const json& step) {
  std::string out;
  hutch::Base64Decode(step.value("content_b64", ""), &out);
  return out;
}

}  // namespace

TEST(Dockerfile, LinesBecomeOrderedSteps) {
  Context ctx;
  auto r = ctx.Spec(R"(# a comment
ARG BASE=base
FROM ${BASE}
ARG MODE=dev
ENV HOME_DIR=/srv/app \
    GREETING="hello there"
WORKDIR $HOME_DIR
USER app
RUN echo "$MODE" > mode.txt
RUN ["echo", "it's"]
ENTRYPOINT ["/bin/run"]
CMD --serve
)",
                    {{"MODE", "prod"}});
  ASSERT_TRUE(r.spec) << r.error;
  const json& s = *r.spec;
  EXPECT_EQ(s["name"], "t");
  EXPECT_EQ(s["from"], "base");  // a template of the server
  const json& st = s["steps"];
  ASSERT_EQ(st.size(), 5u) << st.dump();
  EXPECT_EQ(st[0], json({{"kind", "env"},
                         {"env", {{"HOME_DIR", "/srv/app"}, {"GREETING", "hello there"}}}}));
  EXPECT_EQ(st[1], json({{"kind", "workdir"}, {"path", "/srv/app"}}));
  EXPECT_EQ(st[2], json({{"kind", "user"}, {"user", "app"}}));
  EXPECT_EQ(st[3]["command"], "export MODE='prod' ; echo \"$MODE\" > mode.txt");
  EXPECT_EQ(st[4]["command"], "export MODE='prod' ; 'echo' 'it'\\''s'");
  EXPECT_EQ(s["start"], "'/bin/run' --serve");
}

TEST(Dockerfile, FromAnImageAndArgsBeforeFromAreForFromOnly) {
  Context ctx;
  auto r = ctx.Spec("ARG TAG=3.12\nFROM python:$TAG\nRUN echo ${TAG:-none}\n");
  ASSERT_TRUE(r.spec) << r.error;
  EXPECT_EQ((*r.spec)["from"], "image:python:3.12");
  EXPECT_EQ((*r.spec)["steps"][0]["command"], "echo ${TAG:-none}");  // RUN: the shell's
}

TEST(Dockerfile, CopyReadsTheContext) {
  Context ctx;
  auto r = ctx.Spec(
      "FROM base\nCOPY hello.txt /etc/greeting\nCOPY hello.txt /app/\n"
      "COPY --chown=app:app --chmod=0600 conf /etc/conf\nCOPY *.py /code/\n");
  ASSERT_TRUE(r.spec) << r.error;
  std::map<std::string, json> by_dest;
  for (const auto& st : (*r.spec)["steps"]) by_dest[st.value("dest", "")] = st;
  ASSERT_EQ(by_dest.size(), 6u) << r.spec->dump();
  EXPECT_EQ(Decoded(by_dest["/etc/greeting"]), "hi\n");
  EXPECT_EQ(Decoded(by_dest["/app/hello.txt"]), "hi\n");
  EXPECT_EQ(Decoded(by_dest["/etc/conf/a.ini"]), "a\n");
  EXPECT_EQ(by_dest["/etc/conf/b.ini"]["owner"], "app:app");
  EXPECT_EQ(by_dest["/etc/conf/b.ini"]["mode"], "0600");
  EXPECT_EQ(Decoded(by_dest["/code/x.py"]), "x\n");
  EXPECT_EQ(Decoded(by_dest["/code/y.py"]), "y\n");
}

TEST(Dockerfile, RefusalsNameTheirLine) {
  Context ctx;
  auto err = [&](const std::string& text) {
    auto r = ctx.Spec(text);
    return r.spec ? std::string("(accepted)") : r.error;
  };
  EXPECT_EQ(err("RUN true\n"), "line 1: RUN before FROM");
  EXPECT_EQ(err("# only\n"), "no FROM instruction");
  EXPECT_NE(err("FROM base\n\nADD x /x\n").find("line 3: ADD is not supported"), std::string::npos);
  EXPECT_NE(err("FROM base\nFROM base\n").find("multi-stage"), std::string::npos);
  EXPECT_NE(err("FROM scratch\n").find("FROM scratch"), std::string::npos);
  EXPECT_NE(err("FROM base\nCOPY ../etc/passwd /x\n").find("leaves the build context"),
            std::string::npos);
  EXPECT_NE(err("FROM base\nCOPY missing.txt /x\n").find("not found"), std::string::npos);
  EXPECT_NE(err("FROM base\nCOPY --from=build /a /b\n").find("--from=build"), std::string::npos);
  EXPECT_NE(err("FROM base\nRUN true \\\n").find("line continuation"), std::string::npos);
  auto warned = ctx.Spec("FROM base\nLABEL a=b\nEXPOSE 80\n");
  ASSERT_TRUE(warned.spec);
  EXPECT_EQ(warned.warnings.size(), 2u);
}
