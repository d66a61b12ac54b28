#include "core/file_ops.h"

#include <optional>

#include "common/clock.h"
#include "core/exec_session.h"

namespace hutch {

namespace {

// What hutchd holds of one listing at most (a directory tree of millions
// of names would otherwise be held whole in hutchd's memory).
constexpr size_t kMaxListingBytes = size_t{64} << 20;

Error Lost() { return MakeError(Code::kUnavailable, "sandbox agent connection lost"); }

Result<std::shared_ptr<AgentStream>> OpenFsStream(const std::shared_ptr<Sandbox>& sb) {
  auto inst = sb->instance;
  if (!inst || !inst->agent() || !inst->agent()->alive())
    return MakeError(Code::kSandboxNotRunning, "sandbox " + sb->rec.id + " is not running");
  return inst->agent()->OpenStream();
}

std::string Dump(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

nlohmann::json EntryToApi(const nlohmann::json& e) {
  nlohmann::json out = e;
  if (e.contains("mtime") && e["mtime"].is_number()) {
    auto t = std::chrono::system_clock::time_point(std::chrono::seconds(e["mtime"].get<int64_t>()));
    out["mtime"] = FormatRfc3339(t);
  }
  return out;
}

asio::awaitable<Result<nlohmann::json>> FsCall(std::shared_ptr<Sandbox> sb,
                                               nlohmann::json request) {
  auto s = OpenFsStream(sb);
  if (!s.ok()) co_return s.error();
  auto stream = s.value();
  if (auto st = co_await stream->Send(wire::Type::kFsRequest, Dump(request)); !st.ok())
    co_return st.error();
  // A listing may come in parts (kFsEntries) before its kFsResult.
  nlohmann::json parts = nlohmann::json::array();
  size_t part_bytes = 0;
  std::optional<wire::Frame> f;
  while (true) {
    auto answer = co_await stream->Answer();
    if (!answer.ok()) co_return answer.error();
    f = std::move(*answer);
    if (!f) co_return Lost();
    if (f->type != wire::Type::kFsEntries) break;
    part_bytes += f->payload.size();
    if (part_bytes > kMaxListingBytes)
      co_return MakeError(Code::kInvalidRequest,
                          "the listing is larger than " + std::to_string(kMaxListingBytes >> 20) +
                              " MiB: list a smaller directory or a lower depth");
    try {
      auto j = nlohmann::json::parse(f->payload);
      for (auto& e : j.at("entries")) parts.push_back(std::move(e));
    } catch (const std::exception& e) {
      co_return MakeError(Code::kInternal,
                          std::string("malformed agent listing part: ") + e.what());
    }
  }
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  if (f->type != wire::Type::kFsResult)
    co_return MakeError(Code::kInternal, "unexpected agent frame for fs request");
  try {
    auto j = nlohmann::json::parse(f->payload);
    if (!parts.empty() && j.contains("entries") && j["entries"].is_array()) {
      for (auto& e : j["entries"]) parts.push_back(std::move(e));
      j["entries"] = std::move(parts);
    }
    if (j.contains("entry")) j["entry"] = EntryToApi(j["entry"]);
    if (j.contains("entries") && j["entries"].is_array())
      for (auto& e : j["entries"]) e = EntryToApi(e);
    co_return j;
  } catch (const std::exception& e) {
    co_return MakeError(Code::kInternal, std::string("malformed agent fs result: ") + e.what());
  }
}

asio::awaitable<Result<std::unique_ptr<FileDownload>>> FileDownload::Start(
    std::shared_ptr<Sandbox> sb, const std::string& path, const std::string& user, int64_t offset,
    int64_t length) {
  auto s = OpenFsStream(sb);
  if (!s.ok()) co_return s.error();
  std::unique_ptr<FileDownload> d(new FileDownload(s.value()));
  nlohmann::json req = {{"op", "read"}, {"path", path}, {"offset", offset}, {"length", length}};
  if (!user.empty()) req["user"] = user;
  if (auto st = co_await d->stream_->Send(wire::Type::kFsRequest, Dump(req)); !st.ok())
    co_return st.error();
  auto answer = co_await d->stream_->Answer();
  if (!answer.ok()) co_return answer.error();
  auto& f = *answer;
  if (!f) co_return Lost();
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  if (f->type != wire::Type::kStarted)
    co_return MakeError(Code::kInternal, "unexpected agent frame for read");
  try {
    auto j = nlohmann::json::parse(f->payload);
    d->size_ = j.value("size", int64_t{0});
    d->offset_ = j.value("offset", int64_t{0});
    d->length_ = j.value("length", int64_t{0});
  } catch (const std::exception&) {
    co_return MakeError(Code::kInternal, "malformed agent read start");
  }
  co_return std::move(d);
}

asio::awaitable<Result<std::optional<std::string>>> FileDownload::Next() {
  if (done_) co_return std::optional<std::string>();
  auto f = co_await stream_->Next();
  if (!f) co_return Lost();
  if (f->type == wire::Type::kFsReadData)
    co_return std::optional<std::string>(std::move(f->payload));
  done_ = true;
  if (f->type == wire::Type::kFsResult) co_return std::optional<std::string>();
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  co_return MakeError(Code::kInternal, "unexpected agent frame during read");
}

asio::awaitable<Result<std::unique_ptr<FileUpload>>> FileUpload::Start(std::shared_ptr<Sandbox> sb,
                                                                       const std::string& path,
                                                                       const std::string& user,
                                                                       int mode) {
  auto s = OpenFsStream(sb);
  if (!s.ok()) co_return s.error();
  std::unique_ptr<FileUpload> u(new FileUpload(s.value()));
  nlohmann::json req = {{"op", "write"}, {"path", path}, {"mode", mode}};
  if (!user.empty()) req["user"] = user;
  if (auto st = co_await u->stream_->Send(wire::Type::kFsRequest, Dump(req)); !st.ok())
    co_return st.error();
  auto answer = co_await u->stream_->Answer();
  if (!answer.ok()) co_return answer.error();
  auto& f = *answer;
  if (!f) co_return Lost();
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  if (f->type != wire::Type::kStarted)
    co_return MakeError(Code::kInternal, "unexpected agent frame for write");
  co_return std::move(u);
}

asio::awaitable<Status> FileUpload::Write(std::string_view data) {
  // An early error (disk full) arrives while we are still sending.
  bool timed_out = false;
  while (true) {
    auto f = co_await stream_->NextFor(std::chrono::milliseconds(0), &timed_out);
    if (timed_out) break;
    if (!f) co_return Lost();
    if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  }
  for (size_t off = 0; off < data.size(); off += wire::kChunk) {
    if (auto st = co_await stream_->Send(wire::Type::kFsWriteData, data.substr(off, wire::kChunk));
        !st.ok())
      co_return st;
  }
  written_ += data.size();
  co_return Status{};
}

asio::awaitable<Result<nlohmann::json>> FileUpload::Finish() {
  if (auto st = co_await stream_->Send(wire::Type::kFsWriteEnd, {}); !st.ok()) co_return st.error();
  auto answer = co_await stream_->Answer();
  if (!answer.ok()) co_return answer.error();
  auto& f = *answer;
  if (!f) co_return Lost();
  if (f->type == wire::Type::kError) co_return AgentErrorFromPayload(f->payload);
  if (f->type != wire::Type::kFsResult)
    co_return MakeError(Code::kInternal, "unexpected agent frame ending write");
  try {
    auto j = nlohmann::json::parse(f->payload);
    co_return EntryToApi(j.value("entry", nlohmann::json::object()));
  } catch (const std::exception&) {
    co_return MakeError(Code::kInternal, "malformed agent write result");
  }
}

asio::awaitable<Result<std::string>> ReadWholeFile(std::shared_ptr<Sandbox> sb,
                                                   const std::string& path, const std::string& user,
                                                   int64_t max_bytes) {
  auto dl = co_await FileDownload::Start(std::move(sb), path, user, 0, -1);
  if (!dl.ok()) co_return dl.error();
  auto& d = **dl;
  if (d.file_size() > max_bytes)
    co_return MakeError(Code::kInvalidRequest,
                        path + " is " + std::to_string(d.file_size()) + " bytes, more than the " +
                            std::to_string(max_bytes) + " this operation reads whole");
  std::string out;
  out.reserve(static_cast<size_t>(d.length()));
  while (true) {
    auto chunk = co_await d.Next();
    if (!chunk.ok()) co_return chunk.error();
    if (!chunk->has_value()) break;
    out += **chunk;
    d.Consumed((*chunk)->size());
    if (static_cast<int64_t>(out.size()) > max_bytes)
      co_return MakeError(Code::kInvalidRequest,
                          path + " grew past " + std::to_string(max_bytes) + " bytes");
  }
  co_return out;
}

asio::awaitable<Result<nlohmann::json>> WriteWholeFile(std::shared_ptr<Sandbox> sb,
                                                       const std::string& path,
                                                       const std::string& user, int mode,
                                                       std::string_view data) {
  auto up = co_await FileUpload::Start(std::move(sb), path, user, mode);
  if (!up.ok()) co_return up.error();
  if (auto st = co_await (*up)->Write(data); !st.ok()) co_return st.error();
  co_return co_await (*up)->Finish();
}

}  // namespace hutch
