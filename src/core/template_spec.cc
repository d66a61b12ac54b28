#include "core/template_spec.h"

#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "common/base64.h"
#include "common/sha256.h"
#include "core/oci_layout.h"

namespace hutch {
namespace {

using nlohmann::json;

Error Bad(const std::string& what) {
  return MakeError(Code::kInvalidRequest, "template spec: " + what);
}

// Base64 in a spec may be wrapped over several lines (TOML multi-line strings).
std::string WithoutLineBreaks(const std::string& in) {
  std::string out;
  out.reserve(in.size());
  for (char c : in)
    if (c != '\n' && c != '\r') out += c;
  return out;
}

Result<std::string> Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return std::string();
  if (!j[key].is_string()) return Bad(std::string("'") + key + "' must be a string");
  return j[key].get<std::string>();
}

Result<std::vector<std::string>> StrList(const json& j, const char* key) {
  std::vector<std::string> out;
  if (!j.contains(key) || j[key].is_null()) return out;
  // A single string is one entry (run = "make" reads naturally).
  if (j[key].is_string()) return std::vector<std::string>{j[key].get<std::string>()};
  if (!j[key].is_array()) return Bad(std::string("'") + key + "' must be a list of strings");
  for (const auto& e : j[key]) {
    if (!e.is_string() || e.get<std::string>().empty())
      return Bad(std::string("'") + key + "' must be a list of non-empty strings");
    out.push_back(e.get<std::string>());
  }
  return out;
}

// Debian package names (and apt's name=version / name/suite forms): no
// shell metacharacters reach the apt-get command line.
bool ValidPackage(const std::string& p) {
  if (p.empty() || p.size() > 200 || p[0] == '-') return false;
  for (char c : p)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '+' || c == '-' || c == ':' ||
          c == '=' || c == '~' || c == '/' || c == '_'))
      return false;
  return true;
}

// "0755" (string, octal) or 493 (number).
Result<int32_t> ParseMode(const json& v, const std::string& what) {
  if (v.is_string()) {
    const std::string m = v.get<std::string>();
    char* end = nullptr;
    const unsigned long n = strtoul(m.c_str(), &end, 8);
    if (!m.empty() && !*end && n <= 07777) return static_cast<int32_t>(n);
  } else if (v.is_number_unsigned() && v.get<uint64_t>() <= 07777) {
    return static_cast<int32_t>(v.get<uint64_t>());
  }
  return Bad(what + " must be octal like \"0644\"");
}

// user[:group], as chown takes it inside (names or numbers).
bool ValidOwner(const std::string& o) {
  for (char c : o)
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' || c == '.'))
      return false;
  return true;
}

Status RejectUnknown(const json& j, const std::set<std::string>& known, const std::string& where) {
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) return Bad("unknown key '" + k + "' in " + where);
  return {};
}

Result<std::map<std::string, std::string>> EnvTable(const json& v, const std::string& where) {
  std::map<std::string, std::string> out;
  if (!v.is_object()) return Bad(where + " must be a table of strings");
  for (const auto& [k, e] : v.items()) {
    if (!e.is_string()) return Bad("env '" + k + "' must be a string");
    if (k.empty() || k.find('=') != std::string::npos)
      return Bad("env name '" + k + "' is not valid");
    out[k] = e.get<std::string>();
  }
  return out;
}

// A copy step's bytes: content, content_b64 (one file) or archive_b64 (a
// tar, gzip or not); exactly one.
Status CopyData(const json& j, const std::string& where, TemplateStep* st) {
  const int given = j.contains("content") + j.contains("content_b64") + j.contains("archive_b64");
  if (given != 1) return Bad(where + " needs one of 'content', 'content_b64' or 'archive_b64'");
  if (j.contains("content")) {
    auto c = Str(j, "content");
    if (!c.ok()) return c.error();
    st->data = *c;
    return {};
  }
  const char* key = j.contains("content_b64") ? "content_b64" : "archive_b64";
  auto b = Str(j, key);
  if (!b.ok()) return b.error();
  if (!Base64Decode(WithoutLineBreaks(*b), &st->data))
    return Bad(where + ": '" + key + "' is not base64");
  st->archive = std::string(key) == "archive_b64";
  return {};
}

