#include "tests/support/code_run.h"

namespace hutch::testing {

using nlohmann::json;

std::string CodeRun::Out(const char* stream) const {
  std::string s;
  for (const auto& e : events)
    if (e.name == stream) s += e.data.value("text", "");
  return s;
}

json CodeRun::Error() const {
  for (const auto& e : events)
    if (e.name == "error") return e.data;
  return nullptr;
}

std::vector<json> CodeRun::Results() const {
  std::vector<json> r;
  for (const auto& e : events)
    if (e.name == "result") r.push_back(e.data);
  return r;
}

json CodeRun::End() const {
  return events.empty() || events.back().name != "end" ? json() : events.back().data;
}

CodeRun RunCode(const TestServer& s, const std::string& id, const json& body, size_t stop_after) {
  CodeRun r;
  auto c = s.Client();
  auto res = c.SseRequest("POST", "/v1/sandboxes/" + id + "/code", body.dump(),
                          {{"Content-Type", "application/json"}}, [&](const client::SseEvent& e) {
                            r.events.push_back({e.event, json::parse(e.data, nullptr, false)});
                            return stop_after == 0 || r.events.size() < stop_after;
                          });
  r.status = res.status;
  r.body = res.body;
  return r;
}

}  // namespace hutch::testing
