// The tool table: names, descriptions and input schemas (what tools/list
// shows an agent), the per-key filter, and the dispatch of tools/call.
#include "api/mcp/mcp_tools.h"

#include <map>

#include "api/common/tenant_scope.h"
#include "api/common/utf8.h"

namespace hutch::api::mcp {

namespace {

struct ToolDef {
  const char* name;
  const char* title;
  const char* description;
  const char* schema;  // JSON Schema of the arguments
  bool read_only;
  bool destructive;
};

// Schemas are JSON text: read once, checked by ToolsTable() at startup.
#define SANDBOX_ID \
  R"("sandbox_id": {"type": "string", "description": "The sandbox's id (sb_...), from sandbox_create or sandbox_list."})"

const ToolDef kTools[] = {
    {"run", "Run code or a command once",
     "Runs code (language + code) or a shell command (cmd) in a fresh sandbox that is removed "
     "afterwards, and returns its output. The quickest way to execute something: no sandbox to "
     "manage. Code runs in the code-interpreter template (python, javascript, typescript, bash; "
     "charts come back as images); a command runs in the `base` template unless `template` says "
     "otherwise. For state kept between calls, use sandbox_create with exec or run_code.",
     R"({"type": "object", "properties": {
        "language": {"type": "string", "description": "python (default with code), javascript, typescript or bash."},
        "code": {"type": "string", "description": "Source code to run (needs no cmd)."},
        "cmd": {"type": "string", "description": "Shell command to run with /bin/sh -c (needs no code)."},
        "template": {"type": "string", "description": "Template for cmd (default base)."},
        "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables."},
        "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 3600, "description": "Stop after this long (default 60)."}
      }})",
     false, false},
    {"sandbox_create", "Create a sandbox",
     "Creates an isolated Linux sandbox and returns it (its `id` is what the other tools take). "
     "It keeps files, processes and interpreter state until killed or its ttl runs out.",
     R"({"type": "object", "properties": {
        "template": {"type": "string", "description": "Template name (see template_list); default base. Use code-interpreter for run_code."},
        "ttl_seconds": {"type": "integer", "minimum": 1, "description": "Lifetime in seconds; the sandbox is removed after it (default: the server's)."},
        "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Environment variables of every command."},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Labels to find it again with sandbox_list."},
        "network": {"type": "object", "description": "Network policy as in hutch's API: {\"mode\": \"none\"|\"all\"|\"allowlist\", \"allow\": [\"host or CIDR\", ...]}."}
      }})",
     false, false},
    {"sandbox_list", "List sandboxes", "Lists the sandboxes this key can see, newest first.",
     R"({"type": "object", "properties": {
        "status": {"type": "string", "description": "Only sandboxes in this state: running, paused, stopped or failed."}
      }})",
     true, false},
    {"sandbox_get", "Get a sandbox", "Returns one sandbox: status, template, resources, expiry.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(}, "required": ["sandbox_id"]})", true,
     false},
    {"sandbox_kill", "Kill a sandbox",
     "Stops and removes a sandbox with everything in it (files, processes). Cannot be undone.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(}, "required": ["sandbox_id"]})", false,
     true},
    {"sandbox_pause", "Pause a sandbox",
     "Freezes every process of a sandbox (no CPU used) until sandbox_resume.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(}, "required": ["sandbox_id"]})", false,
     false},
    {"sandbox_resume", "Resume a sandbox", "Lets a paused sandbox's processes run again.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(}, "required": ["sandbox_id"]})", false,
     false},
    {"sandbox_snapshot", "Snapshot a sandbox",
     "Saves a sandbox's files as a snapshot; sandbox_create can start new sandboxes from it "
     "through hutch's API (`snapshot`).",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(}, "required": ["sandbox_id"]})", false,
     false},
    {"sandbox_fork", "Fork a sandbox",
     "Makes `count` copies of a running sandbox (copy-on-write): each starts with the parent's "
     "files, to try alternatives in parallel.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "count": {"type": "integer", "minimum": 1, "maximum": 100, "description": "How many copies (default 1)."}
      }, "required": ["sandbox_id"]})",
     false, false},
    {"exec", "Run a command in a sandbox",
     "Runs a shell command (/bin/sh -c) in a sandbox and returns stdout, stderr and the exit "
     "code. Output is also sent as progress while it runs. A non-zero exit is a normal result, "
     "not an error.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "cmd": {"type": "string", "description": "The command line."},
        "cwd": {"type": "string", "description": "Working directory (default: the user's home)."},
        "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables."},
        "user": {"type": "string", "description": "User to run as (default root)."},
        "timeout_seconds": {"type": "integer", "minimum": 0, "maximum": 86400, "description": "Kill it after this long (default 60; 0: never)."}
      }, "required": ["sandbox_id", "cmd"]})",
     false, false},
    {"run_code", "Run code in a sandbox's interpreter",
     "Runs code in a stateful interpreter of a sandbox made from the code-interpreter template: "
     "variables, imports and definitions persist between calls (one context per language, or "
     "the context_id given). Returns printed output, the value of the last expression, tables "
     "as text and charts (matplotlib) as images.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "code": {"type": "string", "description": "Source code."},
        "language": {"type": "string", "description": "python (default), javascript, typescript or bash."},
        "context_id": {"type": "string", "description": "A context made through hutch's API (instead of language)."},
        "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 86400, "description": "Interrupt it after this long (state is kept)."}
      }, "required": ["sandbox_id", "code"]})",
     false, false},
    {"file_read", "Read a file",
     "Reads a file of a sandbox: as text (UTF-8) by default, or base64 for binary files. At most "
     "8 MiB.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "path": {"type": "string", "description": "Absolute path, or relative to the user's home."},
        "encoding": {"type": "string", "enum": ["text", "base64"], "description": "text (default) or base64."}
      }, "required": ["sandbox_id", "path"]})",
     true, false},
    {"file_write", "Write a file",
     "Writes a whole file in a sandbox (parent directories are made), from text or base64.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "path": {"type": "string", "description": "Absolute path, or relative to the user's home."},
        "content": {"type": "string", "description": "The new content."},
        "encoding": {"type": "string", "enum": ["text", "base64"], "description": "How content is given: text (default) or base64."},
        "mode": {"type": "string", "description": "Octal permissions, e.g. 0755 (default 0644)."}
      }, "required": ["sandbox_id", "path", "content"]})",
     false, false},
    {"file_list", "List a directory",
     "Lists a directory of a sandbox: name, path, type (file, dir, symlink), size, mode, mtime.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "path": {"type": "string", "description": "Directory (default: the user's home)."},
        "depth": {"type": "integer", "minimum": 1, "maximum": 32, "description": "Levels to descend (default 1)."}
      }, "required": ["sandbox_id"]})",
     true, false},
    {"file_remove", "Remove a file",
     "Removes a file, or a directory with recursive=true, in a sandbox.",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "path": {"type": "string", "description": "What to remove."},
        "recursive": {"type": "boolean", "description": "Remove a directory and all it holds."}
      }, "required": ["sandbox_id", "path"]})",
     false, true},
    {"port_url", "URL of a port",
     "Returns the URL that reaches a server listening on `port` inside a sandbox, through hutch "
     "(send the same API key as a Bearer token).",
     R"({"type": "object", "properties": {)" SANDBOX_ID R"(,
        "port": {"type": "integer", "minimum": 1, "maximum": 65535, "description": "TCP port inside the sandbox."}
      }, "required": ["sandbox_id", "port"]})",
     true, false},
    {"template_list", "List templates",
     "Lists the templates sandboxes can be made from (name, description, what they contain).",
     R"({"type": "object", "properties": {}})", true, false},
};