Result<TemplateStep> ParseStep(const json& j, size_t index) {
  const std::string where = "steps[" + std::to_string(index) + "]";
  if (!j.is_object()) return Bad(where + " must be a table");
  auto kind = Str(j, "kind");
  if (!kind.ok()) return kind.error();
  TemplateStep st;
  Status known;
  if (*kind == "run") {
    st.kind = TemplateStep::Kind::kRun;
    known = RejectUnknown(j, {"kind", "command", "user"}, where);
  } else if (*kind == "copy") {
    st.kind = TemplateStep::Kind::kCopy;
    known = RejectUnknown(j,
                          {"kind", "dest", "content", "content_b64", "archive_b64", "archive_path",
                           "mode", "owner", "src"},
                          where);
  } else if (*kind == "env") {
    st.kind = TemplateStep::Kind::kEnv;
    known = RejectUnknown(j, {"kind", "env"}, where);
  } else if (*kind == "workdir") {
    st.kind = TemplateStep::Kind::kWorkdir;
    known = RejectUnknown(j, {"kind", "path"}, where);
  } else if (*kind == "user") {
    st.kind = TemplateStep::Kind::kUser;
    known = RejectUnknown(j, {"kind", "user"}, where);
  } else {
    return Bad(where + ": 'kind' must be run, copy, env, workdir or user (got '" + *kind + "')");
  }
  if (!known.ok()) return known.error();
  auto command = Str(j, "command");
  auto user = Str(j, "user");
  auto path = Str(j, st.kind == TemplateStep::Kind::kCopy ? "dest" : "path");
  for (auto* r : {&command, &user, &path})
    if (!r->ok()) return r->error();
  st.command = *command;
  st.user = *user;
  st.path = *path;
  if (!ValidOwner(st.user)) return Bad(where + ": 'user' must be a user name or uid");
  switch (st.kind) {
    case TemplateStep::Kind::kRun:
      if (st.command.empty()) return Bad(where + ": a run step needs 'command'");
      break;
    case TemplateStep::Kind::kUser:
      if (st.user.empty()) return Bad(where + ": a user step needs 'user'");
      break;
    case TemplateStep::Kind::kWorkdir:
      if (st.path.empty()) return Bad(where + ": a workdir step needs 'path'");
      break;
    case TemplateStep::Kind::kEnv: {
      if (!j.contains("env")) return Bad(where + ": an env step needs 'env'");
      auto env = EnvTable(j["env"], where + ": 'env'");
      if (!env.ok()) return env.error();
      st.env = *env;
      break;
    }
    case TemplateStep::Kind::kCopy: {
      if (st.path.empty()) return Bad(where + ": a copy step needs 'dest'");
      if (j.contains("src"))
        return Bad(where + ": 'src' (" + j["src"].dump() +
                   ") is read by `hutch template build` on the client; send 'content', "
                   "'content_b64' or 'archive_b64'");
      if (auto s = CopyData(j, where, &st); !s.ok()) return s.error();
      auto ap = Str(j, "archive_path");
      if (!ap.ok()) return ap.error();
      if (!ap->empty()) {
        if (!st.archive) return Bad(where + ": 'archive_path' goes with 'archive_b64'");
        st.archive_path = *ap;
      }
      if (j.contains("mode")) {
        auto m = ParseMode(j["mode"], where + ": 'mode'");
        if (!m.ok()) return m.error();
        st.mode = *m;
      }
      auto owner = Str(j, "owner");
      if (!owner.ok()) return owner.error();
      st.owner = *owner;
      if (!ValidOwner(st.owner)) return Bad(where + ": 'owner' must be user[:group]");
      break;
    }
  }
  return st;
}

}  // namespace

const char* TemplateStep::KindName(Kind k) {
  switch (k) {
    case Kind::kRun:
      return "run";
    case Kind::kCopy:
      return "copy";
    case Kind::kEnv:
      return "env";
    case Kind::kWorkdir:
      return "workdir";
    case Kind::kUser:
      return "user";
  }
  return "?";
}

json TemplateStep::Normalized() const {
  json j = {{"kind", KindName(kind)}};
  switch (kind) {
    case Kind::kRun:
      j["command"] = command;
      if (!user.empty()) j["user"] = user;
      break;
    case Kind::kUser:
      j["user"] = user;
      break;
    case Kind::kWorkdir:
      j["path"] = path;
      break;
    case Kind::kEnv:
      j["env"] = env;
      break;
    case Kind::kCopy:
      j["dest"] = path;
      j[archive ? "archive_sha256" : "sha256"] = Sha256Hex(data);
      if (archive) j["archive_path"] = archive_path;
      j["mode"] = mode;
      j["owner"] = owner;
      break;
  }
  return j;
}

bool ValidDebianSuite(const std::string& s) {
  if (s.empty() || s.size() > 40 || !islower(static_cast<unsigned char>(s[0]))) return false;
  for (char c : s)
    if (!(islower(static_cast<unsigned char>(c)) || isdigit(static_cast<unsigned char>(c)) ||
          c == '-'))
      return false;
  return true;
}

