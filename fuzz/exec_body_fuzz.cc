// The exec/process request body decoder: any JSON a client sends is either
// a clear error or a request whose argv and env hold no NUL bytes.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "api/common/exec_body.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return 0;
  auto b = hutch::api::ParseExecBody(j, 60);
  if (!b.ok()) {
    if (b.error().message.empty()) abort();
    return 0;
  }
  if (b->req.argv.empty() || b->req.argv[0].empty()) abort();
  for (const auto& a : b->req.argv)
    if (a.find('\0') != std::string::npos) abort();
  for (const auto& [k, v] : b->req.env)
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos) abort();
  if (b->req.timeout_seconds < 0) abort();
  return 0;
}
