// The answer of a blocking exec (/v1 POST .../exec), written from the
// output its KeptOutputs hold:
//
//   {"exit_code":0,...,"stdout_bytes":N,"stdout_truncated":false,...,
//    "stdout":"<text>"  or  "stdout":"","stdout_b64":"<base64>", same for stderr}
//
// A small answer goes out whole. A big one is streamed (chunked): the
// encoding (JSON escapes or base64) runs on `worker`, a piece at a time,
// never on the I/O thread, and never as one string; each piece written
// gives its bytes back to the budget's lease.
#pragma once

#include <boost/asio/awaitable.hpp>

#include "api/common/kept_output.h"
#include "api/common/output_budget.h"
#include "common/blocking_worker.h"
#include "core/exec_request.h"
#include "http/http_context.h"

namespace hutch::api {

// Answers bigger than this (both streams, encoded) are streamed.
inline constexpr size_t kExecAnswerInline = 64 << 10;

asio::awaitable<void> SendExecAnswer(HttpContext& ctx, BlockingWorker& worker, const ExitInfo& exit,
                                     KeptOutput& out, KeptOutput& err, OutputBudget::Lease& lease);

}  // namespace hutch::api