bool ValidTemplateName(const std::string& n) {
  if (n.empty() || n.size() > 63 || n == "." || n == "..") return false;
  if (!(islower(static_cast<unsigned char>(n[0])) || isdigit(static_cast<unsigned char>(n[0]))))
    return false;
  for (char c : n)
    if (!(islower(static_cast<unsigned char>(c)) || isdigit(static_cast<unsigned char>(c)) ||
          c == '.' || c == '_' || c == ':' || c == '-'))
      return false;
  return true;
}

Result<TemplateSpec> ParseTemplateJson(const json& j) {
  if (!j.is_object()) return Bad("must be an object");
  static const std::set<std::string> kKnown = {"name",
                                               "from",
                                               "packages",
                                               "files",
                                               "run",
                                               "env",
                                               "user",
                                               "workdir",
                                               "start",
                                               "ready",
                                               "ready_timeout_seconds",
                                               "description",
                                               "steps"};
  for (const auto& [k, v] : j.items())
    if (!kKnown.count(k)) return Bad("unknown key '" + k + "'");
  TemplateSpec s;
  auto name = Str(j, "name");
  if (!name.ok()) return name.error();
  s.name = *name;
  if (!ValidTemplateName(s.name))
    return Bad("'name' must match [a-z0-9][a-z0-9._:-]{0,62} (got '" + s.name + "')");
  auto from = Str(j, "from");
  if (!from.ok()) return from.error();
  if (!from->empty()) s.from = *from;
  if (s.FromDebian()) {
    if (!ValidDebianSuite(s.DebianSuite()))
      return Bad(
          "'from' debian:<suite> needs a suite name matching [a-z][a-z0-9-]* such as bookworm");
  } else if (IsImageTemplateName(s.from)) {
    // Checked again, with the server's default registry, when pulled.
    if (auto ref = CanonicalImageRef(s.from.substr(6), ""); !ref.ok())
      return Bad("'from' image:<reference>: " + ref.error().message);
  } else if (!ValidTemplateName(s.from)) {
    return Bad("'from' must be debian:<suite>, image:<reference> or a template name (got '" +
               s.from + "')");
  }
  // base.toml names base itself: hutchd assembles base, building it only
  // reports it.
  if (s.from == s.name && s.name != "base") return Bad("a template cannot be built from itself");
  auto pk = StrList(j, "packages");
  if (!pk.ok()) return pk.error();
  s.packages = *pk;
  for (const auto& p : s.packages)
    if (!ValidPackage(p)) return Bad("'" + p + "' is not a Debian package name");
  auto run = StrList(j, "run");
  if (!run.ok()) return run.error();
  s.run = *run;
  for (const char* k : {"user", "workdir", "start", "ready", "description"}) {
    auto v = Str(j, k);
    if (!v.ok()) return v.error();
    std::string k2 = k;
    (k2 == "user"      ? s.user
     : k2 == "workdir" ? s.workdir
     : k2 == "start"   ? s.start
     : k2 == "ready"   ? s.ready
                       : s.description) = *v;
  }
  if (!s.workdir.empty() && s.workdir[0] != '/') return Bad("'workdir' must be an absolute path");
  if (j.contains("ready_timeout_seconds")) {
    if (!j["ready_timeout_seconds"].is_number_integer())
      return Bad("'ready_timeout_seconds' must be an integer");
    s.ready_timeout_seconds = j["ready_timeout_seconds"].get<int64_t>();
    if (s.ready_timeout_seconds < 1 || s.ready_timeout_seconds > 600)
      return Bad("'ready_timeout_seconds' must be in [1, 600]");
  }
  if (j.contains("env") && !j["env"].is_null()) {
    auto env = EnvTable(j["env"], "'env'");
    if (!env.ok()) return env.error();
    s.env = *env;
  }
  if (j.contains("steps") && !j["steps"].is_null()) {
    if (!j["steps"].is_array()) return Bad("'steps' must be a list of tables");
    for (size_t i = 0; i < j["steps"].size(); ++i) {
      auto st = ParseStep(j["steps"][i], i);
      if (!st.ok()) return st.error();
      s.steps.push_back(std::move(*st));
    }
  }
  if (j.contains("files") && !j["files"].is_null()) {
    if (!j["files"].is_array()) return Bad("'files' must be a list of tables");
    for (const auto& f : j["files"]) {
      if (!f.is_object()) return Bad("'files' entries must be tables");
      for (const auto& [k, v] : f.items())
        if (k != "dest" && k != "content" && k != "content_b64" && k != "mode" && k != "owner" &&
            k != "src")
          return Bad("unknown key '" + k + "' in files");
      TemplateFile tf;
      auto dest = Str(f, "dest");
      if (!dest.ok()) return dest.error();
      tf.dest = *dest;
      if (tf.dest.empty() || tf.dest[0] != '/' || tf.dest.find("/../") != std::string::npos ||
          tf.dest.ends_with("/..") || tf.dest.back() == '/')
        return Bad("files: 'dest' must be an absolute file path (got '" + tf.dest + "')");
      if (f.contains("src"))
        return Bad(
            "files: 'src' (" + f["src"].dump() +
            ") is read by `hutch template build` on the client; send 'content' or 'content_b64'");
      if (f.contains("content_b64")) {
        auto b = Str(f, "content_b64");
        if (!b.ok()) return b.error();
        if (!Base64Decode(WithoutLineBreaks(*b), &tf.content))
          return Bad("files: 'content_b64' of " + tf.dest + " is not base64");
      } else {
        auto c = Str(f, "content");
        if (!c.ok()) return c.error();
        tf.content = *c;
      }
      if (f.contains("mode")) {
        auto m = ParseMode(f["mode"], "files: 'mode' of " + tf.dest);
        if (!m.ok()) return m.error();
        tf.mode = static_cast<uint32_t>(*m);
      }
      auto owner = Str(f, "owner");
      if (!owner.ok()) return owner.error();
      tf.owner = *owner;
      if (!ValidOwner(tf.owner))
        return Bad("files: 'owner' of " + tf.dest + " must be user[:group]");
      s.files.push_back(std::move(tf));
    }
  }
  return s;
}

