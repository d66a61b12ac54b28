#include "http/api_metrics.h"

#include "http/connection_budget.h"

namespace hutch::api {

namespace {
// From a warm create (a few ms) to a first start that builds its rootfs
// (tens of seconds); the create path's own timeouts end near 30 s.
const std::vector<double> kCreateBuckets = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                            1,     2.5,  5,     10,   20,  30};
}  // namespace

ApiMetrics::ApiMetrics()
    : sandboxes_running(
          registry.AddGauge("hutch_sandboxes_running", "Sandboxes running or paused.")),
      sandboxes_warm(registry.AddGauge(
          "hutch_sandboxes_warm",
          "Sandboxes started ahead of demand (--warm-pool) that no create has claimed yet.")),
      sandboxes(registry.AddGaugeFamily(
          "hutch_sandboxes",
          "Sandboxes known to the manager by state (stopped ones are kept an hour).", {"state"})),
      sandboxes_created(registry.AddCounter("hutch_sandboxes_created_total", "Sandboxes created.")),
      sandbox_create_failures(registry.AddCounter("hutch_sandbox_create_failures_total",
                                                  "Sandbox creates that failed.")),
      sandbox_create_seconds(registry.AddHistogram(
          "hutch_sandbox_create_seconds",
          "Time to create a sandbox until it can run commands (successful creates).",
          kCreateBuckets)),
      execs(registry.AddCounter("hutch_execs_total", "Commands started.")),
      open_streams(registry.AddGauge("hutch_open_streams", "Exec event streams in progress.")),
      exec_output_held(
          registry.AddGauge("hutch_exec_output_held_bytes",
                            "Output blocking exec answers hold now, counted after encoding "
                            "(bounded by --exec-buffer-budget-mb).")),
      http_requests(registry.AddCounterFamily("hutch_http_requests_total",
                                              "HTTP requests handled, by method and status class.",
                                              {"method", "status_class"})),
      http_errors_5xx(
          registry.AddCounter("hutch_http_errors_5xx_total", "HTTP responses with a 5xx status.")),
      errors(registry.AddCounterFamily(
          "hutch_errors_total",
          "Errors answered to clients (JSON errors and stream error events) by code.", {"code"})),
      network_slots(registry.AddGaugeFamily("hutch_network_slots",
                                            "Network slots (namespace, veth, rules) by state: warm "
                                            "(ready for a create) or leased (a sandbox's).",
                                            {"state"})),
      disk_pool_ready(registry.AddGauge(
          "hutch_disk_pool_ready",
          "Jail sandbox disk images formatted ahead of creates and ready (--warm-disks).")),
      disk_pool_target(registry.AddGauge(
          "hutch_disk_pool_target",
          "Jail sandbox disk images the pool aims to hold now (follows recent creates).")),
      rate_limit_buckets(registry.AddGauge("hutch_rate_limit_buckets",
                                           "API keys with a partly used rate-limit bucket.")),
      image_pulls(registry.AddGauge(
          "hutch_image_pulls",
          "OCI images pulled from a registry since hutchd started (failed pulls included).")),
      image_cache_hits(registry.AddGauge(
          "hutch_image_cache_hits",
          "Uses of an OCI image template since hutchd started that needed no pull.")),
      image_layers_reused(registry.AddGauge(
          "hutch_image_layers_reused",
          "Image layers since hutchd started that a pull found unpacked already (shared with "
          "another image) and did not unpack again.")),
      connections(registry.AddGaugeFamily(
          "hutch_http_connections",
          "Client connections open, by state: authenticated (a request passed a credential "
          "check) or unauthenticated.",
          {"state"})),
      connections_evicted(registry.AddCounterFamily(
          "hutch_http_connections_evicted_total",
          "Unauthenticated connections closed to make room for a new connection, by the limit "
          "that was reached.",
          {"reason"})),
      connections_refused(registry.AddCounter(
          "hutch_http_connections_refused_total",
          "New connections answered 503 because every open connection had authenticated.")),
      uptime_seconds(
          registry.AddGauge("hutch_process_uptime_seconds", "Seconds since hutchd started.")) {
  // Every label value from the start, so a scrape shows zeros rather than
  // nothing before the first event.
  for (const char* state : {"authenticated", "unauthenticated"}) connections.With({state});
  for (auto r : {EvictReason::kSource, EvictReason::kBudget, EvictReason::kCapacity})
    connections_evicted.With({EvictReasonName(r)});
}

void ApiMetrics::CountRequest(std::string_view method, int status) {
  std::string cls = status >= 100 && status <= 599 ? std::to_string(status / 100) + "xx" : "none";
  ++http_requests.With({std::string(method), cls});
  if (status >= 500 && status <= 599) ++http_errors_5xx;
}

void ApiMetrics::CountError(Code code) { ++errors.With({CodeName(code)}); }

}  // namespace hutch::api
