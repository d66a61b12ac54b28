// File tools: whole files as text or base64 (an agent's files are source,
// configs and small outputs; the streaming routes of /v1 carry big ones),
// directory listings, removal. The agent inside the sandbox resolves every
// path in the sandbox's own root, as for every dialect.
#include "api/common/json_fields.h"
#include "api/common/utf8.h"
#include "api/mcp/mcp_tools.h"
#include "core/file_ops.h"

namespace hutch::api::mcp {

namespace {

// A tool result travels whole through the model's context: 8 MiB is
// already far more than one can read.
constexpr int64_t kMaxRead = 8 << 20;

Result<bool> Base64Wanted(const json& a) {
  auto enc = OptString(a, "encoding");
  if (!enc.ok()) return enc.error();
  const std::string e = enc->value_or("text");
  if (e != "text" && e != "base64")
    return MakeError(Code::kInvalidRequest, "'encoding' must be text or base64");
  return e == "base64";
}

}  // namespace

asio::awaitable<Result<ToolOutput>> Tools::FileRead(const json& a, ToolCall& call) {
  MCP_FIELD(sb, RunningSandbox(a, call));
  MCP_FIELD(path, RequiredString(a, "path"));
  MCP_FIELD(b64, Base64Wanted(a));
  auto data = co_await ReadWholeFile(*sb, *path, "", kMaxRead);
  if (!data.ok()) co_return data.error();
  bool invalid = false;
  const bool text = !*b64 && Utf8ValidPrefix(*data, &invalid) == data->size() && !invalid;
  if (!*b64 && !text)
    co_return MakeError(Code::kInvalidRequest,
                        *path + " is not UTF-8 text: read it with encoding base64");
  ToolOutput o;
  const std::string content = text ? *data : Base64Encode(*data);
  o.structured = {{"path", *path},
                  {"content", content},
                  {"encoding", text ? "text" : "base64"},
                  {"size", data->size()}};
  o.text = content;
  co_return o;
}

asio::awaitable<Result<ToolOutput>> Tools::FileWrite(const json& a, ToolCall& call) {
  MCP_FIELD(sb, RunningSandbox(a, call));
  MCP_FIELD(path, RequiredString(a, "path"));
  MCP_FIELD(content, OptString(a, "content"));
  MCP_FIELD(b64, Base64Wanted(a));
  MCP_FIELD(mode_s, OptString(a, "mode"));
  if (!*content) co_return MakeError(Code::kInvalidRequest, "'content' must be a string");
  int mode = 0644;
  if (*mode_s) {
    const std::string& m = **mode_s;
    char* end = nullptr;
    const long v = m.empty() ? -1 : strtol(m.c_str(), &end, 8);
    if (v < 0 || v > 07777 || *end != '\0')
      co_return MakeError(Code::kInvalidRequest, "'mode' must be octal, e.g. 0644");
    mode = static_cast<int>(v);
  }
  std::string bytes;
  if (*b64) {
    if (!Base64Decode(**content, &bytes))
      co_return MakeError(Code::kInvalidRequest, "'content' is not valid base64");
  } else {
    bytes = **content;
  }
  auto entry = co_await WriteWholeFile(*sb, *path, "", mode, bytes);
  if (!entry.ok()) co_return entry.error();
  ToolOutput o;
  o.structured = {{"path", entry->value("path", *path)}, {"size", bytes.size()}};
  o.text = "Wrote " + std::to_string(bytes.size()) + " bytes to " +
           o.structured["path"].get<std::string>();
  co_return o;
}

asio::awaitable<Result<ToolOutput>> Tools::FileList(const json& a, ToolCall& call) {
  MCP_FIELD(sb, RunningSandbox(a, call));
  MCP_FIELD(path, OptString(a, "path"));
  MCP_FIELD(depth, OptInt(a, "depth", 1, 32));
  json req = {{"op", "list"}, {"path", path->value_or("")}, {"depth", depth->value_or(1)}};
  auto r = co_await FsCall(*sb, req);
  if (!r.ok()) co_return r.error();
  ToolOutput o;
  json entries = (*r)["entries"];
  for (const auto& e : entries) {
    o.text += e.value("path", e.value("name", ""));
    if (e.value("type", "") == "dir") o.text += "/";
    else o.text += "  " + std::to_string(e.value("size", int64_t{0})) + " B";
    o.text += "\n";
  }
  if (entries.empty()) o.text = "(empty directory)\n";
  o.structured = {{"entries", std::move(entries)}};
  co_return o;
}

asio::awaitable<Result<ToolOutput>> Tools::FileRemove(const json& a, ToolCall& call) {
  MCP_FIELD(sb, RunningSandbox(a, call));
  MCP_FIELD(path, RequiredString(a, "path"));
  MCP_FIELD(rec, OptBool(a, "recursive"));
  json req = {{"op", "remove"}, {"path", *path}, {"recursive", rec->value_or(false)}};
  auto r = co_await FsCall(*sb, req);
  if (!r.ok()) co_return r.error();
  ToolOutput o;
  o.structured = {{"path", *path}, {"removed", true}};
  o.text = "Removed " + *path;
  co_return o;
}

}  // namespace hutch::api::mcp