Result<TemplateSpec> ParseTemplateToml(const std::string& text) {
  std::string as_json;
  try {
    toml::table t = toml::parse(text);
    std::ostringstream os;
    os << toml::json_formatter{t};
    as_json = os.str();
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << "TOML: " << e.description() << " at line " << e.source().begin.line << ", column "
       << e.source().begin.column;
    return Bad(os.str());
  }
  auto j = json::parse(as_json, nullptr, false);
  if (j.is_discarded()) return Bad("TOML could not be converted");
  return ParseTemplateJson(j);
}

Result<TemplateSpec> ParseTemplateText(const std::string& text) {
  size_t i = text.find_first_not_of(" \t\r\n");
  if (i != std::string::npos && text[i] == '{') {
    auto j = json::parse(text, nullptr, false);
    if (j.is_discarded()) return Bad("malformed JSON");
    return ParseTemplateJson(j);
  }
  return ParseTemplateToml(text);
}

json TemplateSpec::Normalized() const {
  json files_j = json::array();
  for (const auto& f : files)
    files_j.push_back(
        {{"dest", f.dest}, {"sha256", Sha256Hex(f.content)}, {"mode", f.mode}, {"owner", f.owner}});
  // `name` and `description` are left out: two names for the same
  // contents share one build.
  json j{{"from", from},       {"packages", packages},
         {"files", files_j},   {"run", run},
         {"env", env},         {"user", user},
         {"workdir", workdir}, {"start", start},
         {"ready", ready},     {"ready_timeout_seconds", ready_timeout_seconds}};
  // Only when there are steps: a spec without them keeps the build hash it
  // had before steps existed.
  if (!steps.empty()) {
    json sj = json::array();
    for (const auto& st : steps) sj.push_back(st.Normalized());
    j["steps"] = std::move(sj);
  }
  return j;
}

std::string TemplateBuildHash(const TemplateSpec& spec, const std::string& parent_identity,
                              uint32_t uid_base) {
  // Bumped when what a build puts into its dir changes, so older builds of
  // the same spec are not taken for current ones.
  constexpr int kBuildLayout = 1;
  json key = {{"spec", spec.Normalized()},
              {"parent", parent_identity},
              {"uid_base", uid_base},
              {"layout", kBuildLayout}};
  return Sha256Hex(key.dump());
}

json TemplateSpec::ToJson() const {
  json j = Normalized();
  j["name"] = name;
  if (!description.empty()) j["description"] = description;
  for (size_t i = 0; i < files.size(); ++i) j["files"][i]["size"] = files[i].content.size();
  for (size_t i = 0; i < steps.size(); ++i)
    if (steps[i].kind == TemplateStep::Kind::kCopy) j["steps"][i]["size"] = steps[i].data.size();
  return j;
}

}  // namespace hutch
