#include "cli/template_spec_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <toml++/toml.h>

#include "common/base64.h"

namespace hutch::cli {
namespace fs = std::filesystem;
using nlohmann::json;

bool ReadFile(const std::string& path, std::string* out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::stringstream ss;
  ss << in.rdbuf();
  *out = ss.str();
  return true;
}

std::optional<std::string> LoadTemplateSpec(const std::string& path) {
  std::string text;
  if (!ReadFile(path, &text)) {
    std::cerr << "hutch: cannot read " << path << "\n";
    return std::nullopt;
  }
  json j;
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') {
    j = json::parse(text, nullptr, false);
    if (j.is_discarded()) {
      std::cerr << "hutch: " << path << ": malformed JSON\n";
      return std::nullopt;
    }
  } else {
    try {
      toml::table t = toml::parse(text, path);
      std::ostringstream os;
      os << toml::json_formatter{t};
      j = json::parse(os.str());
    } catch (const toml::parse_error& e) {
      std::cerr << "hutch: " << path << ":" << e.source().begin.line << ":"
                << e.source().begin.column << ": " << e.description() << "\n";
      return std::nullopt;
    }
  }
  const fs::path dir = fs::absolute(path).parent_path();
  if (j.is_object() && j.contains("files") && j["files"].is_array()) {
    for (auto& f : j["files"]) {
      if (!f.is_object() || !f.contains("src") || !f["src"].is_string()) continue;
      fs::path src = f["src"].get<std::string>();
      if (src.is_relative()) src = dir / src;
      std::string bytes;
      if (!ReadFile(src.string(), &bytes)) {
        std::cerr << "hutch: " << path << ": cannot read file " << src.string() << "\n";
        return std::nullopt;
      }
      f.erase("src");
      f["content_b64"] = Base64Encode(bytes);
    }
  }
  return j.dump();
}

BuildProgress::BuildProgress(bool enabled, bool verbose)
    : tty_(isatty(2) != 0), enabled_(enabled), verbose_(verbose) {}

void BuildProgress::Step(const json& ev) {
  if (!enabled_) return;
  percent_ = ev.value("percent", 0);
  step_ = "[" + std::to_string(ev.value("index", 0)) + "/" + std::to_string(ev.value("of", 0)) +
          "] " + ev.value("name", "");
  last_ = ev.value("detail", "");
  if (!tty_ || verbose_) {
    std::fprintf(stderr, "%s: %s\n", step_.c_str(), last_.c_str());
    return;
  }
  Draw();
}

void BuildProgress::Log(const json& ev) {
  if (!enabled_) return;
  last_ = ev.value("text", "");
  if (verbose_) {
    std::fprintf(stderr, "  %s\n", last_.c_str());
    return;
  }
  if (!tty_) return;
  auto now = std::chrono::steady_clock::now();
  if (now - drawn_ < std::chrono::milliseconds(100)) return;
  Draw();
}

void BuildProgress::Draw() {
  drawn_ = std::chrono::steady_clock::now();
  int bars = percent_ / 4;
  std::string line = last_.substr(0, 48);
  for (char& c : line)
    if (static_cast<unsigned char>(c) < 32) c = ' ';
  std::fprintf(stderr, "\r\033[K[%-25s] %3d%% %s  %s",
               std::string(static_cast<size_t>(bars), '#').c_str(), percent_, step_.c_str(),
               line.c_str());
  std::fflush(stderr);
}

void BuildProgress::Finish() {
  if (enabled_ && tty_ && !verbose_) std::fprintf(stderr, "\r\033[K");
}

}  // namespace hutch::cli
