// File operations inside a sandbox. Every one is performed by the agent in
// the sandbox's own root: the host never opens a sandbox-controlled path.
// Uploads and downloads are streamed in chunks with flow control, so their
// size never shows up in hutchd's memory.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/sandbox.h"
#include "driver/agent_connection.h"

namespace hutch {

// stat, list, mkdir, remove, move: one request, one JSON answer.
asio::awaitable<Result<nlohmann::json>> FsCall(std::shared_ptr<Sandbox> sb, nlohmann::json request);

// Converts the agent's entry (mtime as unix seconds) to the API's shape.
nlohmann::json EntryToApi(const nlohmann::json& agent_entry);

class FileDownload {
 public:
  // length < 0: to the end of the file.
  static asio::awaitable<Result<std::unique_ptr<FileDownload>>> Start(std::shared_ptr<Sandbox> sb,
                                                                      const std::string& path,
                                                                      const std::string& user,
                                                                      int64_t offset,
                                                                      int64_t length);
  int64_t file_size() const { return size_; }
  int64_t offset() const { return offset_; }
  int64_t length() const { return length_; }
  // Next chunk; empty optional at the end. Call Consumed() once sent on.
  asio::awaitable<Result<std::optional<std::string>>> Next();
  void Consumed(size_t n) { stream_->Consumed(n); }

 private:
  explicit FileDownload(std::shared_ptr<AgentStream> s) : stream_(std::move(s)) {}
  std::shared_ptr<AgentStream> stream_;
  int64_t size_ = 0, offset_ = 0, length_ = 0;
  bool done_ = false;
};

class FileUpload {
 public:
  static asio::awaitable<Result<std::unique_ptr<FileUpload>>> Start(std::shared_ptr<Sandbox> sb,
                                                                    const std::string& path,
                                                                    const std::string& user,
                                                                    int mode);
  // Appends bytes (any size; split into frames). Fails early if the agent
  // already reported an error (disk full, permission).
  asio::awaitable<Status> Write(std::string_view data);
  // Completes the upload; returns the API entry of the file.
  asio::awaitable<Result<nlohmann::json>> Finish();

 private:
  explicit FileUpload(std::shared_ptr<AgentStream> s) : stream_(std::move(s)) {}
  std::shared_ptr<AgentStream> stream_;
  uint64_t written_ = 0;
};

// A whole small file (config files, a file to edit in place): refuses one
// larger than `max_bytes` instead of holding it.
asio::awaitable<Result<std::string>> ReadWholeFile(std::shared_ptr<Sandbox> sb,
                                                   const std::string& path, const std::string& user,
                                                   int64_t max_bytes);
// Writes `data` as the whole new content of `path` (temp file + rename);
// returns the API entry of the file.
asio::awaitable<Result<nlohmann::json>> WriteWholeFile(std::shared_ptr<Sandbox> sb,
                                                       const std::string& path,
                                                       const std::string& user, int mode,
                                                       std::string_view data);

}  // namespace hutch