#undef SANDBOX_ID

const std::map<std::string, json>& Schemas() {
  static const std::map<std::string, json> m = [] {
    std::map<std::string, json> out;
    for (const auto& t : kTools) out[t.name] = json::parse(t.schema);
    return out;
  }();
  return m;
}

json ErrorResult(const Error& e) {
  const std::string code = CodeName(e.code);
  return json{{"content", json::array({{{"type", "text"}, {"text", code + ": " + e.message}}})},
              {"structuredContent", {{"error", {{"code", code}, {"message", e.message}}}}},
              {"isError", true}};
}

// The schema's shape, checked before a handler runs: an object, only the
// properties the schema names, the required ones present. (Types are the
// handlers' to check, with messages naming the field.)
Status CheckArguments(const json& schema, const json& args) {
  if (!args.is_object()) return MakeError(Code::kInvalidRequest, "arguments must be an object");
  const json& props = schema["properties"];
  for (const auto& [k, v] : args.items())
    if (!props.contains(k)) return MakeError(Code::kInvalidRequest, "unknown argument '" + k + "'");
  if (schema.contains("required"))
    for (const auto& r : schema["required"])
      if (!args.contains(r.get<std::string>()))
        return MakeError(Code::kInvalidRequest, "missing argument '" + r.get<std::string>() + "'");
  return Status{};
}

}  // namespace

