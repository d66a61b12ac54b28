#include "cli/dockerfile.h"

#include <fnmatch.h>
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cli/template_spec_file.h"
#include "common/base64.h"

namespace hutch::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// One instruction: its keyword (upper case), the rest of its line, and
// where it starts.
struct Instruction {
  std::string op;
  std::string args;
  int line = 0;
};

std::string Trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

// Lines joined at a trailing backslash; comments and blank lines dropped
// (also inside a continued instruction, as Docker does).
std::vector<Instruction> Split(const std::string& text) {
  std::vector<Instruction> out;
  std::stringstream ss(text);
  std::string raw, cur;
  int n = 0, start = 0;
  while (std::getline(ss, raw)) {
    ++n;
    const std::string t = Trim(raw);
    if (t.empty() || t[0] == '#') continue;
    if (cur.empty()) start = n;
    if (t.back() == '\\') {
      cur += t.substr(0, t.size() - 1) + " ";
      continue;
    }
    cur += t;
    const size_t sp = cur.find_first_of(" \t");
    std::string op = cur.substr(0, sp);
    std::transform(op.begin(), op.end(), op.begin(), ::toupper);
    out.push_back({op, sp == std::string::npos ? "" : Trim(cur.substr(sp)), start});
    cur.clear();
  }
  if (!cur.empty()) out.push_back({"", cur, start});  // ends in a backslash
  return out;
}

// $NAME, ${NAME}, ${NAME:-default} from `vars` (unknown: empty), as Docker
// substitutes in ENV, WORKDIR, USER, COPY and FROM.
std::string Substitute(const std::string& s, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] == '$') {
      out += '$';
      ++i;
      continue;
    }
    if (s[i] != '$' || i + 1 >= s.size()) {
      out += s[i];
      continue;
    }
    std::string name, fallback;
    bool has_fallback = false;
    if (s[i + 1] == '{') {
      const size_t close = s.find('}', i + 2);
      if (close == std::string::npos) {
        out += s[i];
        continue;
      }
      name = s.substr(i + 2, close - i - 2);
      if (size_t d = name.find(":-"); d != std::string::npos) {
        fallback = name.substr(d + 2);
        name = name.substr(0, d);
        has_fallback = true;
      }
      i = close;
    } else {
      size_t j = i + 1;
      while (j < s.size() && (isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j == i + 1) {
        out += s[i];
        continue;
      }
      name = s.substr(i + 1, j - i - 1);
      i = j - 1;
    }
    auto it = vars.find(name);
    if (it != vars.end() && !(has_fallback && it->second.empty())) out += it->second;
    else if (has_fallback) out += fallback;
  }
  return out;
}

// Words split on blanks, with "..." and '...' quoting (ENV, COPY, ARG).
std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  char quote = 0;
  bool any = false;
  for (char c : s) {
    if (quote) {
      if (c == quote) quote = 0;
      else cur += c;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      any = true;
    } else if (c == ' ' || c == '\t') {
      if (any || !cur.empty()) out.push_back(cur);
      cur.clear();
      any = false;
    } else {
      cur += c;
    }
  }
  if (any || !cur.empty()) out.push_back(cur);
  return out;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// The exec form (a JSON array) as one shell command; the shell form as is.
std::optional<std::string> Command(const std::string& args) {
  if (args.empty() || args[0] != '[') return args;
  auto j = json::parse(args, nullptr, false);
  if (!j.is_array()) return std::nullopt;
  std::string out;
  for (const auto& a : j) {
    if (!a.is_string()) return std::nullopt;
    out += (out.empty() ? "" : " ") + ShellQuote(a.get<std::string>());
  }
  return out;
}

class Translator {
 public:
  explicit Translator(const DockerfileInput& in) : in_(in) {}

  DockerfileSpec Run() {
    DockerfileSpec out;
    spec_ = {{"name", in_.name}, {"steps", json::array()}};
    for (const auto& ins : Split(in_.text)) {
      line_ = ins.line;
      if (!Apply(ins, &out)) return out;
    }
    if (!from_seen_) {
      out.error = "no FROM instruction";
      return out;
    }
    std::string start = entrypoint_;
    if (!cmd_.empty()) start += (start.empty() ? "" : " ") + cmd_;
    if (!start.empty()) spec_["start"] = start;
    out.spec = spec_;
    return out;
  }

