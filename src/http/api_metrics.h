// The metrics hutchd exports on GET /metrics (names documented in
// docs/api.md). Handlers bump them where things happen; the values that
// live elsewhere (sandboxes by state, uptime) are refreshed at scrape time
// by HutchApi::ServeMetrics (src/server). I/O thread only, like the Router
// that owns it.
#pragma once

#include <chrono>
#include <string>

#include "common/result.h"
#include "http/metrics.h"

namespace hutch::api {

struct ApiMetrics {
  ApiMetrics();
  ApiMetrics(const ApiMetrics&) = delete;
  ApiMetrics& operator=(const ApiMetrics&) = delete;

  // One finished request: by method and status class ("2xx"…, or "none"
  // when the client left before any answer).
  void CountRequest(std::string_view method, int status);
  // One error answered to a client (a JSON error or an SSE error event).
  void CountError(Code code);

  Registry registry;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();

  Gauge& sandboxes_running;  // kept from the first release: running + paused
  Gauge& sandboxes_warm;
  Family<Gauge>& sandboxes;  // {state}
  Counter& sandboxes_created;
  Counter& sandbox_create_failures;
  Histogram& sandbox_create_seconds;
  Counter& execs;
  Gauge& open_streams;
  Gauge& exec_output_held;         // read at scrape time from /v1's OutputBudget
  Family<Counter>& http_requests;  // {method, status_class}
  Counter& http_errors_5xx;
  Family<Counter>& errors;       // {code}
  Family<Gauge>& network_slots;  // {state}: warm, leased
  Gauge& disk_pool_ready;
  Gauge& disk_pool_target;
  Gauge& rate_limit_buckets;
  Gauge& image_pulls;                    // since start: images pulled from a registry
  Gauge& image_cache_hits;               // since start: image creates that needed no pull
  Gauge& image_layers_reused;            // since start: layers found unpacked already
  Family<Gauge>& connections;            // {state}: authenticated, unauthenticated
  Family<Counter>& connections_evicted;  // {reason}: EvictReasonName
  Counter& connections_refused;
  Gauge& uptime_seconds;
};

}  // namespace hutch::api
