// Strict readers for JSON request bodies: wrong types, out-of-range numbers
// and unknown fields are invalid_request with the field named, never a
// crash or a silent default.
#pragma once

#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/result.h"

// In a handler coroutine: evaluates a Result, answers its error and returns.
#define HUTCH_FIELD(var, expr) \
  auto var = (expr);           \
  if (!var.ok()) co_return co_await ctx.SendError(var.error());

namespace hutch::api {

Status RejectUnknownFields(const nlohmann::json& j, std::initializer_list<const char*> allowed);
Result<std::optional<std::string>> OptString(const nlohmann::json& j, const char* key);
Result<std::optional<int64_t>> OptInt(const nlohmann::json& j, const char* key, int64_t min,
                                      int64_t max);
Result<std::optional<double>> OptNumber(const nlohmann::json& j, const char* key, double min,
                                        double max);
Result<std::optional<bool>> OptBool(const nlohmann::json& j, const char* key);
Result<std::optional<std::map<std::string, std::string>>> OptStringMap(const nlohmann::json& j,
                                                                       const char* key);
// OptStringMap for environment variables: every name non-empty without
// '=' or NUL and every value without NUL, so that they can reach execve.
// Shared by the create handlers of every dialect.
Result<std::optional<std::map<std::string, std::string>>> OptEnvMap(const nlohmann::json& j,
                                                                    const char* key);
Result<std::optional<std::vector<std::string>>> OptStringArray(const nlohmann::json& j,
                                                               const char* key);
// Parses an integer query parameter.
Result<std::optional<int64_t>> QueryInt(const std::optional<std::string>& v, const char* key,
                                        int64_t min, int64_t max);
// An RFC 3339 time from a client: "2026-12-01T10:00:00.000Z" or with a
// "+hh:mm" offset; any number of fraction digits (milliseconds kept).
Result<SysTime> ParseRfc3339(const std::string& s);
// Paths from clients: non-empty, no NUL, bounded length.
Status CheckPath(const std::string& p, const char* key);

}  // namespace hutch::api
