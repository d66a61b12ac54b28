// File streams: kFsRequest dispatch, credit-paced reads, temp-file writes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "agent/agent.h"
#include "agent/passwd.h"
#include "common/rooted_fs.h"

namespace hutch::agent {

using nlohmann::json;
using wire::Type;

namespace {

struct FsRequest {
  std::string op;
  std::string path;  // normalized, absolute
  std::string to;    // move only, normalized
  User user;
  json j;
};

Result<FsRequest> ParseFs(std::string_view payload) {
  FsRequest r;
  std::string user = "root", path, to;
  try {
    r.j = json::parse(payload);
    if (!r.j.is_object()) return MakeError(Code::kInvalidRequest, "fs request is not an object");
    r.op = r.j.at("op").get<std::string>();
    path = r.j.at("path").get<std::string>();
    if (r.j.contains("user") && !r.j["user"].is_null())
      user = r.j["user"].is_number_unsigned() ? std::to_string(r.j["user"].get<uint64_t>())
                                              : r.j["user"].get<std::string>();
    if (r.op == "move") to = r.j.at("to").get<std::string>();
  } catch (const json::exception& e) {
    return MakeError(Code::kInvalidRequest, std::string("bad fs request: ") + e.what());
  }
  auto u = LookupUser(user);
  if (!u.ok()) return u.error();
  r.user = std::move(*u);
  auto p = NormalizePath(path, r.user.home);
  if (!p.ok()) return p.error();
  r.path = std::move(*p);
  if (r.op == "move") {
    auto t = NormalizePath(to, r.user.home);
    if (!t.ok()) return t.error();
    r.to = std::move(*t);
  }
  return r;
}

}  // namespace

void Agent::SendListing(Connection& c, uint32_t stream, const json& entries) {
  // Parts of about half the frame limit: a directory of thousands of long
  // names is an answer of megabytes, and one frame may carry only 1 MiB.
  constexpr size_t kPartBytes = wire::kMaxPayload / 2;
  std::string part = "{\"entries\":[";
  bool empty = true;
  for (const auto& e : entries) {
    std::string one = DumpJson(e);
    if (!empty && part.size() + one.size() + 2 > kPartBytes) {
      Send(c, Type::kFsEntries, stream, part + "]}");
      part = "{\"entries\":[";
      empty = true;
    }
    if (!empty) part += ',';
    part += one;
    empty = false;
  }
  Send(c, Type::kFsResult, stream, part + "]}");
}

void Agent::StartFs(Connection& c, const wire::Frame& f) {
  const uint32_t s = f.stream;
  auto req = ParseFs(f.payload);
  if (!req.ok()) return SendError(c, s, req.error());
  const json& j = req->j;
  // The sandbox's root is the tree every path lives in.
  UniqueFd root(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return SendError(c, s, FsError("open", "/", errno));
  const int r = root.get();
  FsIdentity identity(req->user.uid, req->user.gid);
  try {
    if (req->op == "stat") {
      auto e = StatEntry(r, req->path);
      return e.ok() ? SendJson(c, Type::kFsResult, s, {{"entry", *e}}) : SendError(c, s, e.error());
    }
    if (req->op == "list") {
      const int depth = j.value("depth", 1);
      if (depth < 1) return SendError(c, s, MakeError(Code::kInvalidRequest, "depth must be >= 1"));
      auto e = ListEntries(r, req->path, depth);
      if (!e.ok()) return SendError(c, s, e.error());
      return SendListing(c, s, *e);
    }
    if (req->op == "mkdir") {
      auto e = MakeDirs(r, req->path);
      return e.ok() ? SendJson(c, Type::kFsResult, s, {{"entry", *e}}) : SendError(c, s, e.error());
    }
    if (req->op == "remove") {
      auto st = Remove(r, req->path, j.value("recursive", false));
      return st.ok() ? SendJson(c, Type::kFsResult, s, json::object())
                     : SendError(c, s, st.error());
    }
    if (req->op == "move") {
      auto e = Move(r, req->path, req->to);
      return e.ok() ? SendJson(c, Type::kFsResult, s, {{"entry", *e}}) : SendError(c, s, e.error());
    }
    if (req->op == "chmod") {
      auto e = SetAttributes(r, req->path, j.value("mode", -1), j.value("uid", int64_t{-1}),
                             j.value("gid", int64_t{-1}));
      return e.ok() ? SendJson(c, Type::kFsResult, s, {{"entry", *e}}) : SendError(c, s, e.error());
    }
    if (req->op == "read") {
      auto src =
          OpenForRead(r, req->path, j.value("offset", int64_t{0}), j.value("length", int64_t{-1}));
      if (!src.ok()) return SendError(c, s, src.error());
      SendJson(c, Type::kStarted, s,
               {{"size", src->size}, {"offset", src->offset}, {"length", src->length}});
      FsRead& r = c.reads[s];
      r.fd = std::move(src->fd);
      r.pos = src->offset;
      r.remaining = src->length;
      return;  // PumpReads streams the data from the event loop
    }
    if (req->op == "write") {
      const int mode = j.value("mode", 0644);
      if (mode < 0 || mode > 07777)
        return SendError(c, s, MakeError(Code::kInvalidRequest, "bad mode"));
      auto t = TempFile::Create(r, req->path, static_cast<mode_t>(mode));
      if (!t.ok()) return SendError(c, s, t.error());
      FsWrite& w = c.writes[s];
      w.file = std::move(*t);
      w.uid = req->user.uid;
      w.gid = req->user.gid;
      return SendJson(c, Type::kStarted, s, json::object());
    }
  } catch (const json::exception& e) {
    return SendError(c, s,
                     MakeError(Code::kInvalidRequest, std::string("bad fs request: ") + e.what()));
  }
  SendError(c, s, MakeError(Code::kInvalidRequest, "unknown op " + req->op));
}

void Agent::OnReadFrame(Connection& c, uint32_t stream, const wire::Frame& f) {
  if (f.type == Type::kCredit) {
    c.reads[stream].credit += wire::DecodeCredit(f.payload);
  } else if (f.type == Type::kCancel) {
    c.reads.erase(stream);
    SendError(c, stream, "cancelled", 0, "read cancelled");
  }
}

void Agent::OnWriteFrame(Connection& c, uint32_t stream, const wire::Frame& f) {
  FsWrite& w = c.writes[stream];
  if (f.type == Type::kFsWriteData) {
    FsIdentity identity(w.uid, w.gid);  // quota and file size limits are per fs user
    Status st = w.file.Append(f.payload.data(), f.payload.size());
    if (!st.ok()) {
      c.writes.erase(stream);  // unlinks the temp file
      SendError(c, stream, st.error());
    }
  } else if (f.type == Type::kFsWriteEnd) {
    Result<json> e = [&] {
      FsIdentity identity(w.uid, w.gid);
      return w.file.Commit();
    }();
    c.writes.erase(stream);
    e.ok() ? SendJson(c, Type::kFsResult, stream, {{"entry", *e}})
           : SendError(c, stream, e.error());
  } else if (f.type == Type::kCancel) {
    c.writes.erase(stream);
    SendError(c, stream, "cancelled", 0, "write cancelled");
  }
}

bool Agent::PumpReads(Connection& c) {
  static char buf[wire::kChunk];
  bool more = false;
  for (auto it = c.reads.begin(); it != c.reads.end() && !c.dead;) {
    const uint32_t stream = it->first;
    FsRead& r = it->second;
    if (r.remaining == 0) {
      const uint64_t sent = r.sent;
      it = c.reads.erase(it);
      SendJson(c, Type::kFsResult, stream, {{"bytes", sent}});
      continue;
    }
    if (r.credit <= 0) {
      ++it;
      continue;
    }
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>({static_cast<uint64_t>(r.credit), wire::kChunk, r.remaining}));
    ssize_t n = pread(r.fd.get(), buf, want, static_cast<off_t>(r.pos));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      it = c.reads.erase(it);
      SendError(c, stream, FsError("read", "stream " + std::to_string(stream), err));
      continue;
    }
    if (n == 0) {
      r.remaining = 0;  // the file shrank: report what was sent
    } else {
      r.pos += static_cast<uint64_t>(n);
      r.sent += static_cast<uint64_t>(n);
      r.remaining -= static_cast<uint64_t>(n);
      r.credit -= n;
      Send(c, Type::kFsReadData, stream, std::string_view(buf, static_cast<size_t>(n)));
    }
    more = more || r.remaining == 0 || r.credit > 0;
    ++it;
  }
  return more;
}

}  // namespace hutch::agent