 private:
  bool Error(DockerfileSpec* out, const std::string& why) {
    out->error = "line " + std::to_string(line_) + ": " + why;
    return false;
  }
  std::map<std::string, std::string> Vars() const {
    std::map<std::string, std::string> v = args_;
    for (const auto& [k, val] : env_) v[k] = val;
    return v;
  }
  void Step(json s) { spec_["steps"].push_back(std::move(s)); }

  bool Apply(const Instruction& ins, DockerfileSpec* out) {
    const std::string& op = ins.op;
    if (op.empty()) return Error(out, "the file ends in a line continuation");
    if (op == "ARG") return Arg(ins.args, out);
    if (op == "FROM") return From(ins.args, out);
    if (!from_seen_) return Error(out, op + " before FROM");
    if (op == "RUN") {
      auto cmd = Command(ins.args);
      if (!cmd || cmd->empty()) return Error(out, "RUN needs a command");
      // Build arguments are in RUN's environment (not the template's).
      std::string prefix;
      for (const auto& [k, v] : args_) prefix += k + "=" + ShellQuote(v) + " ";
      if (!prefix.empty()) *cmd = "export " + prefix + "; " + *cmd;
      Step({{"kind", "run"}, {"command", *cmd}});
      return true;
    }
    if (op == "ENV") return Env(ins.args, out);
    if (op == "WORKDIR" || op == "USER") {
      const std::string v = Trim(Substitute(ins.args, Vars()));
      if (v.empty()) return Error(out, op + " needs an argument");
      if (op == "USER") Step({{"kind", "user"}, {"user", v}});
      else Step({{"kind", "workdir"}, {"path", v}});
      return true;
    }
    if (op == "COPY") return Copy(ins.args, out);
    if (op == "CMD" || op == "ENTRYPOINT") {
      auto cmd = Command(ins.args);
      if (!cmd) return Error(out, op + " is not a JSON array of strings nor a shell command");
      (op == "CMD" ? cmd_ : entrypoint_) = *cmd;
      return true;
    }
    if (op == "LABEL" || op == "EXPOSE" || op == "MAINTAINER") {
      out->warnings.push_back("line " + std::to_string(line_) + ": " + op + " ignored");
      return true;
    }
    return Error(out, op + " is not supported (FROM, RUN, COPY, ENV, WORKDIR, USER, ARG, CMD, "
                           "ENTRYPOINT are; ADD: use COPY)");
  }

  bool Arg(const std::string& a, DockerfileSpec* out) {
    const std::string w = Trim(a);
    if (w.empty()) return Error(out, "ARG needs a name");
    const size_t eq = w.find('=');
    const std::string name = w.substr(0, eq);
    std::string value = eq == std::string::npos ? "" : Words(w.substr(eq + 1)).front();
    if (auto it = in_.build_args.find(name); it != in_.build_args.end()) value = it->second;
    args_[name] = value;
    return true;
  }

  bool From(const std::string& a, DockerfileSpec* out) {
    if (from_seen_) return Error(out, "a second FROM: multi-stage builds are not supported");
    auto w = Words(Substitute(a, args_));
    if (w.empty()) return Error(out, "FROM needs an image");
    if (w[0].rfind("--", 0) == 0) return Error(out, "FROM " + w[0] + " is not supported");
    if (w[0] == "scratch") return Error(out, "FROM scratch is not supported (no empty root)");
    from_seen_ = true;
    spec_["from"] = in_.is_template && in_.is_template(w[0]) ? w[0] : "image:" + w[0];
    // ARGs before FROM are for FROM only, as in Docker.
    args_.clear();
    return true;
  }