const std::vector<std::string>& Tools::Names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& t : kTools) out.push_back(t.name);
    return out;
  }();
  return names;
}

Tools::Handler Tools::HandlerOf(const std::string& name) {
  static const std::map<std::string, Handler> m = {
      {"run", &Tools::Run},
      {"sandbox_create", &Tools::SandboxCreate},
      {"sandbox_list", &Tools::SandboxList},
      {"sandbox_get", &Tools::SandboxGet},
      {"sandbox_kill", &Tools::SandboxKill},
      {"sandbox_pause", &Tools::SandboxPause},
      {"sandbox_resume", &Tools::SandboxResume},
      {"sandbox_snapshot", &Tools::SandboxSnapshot},
      {"sandbox_fork", &Tools::SandboxFork},
      {"exec", &Tools::Exec},
      {"run_code", &Tools::RunCode},
      {"file_read", &Tools::FileRead},
      {"file_write", &Tools::FileWrite},
      {"file_list", &Tools::FileList},
      {"file_remove", &Tools::FileRemove},
      {"port_url", &Tools::PortUrl},
      {"template_list", &Tools::TemplateList},
  };
  auto it = m.find(name);
  return it == m.end() ? nullptr : it->second;
}

json Tools::List(const auth::Principal& who) const {
  json tools = json::array();
  for (const auto& t : kTools) {
    if (!who.MayCallTool(t.name)) continue;
    tools.push_back({{"name", t.name},
                     {"title", t.title},
                     {"description", t.description},
                     {"inputSchema", Schemas().at(t.name)},
                     {"annotations",
                      {{"title", t.title},
                       {"readOnlyHint", t.read_only},
                       {"destructiveHint", t.destructive},
                       {"openWorldHint", false}}}});
  }
  return json{{"tools", tools}};
}

asio::awaitable<json> Tools::Call(std::string name, json args, ToolCall& call) {
  Handler h = HandlerOf(name);
  if (h == nullptr || !call.who.MayCallTool(name))
    co_return ErrorResult(
        MakeError(Code::kInvalidRequest, "no tool '" + name + "' for this key (see tools/list)"));
  if (args.is_null()) args = json::object();
  if (auto st = CheckArguments(Schemas().at(name), args); !st.ok())
    co_return ErrorResult(st.error().Context("tool " + name));
  Result<ToolOutput> out = co_await (this->*h)(args, call);
  if (!out.ok()) co_return ErrorResult(out.error());
  json content = json::array();
  content.push_back({{"type", "text"}, {"text", out->text}});
  for (auto& img : out->images) content.push_back(std::move(img));
  co_return json{{"content", content}, {"structuredContent", out->structured}, {"isError", false}};
}

Status Tools::Visible(const std::string& id, const ToolCall& call) {
  return CheckScope(*mgr_, call.who, {ScopedKind::kSandbox, id});
}

Result<std::shared_ptr<Sandbox>> Tools::RunningSandbox(const json& a, const ToolCall& call) {
  auto id = RequiredString(a, "sandbox_id");
  if (!id.ok()) return id.error();
  if (auto st = Visible(*id, call); !st.ok()) return st.error();
  return mgr_->GetRunning(*id);
}

Result<std::string> RequiredString(const json& a, const char* key) {
  auto it = a.find(key);
  if (it == a.end() || !it->is_string() || it->get<std::string>().empty())
    return MakeError(Code::kInvalidRequest,
                     std::string("'") + key + "' must be a non-empty string");
  return it->get<std::string>();
}

std::string LossyUtf8(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  while (!bytes.empty()) {
    bool invalid = false;
    const size_t ok = Utf8ValidPrefix(bytes, &invalid);
    out.append(bytes.substr(0, ok));
    bytes.remove_prefix(ok);
    if (bytes.empty()) break;
    out.append("\xEF\xBF\xBD");  // U+FFFD for one bad (or cut-short) byte
    bytes.remove_prefix(1);
  }
  return out;
}

}  // namespace hutch::api::mcp