  bool Env(const std::string& a, DockerfileSpec* out) {
    json env = json::object();
    const std::string s = Trim(a);
    const size_t first_sp = s.find_first_of(" \t");
    const size_t first_eq = s.find('=');
    if (first_eq == std::string::npos || (first_sp != std::string::npos && first_sp < first_eq)) {
      // ENV NAME value with spaces
      if (first_sp == std::string::npos) return Error(out, "ENV needs NAME=VALUE");
      env[s.substr(0, first_sp)] = Substitute(Trim(s.substr(first_sp)), Vars());
    } else {
      for (const auto& w : Words(s)) {
        const size_t eq = w.find('=');
        if (eq == std::string::npos || eq == 0) return Error(out, "ENV needs NAME=VALUE pairs");
        env[w.substr(0, eq)] = Substitute(w.substr(eq + 1), Vars());
      }
    }
    for (const auto& [k, v] : env.items()) env_[k] = v.get<std::string>();
    Step({{"kind", "env"}, {"env", env}});
    return true;
  }

  bool Copy(const std::string& a, DockerfileSpec* out) {
    auto w = Words(Substitute(a, Vars()));
    std::string owner, mode;
    while (!w.empty() && w[0].rfind("--", 0) == 0) {
      if (w[0].rfind("--chown=", 0) == 0) owner = w[0].substr(8);
      else if (w[0].rfind("--chmod=", 0) == 0) mode = w[0].substr(8);
      else return Error(out, "COPY " + w[0] + " is not supported");
      w.erase(w.begin());
    }
    if (w.size() < 2) return Error(out, "COPY needs a source and a destination");
    const std::string dest = w.back();
    w.pop_back();
    const bool into = dest.back() == '/' || w.size() > 1;
    const std::string dir = into && dest.back() != '/' ? dest + "/" : dest;
    const fs::path ctx = fs::absolute(in_.context);
    for (const auto& src : w) {
      std::vector<fs::path> matches;
      const fs::path rel = fs::path(src).lexically_normal();
      if (rel.is_absolute() || *rel.begin() == "..")
        return Error(out, "COPY " + src + " leaves the build context");
      if (src.find_first_of("*?[") != std::string::npos) {
        std::error_code ec;
        for (auto it = fs::recursive_directory_iterator(ctx, ec); it != fs::end(it); ++it) {
          const std::string r = fs::relative(it->path(), ctx).generic_string();
          if (fnmatch(rel.generic_string().c_str(), r.c_str(), FNM_PATHNAME) == 0)
            matches.push_back(it->path());
        }
      } else if (fs::exists(ctx / rel)) {
        matches.push_back(ctx / rel);
      }
      if (matches.empty()) return Error(out, "COPY " + src + ": not found in " + ctx.string());
      for (const auto& m : matches) {
        if (fs::is_directory(m)) {
          for (const auto& e : fs::recursive_directory_iterator(m)) {
            if (!e.is_regular_file()) continue;
            const std::string r = fs::relative(e.path(), m).generic_string();
            const std::string d = (dest.back() == '/' ? dest : dest + "/") + r;
            if (!CopyFile(e.path(), d, owner, mode, out)) return false;
          }
        } else {
          const std::string d = into ? dir + m.filename().string() : dest;
          if (!CopyFile(m, d, owner, mode, out)) return false;
        }
      }
    }
    return true;
  }

  bool CopyFile(const fs::path& p, const std::string& dest, const std::string& owner,
                const std::string& mode, DockerfileSpec* out) {
    std::string bytes;
    if (!ReadFile(p.string(), &bytes)) return Error(out, "cannot read " + p.string());
    struct stat st {};
    json step = {{"kind", "copy"}, {"dest", dest}, {"content_b64", Base64Encode(bytes)}};
    if (!mode.empty()) step["mode"] = mode;
    else if (stat(p.c_str(), &st) == 0) step["mode"] = st.st_mode & 07777;
    if (!owner.empty()) step["owner"] = owner;
    Step(std::move(step));
    return true;
  }

  const DockerfileInput& in_;
  json spec_;
  int line_ = 0;
  bool from_seen_ = false;
  std::map<std::string, std::string> args_, env_;
  std::string cmd_, entrypoint_;
};

}  // namespace

DockerfileSpec DockerfileToSpec(const DockerfileInput& in) { return Translator(in).Run(); }

}  // namespace hutch::cli
